import { MigrationInterface, QueryRunner } from "typeorm";

const ROLLUPS = ["usage_minute", "usage_hour", "usage_day"] as const;

/**
 * Compute units (issue 28 §1): every usage rollup keeps the compute units of its `count` request objects
 * beside the count. Rows written before compute units existed were all charged a weight of 1, so they are
 * backfilled with their request count; the default 0 only applies to rows inserted without the column.
 */
export class UsageComputeUnits1700000025200 implements MigrationInterface {
  name = "UsageComputeUnits1700000025200";

  async up(q: QueryRunner): Promise<void> {
    for (const table of ROLLUPS) {
      await q.query(`ALTER TABLE ${table} ADD COLUMN compute_units bigint NOT NULL DEFAULT 0`);
      await q.query(`UPDATE ${table} SET compute_units = count`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of ROLLUPS) {
      await q.query(`ALTER TABLE ${table} DROP COLUMN compute_units`);
    }
  }
}
