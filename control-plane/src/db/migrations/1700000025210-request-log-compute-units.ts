import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Request log (issue 28 §1): the compute units a request object was charged (its method's weight). Null
 * for records from data planes older than compute units, which charged every request object 1. Added to
 * the partitioned parent, so every day partition has it.
 */
export class RequestLogComputeUnits1700000025210 implements MigrationInterface {
  name = "RequestLogComputeUnits1700000025210";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE request_log ADD COLUMN compute_units integer`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE request_log DROP COLUMN compute_units`);
  }
}
