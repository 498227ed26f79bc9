import { MigrationInterface, QueryRunner } from "typeorm";

/** Dedicated nodes (one key per node, stored like app keys) and their event history. */
export class DedicatedNodes1700000002000 implements MigrationInterface {
  name = "DedicatedNodes1700000002000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE dedicated_nodes (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        network_id uuid NOT NULL REFERENCES networks(id) ON DELETE RESTRICT,
        display_name varchar(64) NOT NULL,
        node_type text NOT NULL CHECK (node_type IN ('FULL', 'ARCHIVE', 'VALIDATOR')),
        image_version text NOT NULL,
        region text NOT NULL,
        lightning_restore boolean NOT NULL DEFAULT false,
        rpc_methods text NOT NULL CHECK (rpc_methods IN ('SAFE', 'UNSAFE')),
        extra_args jsonb NOT NULL DEFAULT '[]'::jsonb,
        status text NOT NULL,
        status_reason text NULL,
        desired_state text NOT NULL CHECK (desired_state IN ('RUNNING', 'STOPPED', 'DELETED')),
        generation integer NOT NULL DEFAULT 0,
        provider text NOT NULL,
        provider_state jsonb NOT NULL DEFAULT '{}'::jsonb,
        internal_http_url text NULL,
        internal_ws_url text NULL,
        key_hash text NOT NULL UNIQUE,
        key_ciphertext text NOT NULL,
        current_block bigint NULL,
        highest_block bigint NULL,
        peers integer NULL,
        synced_at timestamptz NULL,
        validator_stash text NULL,
        validator_status text NULL,
        session_keys_at timestamptz NULL,
        keys_on_chain boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX ix_dedicated_nodes_workspace ON dedicated_nodes(workspace_id, created_at)`);
    await q.query(`CREATE INDEX ix_dedicated_nodes_status ON dedicated_nodes(status)`);
    await q.query(`
      CREATE TABLE dedicated_node_events (
        id bigserial PRIMARY KEY,
        node_id uuid NOT NULL REFERENCES dedicated_nodes(id) ON DELETE CASCADE,
        at timestamptz NOT NULL DEFAULT clock_timestamp(),
        type text NOT NULL,
        message text NOT NULL
      )`);
    await q.query(`CREATE INDEX ix_dedicated_node_events_node ON dedicated_node_events(node_id, at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS dedicated_node_events`);
    await q.query(`DROP TABLE IF EXISTS dedicated_nodes`);
  }
}
