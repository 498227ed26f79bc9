import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Teams: the OWNER/MEMBER membership roles become OWNER/ADMIN/MEMBER/VIEWER (existing values keep their
 * meaning), every workspace gets exactly one OWNER, and invitations get their table.
 *
 * Data: before this migration nothing enforced one owner per workspace. A workspace with several owners
 * keeps its oldest one and the others become ADMIN; a workspace whose members are all MEMBERs gets its
 * oldest member promoted to OWNER. Then a partial unique index holds "at most one OWNER" for good.
 */
export class WorkspaceRoles1700000016000 implements MigrationInterface {
  name = "WorkspaceRoles1700000016000";

  async up(q: QueryRunner): Promise<void> {
    // The initial migration's inline CHECK got Postgres's generated name.
    await q.query(`ALTER TABLE memberships DROP CONSTRAINT IF EXISTS memberships_role_check`);
    await q.query(
      `ALTER TABLE memberships ADD CONSTRAINT ck_memberships_role CHECK (role IN ('OWNER', 'ADMIN', 'MEMBER', 'VIEWER'))`,
    );
    await q.query(`
      UPDATE memberships m SET role = 'ADMIN'
      FROM (
        SELECT id, row_number() OVER (PARTITION BY workspace_id ORDER BY created_at, id) AS n
        FROM memberships WHERE role = 'OWNER'
      ) o
      WHERE m.id = o.id AND o.n > 1`);
    await q.query(`
      UPDATE memberships m SET role = 'OWNER'
      FROM (
        SELECT DISTINCT ON (workspace_id) id FROM memberships
        WHERE workspace_id NOT IN (SELECT workspace_id FROM memberships WHERE role = 'OWNER')
        ORDER BY workspace_id, created_at, id
      ) f
      WHERE m.id = f.id`);
    await q.query(
      `CREATE UNIQUE INDEX uq_memberships_one_owner ON memberships(workspace_id) WHERE role = 'OWNER'`,
    );
    await q.query(`CREATE INDEX ix_memberships_account ON memberships(account_id)`);
    await q.query(`
      CREATE TABLE invitations (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        email text NOT NULL,
        role text NOT NULL CHECK (role IN ('ADMIN', 'MEMBER', 'VIEWER')),
        token_hash text NOT NULL UNIQUE,
        invited_by uuid NULL REFERENCES accounts(id) ON DELETE SET NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        accepted_at timestamptz NULL,
        accepted_by uuid NULL REFERENCES accounts(id) ON DELETE SET NULL,
        revoked_at timestamptz NULL
      )`);
    await q.query(`CREATE INDEX ix_invitations_workspace ON invitations(workspace_id, created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS invitations`);
    await q.query(`DROP INDEX IF EXISTS ix_memberships_account`);
    await q.query(`DROP INDEX IF EXISTS uq_memberships_one_owner`);
    await q.query(`ALTER TABLE memberships DROP CONSTRAINT IF EXISTS ck_memberships_role`);
    // The old schema knows OWNER and MEMBER only: an ADMIN or VIEWER becomes a MEMBER.
    await q.query(`UPDATE memberships SET role = 'MEMBER' WHERE role IN ('ADMIN', 'VIEWER')`);
    await q.query(
      `ALTER TABLE memberships ADD CONSTRAINT memberships_role_check CHECK (role IN ('OWNER', 'MEMBER'))`,
    );
  }
}
