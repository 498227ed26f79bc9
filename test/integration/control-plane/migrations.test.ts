import assert from "node:assert/strict";
import { createDataSource, MIGRATIONS, migrate } from "../../../control-plane/src/db/data-source";
import { ensureDatabase } from "../../../control-plane/src/db/ensure-database";
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
