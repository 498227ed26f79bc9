import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Per-network ceiling on the blocks one eth_getLogs may span (issue 13 §4). 0 = no limit; existing
 * networks get the default, the same as shared/src/redis/records.ts DEFAULT_MAX_LOGS_BLOCK_RANGE.
 */
export class NetworkLogsRange1700000004000 implements MigrationInterface {
  name = "NetworkLogsRange1700000004000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      "ALTER TABLE networks ADD COLUMN max_logs_block_range integer NOT NULL DEFAULT 10000 CHECK (max_logs_block_range >= 0)",
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query("ALTER TABLE networks DROP COLUMN max_logs_block_range");
  }
}
