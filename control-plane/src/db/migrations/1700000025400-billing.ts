import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Billing (docs/billing.md).
 *
 * `workspace_plan_periods`: which plan each workspace was on, and from when to when, so a monthly statement
 * can name the plan or plans in force. A trigger on `workspaces` writes it (INSERT, and UPDATE of
 * `plan_id`), so every path that changes a plan (changePlan, setWorkspacePlan, sign-up, a CLI, plain SQL)
 * is recorded without each one remembering to. `clock_timestamp()`, not `now()`: two transactions changing
 * one workspace's plan are serialised by the row lock, and the later one must close the earlier one's
 * period after it started, whichever transaction began first; the closed period ends at the instant the
 * new one starts. Backfilled with each workspace's current plan from its creation (earlier changes were
 * not kept).
 *
 * `usage_daily_events`: one row per workspace and UTC day whose `usage.daily` event was recorded; the
 * primary key is what makes the event once-only across job re-runs and several workers.
 */
export class Billing1700000025400 implements MigrationInterface {
  name = "Billing1700000025400";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE workspace_plan_periods (
        id bigserial PRIMARY KEY,
        workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        plan_id uuid NOT NULL REFERENCES plans(id),
        started_at timestamptz NOT NULL,
        ended_at timestamptz NULL,
        CHECK (ended_at IS NULL OR ended_at >= started_at)
      )`);
    // At most one open period per workspace.
    await q.query(
      `CREATE UNIQUE INDEX ux_workspace_plan_periods_open ON workspace_plan_periods (workspace_id) WHERE ended_at IS NULL`,
    );
    await q.query(
      `CREATE INDEX ix_workspace_plan_periods_workspace ON workspace_plan_periods (workspace_id, started_at)`,
    );
    await q.query(`
      CREATE FUNCTION record_workspace_plan_period() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        at timestamptz := clock_timestamp();
      BEGIN
        IF TG_OP = 'UPDATE' THEN
          IF NEW.plan_id IS NOT DISTINCT FROM OLD.plan_id THEN
            RETURN NEW;
          END IF;
          UPDATE workspace_plan_periods SET ended_at = at
          WHERE workspace_id = NEW.id AND ended_at IS NULL;
        END IF;
        INSERT INTO workspace_plan_periods (workspace_id, plan_id, started_at) VALUES (NEW.id, NEW.plan_id, at);
        RETURN NEW;
      END
      $$`);
    await q.query(`
      CREATE TRIGGER trg_workspace_plan_periods AFTER INSERT OR UPDATE OF plan_id ON workspaces
      FOR EACH ROW EXECUTE FUNCTION record_workspace_plan_period()`);
    await q.query(`
      INSERT INTO workspace_plan_periods (workspace_id, plan_id, started_at)
      SELECT id, plan_id, created_at FROM workspaces`);
    await q.query(`
      CREATE TABLE usage_daily_events (
        workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        day date NOT NULL,
        event_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace_id, day)
      )`);
    await q.query(`CREATE INDEX ix_usage_daily_events_created ON usage_daily_events (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE usage_daily_events`);
    await q.query(`DROP TRIGGER trg_workspace_plan_periods ON workspaces`);
    await q.query(`DROP FUNCTION record_workspace_plan_period()`);
    await q.query(`DROP TABLE workspace_plan_periods`);
  }
}
