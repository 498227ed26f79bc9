import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Apps a workspace on the plan may have (`Plan.maxApps`; null = no plan limit, the fixed guard of
 * MAX_APPS_PER_WORKSPACE still applies). The per-second limit is per workspace, so more apps buy no
 * throughput; the cap bounds what one tenant costs the control plane and Redis (key records, publication,
 * GraphQL lists). Seeded: free 20 (a few projects x development / staging / production), growth 100,
 * enterprise none; plans the operator added keep no limit until set.
 */
export class PlanMaxApps1700000018300 implements MigrationInterface {
  name = "PlanMaxApps1700000018300";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE plans ADD COLUMN max_apps integer NULL CHECK (max_apps >= 0)`);
    await q.query(`UPDATE plans SET max_apps = 20 WHERE name = 'free'`);
    await q.query(`UPDATE plans SET max_apps = 100 WHERE name = 'growth'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE plans DROP COLUMN max_apps`);
  }
}
