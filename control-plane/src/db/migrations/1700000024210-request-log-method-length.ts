import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Request log (issue 24 §2): a client's method name is stored made safe (cut to 100 characters, characters
 * Postgres refuses replaced); `method_length` keeps the original's length when the stored name differs from
 * it, null otherwise. Added to the partitioned parent, so every day partition has it.
 */
export class RequestLogMethodLength1700000024210 implements MigrationInterface {
  name = "RequestLogMethodLength1700000024210";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE request_log ADD COLUMN method_length integer`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE request_log DROP COLUMN method_length`);
  }
}
