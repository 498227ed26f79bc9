import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Webhooks (issue 17 §2): endpoints with their sealed signing secret, deliveries (one event for one
 * endpoint) and their attempts.
 */
export class Webhooks1700000017200 implements MigrationInterface {
  name = "Webhooks1700000017200";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE webhook_endpoints (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        url text NOT NULL,
        description varchar(200) NULL,
        event_types text[] NOT NULL,
        enabled boolean NOT NULL DEFAULT true,
        secret_ciphertext text NOT NULL,
        secret_created_at timestamptz NOT NULL DEFAULT now(),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(
      `CREATE INDEX ix_webhook_endpoints_workspace ON webhook_endpoints(workspace_id, created_at)`,
    );
    await q.query(`
      CREATE TABLE webhook_deliveries (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
        workspace_id uuid NOT NULL,
        event_id text NOT NULL,
        event_type text NOT NULL,
        payload text NOT NULL,
        status text NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED')),
        attempt_count integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        completed_at timestamptz NULL,
        CONSTRAINT uq_webhook_deliveries_endpoint_event UNIQUE (endpoint_id, event_id)
      )`);
    await q.query(
      `CREATE INDEX ix_webhook_deliveries_endpoint ON webhook_deliveries(endpoint_id, created_at DESC, id DESC)`,
    );
    await q.query(`CREATE INDEX ix_webhook_deliveries_created ON webhook_deliveries(created_at)`);
    await q.query(`
      CREATE TABLE webhook_attempts (
        id bigserial PRIMARY KEY,
        delivery_id uuid NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
        attempt integer NOT NULL,
        status_code integer NULL,
        error text NULL,
        duration_ms integer NOT NULL,
        response_excerpt text NULL,
        at timestamptz NOT NULL,
        CONSTRAINT uq_webhook_attempts_delivery_attempt UNIQUE (delivery_id, attempt)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS webhook_attempts`);
    await q.query(`DROP TABLE IF EXISTS webhook_deliveries`);
    await q.query(`DROP TABLE IF EXISTS webhook_endpoints`);
  }
}
