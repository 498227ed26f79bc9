import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Platform operator accounts (issue 17 §1): an account whose token may do what ADMIN_TOKEN does for
 * platform resources (networks, upstreams, plans, every workspace's plan). Off by default; granted by
 * `setOperator` (operator only) or to the first account `npm start` creates.
 */
export class AccountOperator1700000017600 implements MigrationInterface {
  name = "AccountOperator1700000017600";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE accounts ADD COLUMN is_operator boolean NOT NULL DEFAULT false`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE accounts DROP COLUMN is_operator`);
  }
}
