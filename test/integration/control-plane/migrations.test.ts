import assert from "node:assert/strict";
import { DataSource, type DataSourceOptions } from "typeorm";
import { createDataSource, MIGRATIONS, migrate } from "../../../control-plane/src/db/data-source";
import { ensureDatabase } from "../../../control-plane/src/db/ensure-database";
import { WorkspaceRoles1700000016000 } from "../../../control-plane/src/db/migrations/1700000016000-workspace-roles";
import { createTestDatabase, TestDatabase } from "../../helpers/postgres";

describe("control-plane: migrations", () => {
  let db: TestDatabase;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db?.drop();
  });

  it("two concurrent migrate calls both succeed, each migration applied once (advisory lock)", async () => {
    const a = createDataSource(db.url, 2);
    const b = createDataSource(db.url, 2);
    await Promise.all([a.initialize(), b.initialize()]);
    try {
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
      assert.equal(ra.length + rb.length, MIGRATIONS.length, `applied ${JSON.stringify([ra, rb])}`);
      const rows = await a.query("SELECT name FROM typeorm_migrations");
      assert.equal(rows.length, MIGRATIONS.length);
      const plans = await a.query(
        "SELECT name, daily_request_limit, requests_per_second, monthly_request_limit FROM plans ORDER BY daily_request_limit",
      );
      assert.deepEqual(plans[0], {
        name: "free",
        daily_request_limit: "500000",
        requests_per_second: 50,
        monthly_request_limit: null,
      });
      assert.equal(plans.length, 3);
      assert.deepEqual(await a.query("SELECT name, self_service FROM plans ORDER BY name"), [
        { name: "enterprise", self_service: false },
        { name: "free", self_service: true },
        { name: "growth", self_service: true },
      ]);
      // Running again is a no-op.
      assert.deepEqual(await migrate(a), []);
      // The lock is released after migrating.
      const locks = await a.query(
        "SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()",
      );
      assert.equal(locks[0].n, 0);
    } finally {
      await Promise.all([a.destroy(), b.destroy()]);
    }
  });

  it("never synchronises the schema from entities", () => {
    const ds = createDataSource(db.url);
    assert.equal(ds.options.synchronize, false);
    assert.equal(ds.options.migrationsRun, false);
  });
});

describe("control-plane: the workspace-roles migration", () => {
  let db: TestDatabase;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db?.drop();
  });

  it("keeps OWNER/MEMBER rows, leaves every workspace exactly one OWNER, and down() goes back", async () => {
    const last = MIGRATIONS.indexOf(WorkspaceRoles1700000016000);
    assert.ok(last > 0);
    // The schema as it was before the migration, with data the old rules allowed.
    const old = new DataSource({
      ...createDataSource(db.url).options,
      migrations: MIGRATIONS.slice(0, last),
    } as DataSourceOptions);
    await old.initialize();
    const ids: Record<string, string> = {};
    try {
      await migrate(old);
      const [plan] = await old.query("SELECT id FROM plans WHERE name = 'free'");
      for (const a of ["a1", "a2", "a3", "b1", "b2"]) {
        ids[a] = (
          await old.query("INSERT INTO accounts (email, password_hash) VALUES ($1, 'x') RETURNING id", [
            `${a}@example.com`,
          ])
        )[0].id;
      }
      for (const w of ["wa", "wb"]) {
        ids[w] = (
          await old.query("INSERT INTO workspaces (name, plan_id) VALUES ($1, $2) RETURNING id", [w, plan.id])
        )[0].id;
      }
      // wa: two owners (the older one stays) and a member; wb: members only (the oldest becomes owner).
      const rows: [string, string, string, string][] = [
        ["a1", "wa", "OWNER", "2024-01-01"],
        ["a2", "wa", "OWNER", "2024-01-02"],
        ["a3", "wa", "MEMBER", "2024-01-03"],
        ["b2", "wb", "MEMBER", "2024-02-02"],
        ["b1", "wb", "MEMBER", "2024-02-01"],
      ];
      for (const [a, w, role, at] of rows) {
        await old.query(
          "INSERT INTO memberships (account_id, workspace_id, role, created_at) VALUES ($1, $2, $3, $4)",
          [ids[a], ids[w], role, at],
        );
      }
    } finally {
      await old.destroy();
    }
    const ds = createDataSource(db.url);
    await ds.initialize();
    try {
      assert.ok((await migrate(ds)).includes("WorkspaceRoles1700000016000"));
      const roles = async () =>
        Object.fromEntries(
          (
            await ds.query(
              "SELECT a.email, m.role FROM memberships m JOIN accounts a ON a.id = m.account_id ORDER BY a.email",
            )
          ).map((r: { email: string; role: string }) => [r.email.split("@")[0], r.role]),
        );
      assert.deepEqual(await roles(), { a1: "OWNER", a2: "ADMIN", a3: "MEMBER", b1: "OWNER", b2: "MEMBER" });
      // A second OWNER, or a role outside the four, is refused by the database itself.
      await assert.rejects(
        ds.query("UPDATE memberships SET role = 'OWNER' WHERE account_id = $1", [ids.a3]),
        /uq_memberships_one_owner/,
      );
      await assert.rejects(
        ds.query("UPDATE memberships SET role = 'GUEST' WHERE account_id = $1", [ids.a3]),
        /ck_memberships_role/,
      );
      await ds.query("UPDATE memberships SET role = 'VIEWER' WHERE account_id = $1", [ids.a3]);
      const runner = ds.createQueryRunner();
      try {
        await new WorkspaceRoles1700000016000().down(runner);
      } finally {
        await runner.release();
      }
      assert.deepEqual(await roles(), { a1: "OWNER", a2: "MEMBER", a3: "MEMBER", b1: "OWNER", b2: "MEMBER" });
      assert.equal((await ds.query("SELECT to_regclass('invitations') AS t"))[0].t, null);
    } finally {
      await ds.destroy();
    }
  });
});

describe("control-plane: ensureDatabase", () => {
  it("creates a missing database once; concurrent callers both succeed", async () => {
    const probe = await createTestDatabase();
    await probe.drop();
    try {
      const created = await Promise.all([ensureDatabase(probe.url), ensureDatabase(probe.url)]);
      assert.equal(created.filter(Boolean).length, 1);
      assert.equal(await ensureDatabase(probe.url), false);
    } finally {
      await probe.drop();
    }
  });
});
