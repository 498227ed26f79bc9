import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Plans a workspace owner may pick for itself (`changePlan`). Off by default, so a plan the operator adds
 * is private until they say otherwise; of the seeded plans, `free` and `growth` are self-service and
 * `enterprise` is not.
 */
export class PlanSelfService1700000003000 implements MigrationInterface {
  name = "PlanSelfService1700000003000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE plans ADD COLUMN self_service boolean NOT NULL DEFAULT false`);
    await q.query(`UPDATE plans SET self_service = true WHERE name IN ('free', 'growth')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE plans DROP COLUMN self_service`);
  }
}
