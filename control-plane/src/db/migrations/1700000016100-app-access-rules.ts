import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Per-app access rules (issue 16 §2) and JWT public keys (§3). An app without a row in app_access_rules has
 * no rules; keys and rules go with their app.
 */
export class AppAccessRules1700000016100 implements MigrationInterface {
  name = "AppAccessRules1700000016100";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE app_access_rules (
        app_id uuid PRIMARY KEY REFERENCES apps(id) ON DELETE CASCADE,
        method_mode text NOT NULL DEFAULT 'DENY' CHECK (method_mode IN ('ALLOW', 'DENY')),
        methods text[] NOT NULL DEFAULT '{}',
        requests_per_second integer NULL CHECK (requests_per_second > 0),
        requests_per_day integer NULL CHECK (requests_per_day > 0),
        user_agents text[] NOT NULL DEFAULT '{}',
        jwt_required boolean NOT NULL DEFAULT false,
        jwt_audience text NULL,
        jwt_subject text NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE app_jwt_keys (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        app_id uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
        kid text NOT NULL,
        algorithm text NOT NULL CHECK (algorithm IN ('RS256', 'ES256')),
        jwk jsonb NOT NULL,
        thumbprint text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT uq_app_jwt_keys_app_kid UNIQUE (app_id, kid)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS app_jwt_keys`);
    await q.query(`DROP TABLE IF EXISTS app_access_rules`);
  }
}
