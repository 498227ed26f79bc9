import { MigrationInterface, QueryRunner } from "typeorm";

/** Initial schema and the seed plans (operator-editable rows afterwards). */
export class Initial1700000000000 implements MigrationInterface {
  name = "Initial1700000000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE accounts (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        email text NOT NULL UNIQUE,
        password_hash text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE plans (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        name text NOT NULL UNIQUE,
        daily_request_limit bigint NOT NULL CHECK (daily_request_limit > 0),
        requests_per_second integer NOT NULL CHECK (requests_per_second > 0),
        monthly_request_limit bigint NULL CHECK (monthly_request_limit > 0),
        max_dedicated_nodes integer NOT NULL DEFAULT 0 CHECK (max_dedicated_nodes >= 0),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE workspaces (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        name varchar(64) NOT NULL,
        plan_id uuid NOT NULL REFERENCES plans(id) ON DELETE RESTRICT,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX ix_workspaces_plan ON workspaces(plan_id)`);
    await q.query(`
      CREATE TABLE memberships (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        role text NOT NULL CHECK (role IN ('OWNER', 'MEMBER')),
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT uq_memberships_account_workspace UNIQUE (account_id, workspace_id)
      )`);
    await q.query(`CREATE INDEX ix_memberships_workspace ON memberships(workspace_id)`);
    await q.query(`
      CREATE TABLE access_tokens (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        token_hash text NOT NULL UNIQUE,
        kind text NOT NULL CHECK (kind IN ('SESSION', 'PERSONAL')),
        name varchar(64) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NULL,
        revoked_at timestamptz NULL
      )`);
    await q.query(`CREATE INDEX ix_access_tokens_account ON access_tokens(account_id)`);
    await q.query(`
      CREATE TABLE apps (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        name varchar(64) NOT NULL,
        environment text NOT NULL CHECK (environment IN ('PRODUCTION', 'DEVELOPMENT')),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX ix_apps_workspace ON apps(workspace_id)`);
    await q.query(`
      CREATE TABLE api_keys (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        app_id uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
        key_hash text NOT NULL UNIQUE,
        key_ciphertext text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NULL,
        revoked_at timestamptz NULL
      )`);
    await q.query(`CREATE INDEX ix_api_keys_app ON api_keys(app_id)`);
    // Exactly one current key per app (a replaced key in its grace period has expires_at set).
    await q.query(
      `CREATE UNIQUE INDEX uq_api_keys_current ON api_keys(app_id) WHERE revoked_at IS NULL AND expires_at IS NULL`,
    );
    await q.query(`
      CREATE TABLE allowlist_entries (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        app_id uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
        kind text NOT NULL CHECK (kind IN ('ORIGIN', 'IP')),
        value text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT uq_allowlist_entries_app_kind_value UNIQUE (app_id, kind, value)
      )`);
    await q.query(`
      CREATE TABLE networks (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        slug text NOT NULL UNIQUE,
        name varchar(64) NOT NULL,
        protocol text NOT NULL CHECK (protocol IN ('EVM', 'SUBSTRATE')),
        chain_id integer NULL,
        allow_debug boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE upstreams (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        network_id uuid NOT NULL REFERENCES networks(id) ON DELETE CASCADE,
        http_url text NOT NULL,
        ws_url text NULL,
        weight integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX ix_upstreams_network ON upstreams(network_id)`);
    await q.query(`
      INSERT INTO plans (name, daily_request_limit, requests_per_second, monthly_request_limit, max_dedicated_nodes)
      VALUES ('free', 500000, 50, NULL, 0),
             ('growth', 5000000, 500, NULL, 2),
             ('enterprise', 100000000, 5000, NULL, 20)`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of [
      "upstreams",
      "networks",
      "allowlist_entries",
      "api_keys",
      "apps",
      "access_tokens",
      "memberships",
      "workspaces",
      "plans",
      "accounts",
    ]) {
      await q.query(`DROP TABLE IF EXISTS ${t}`);
    }
  }
}
