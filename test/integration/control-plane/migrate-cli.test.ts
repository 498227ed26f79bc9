import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { promisify } from "node:util";
import { Client } from "pg";
import { MIGRATIONS } from "../../../control-plane/src/db/data-source";

const run = promisify(execFile);
const CLI = join(__dirname, "../../../control-plane/src/cli/migrate.js");
const ADMIN_URL = process.env.TEST_POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** The migration Job's entry point (deploy/kubernetes/base/migrate-job.yaml). */
describe("control-plane: migrate CLI", function () {
  this.timeout(60_000);
  // A database that does not exist yet: the CLI creates it, as the control plane would.
  const name = `rg_test_migrate_${Date.now().toString(36)}_${randomBytes(3).toString("hex")}`;
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  // Exactly what the Job gets: the database URL and NODE_ENV=production, no ADMIN_TOKEN or
  // KEY_ENCRYPTION_SECRET (which the control plane's own config would demand in production).
  const env = { PATH: process.env.PATH, NODE_ENV: "production", DATABASE_URL: url.toString() };

  after(async () => {
    const c = new Client({ connectionString: ADMIN_URL });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    } finally {
      await c.end();
    }
  });

  it("creates the database, applies every migration once, and is a no-op the second time", async () => {
    const first = JSON.parse((await run(process.execPath, [CLI], { env })).stdout);
    assert.equal(first.createdDatabase, true);
    assert.deepEqual(
      first.applied,
      MIGRATIONS.map((m) => m.name),
    );
    const second = JSON.parse((await run(process.execPath, [CLI], { env })).stdout);
    assert.deepEqual(second, { createdDatabase: false, applied: [] });
    const c = new Client({ connectionString: url.toString() });
    await c.connect();
    try {
      const rows = await c.query("SELECT count(*)::int AS n FROM typeorm_migrations");
      assert.equal(rows.rows[0].n, MIGRATIONS.length);
    } finally {
      await c.end();
    }
  });

  it("exits 1 with the variable named when DATABASE_URL is not a Postgres URL", async () => {
    await assert.rejects(
      run(process.execPath, [CLI], { env: { ...env, DATABASE_URL: "mysql://127.0.0.1/x" } }),
      (err: { code?: number; stderr?: string; stdout?: string }) => {
        assert.equal(err.code, 1);
        assert.match(err.stderr ?? "", /migrate failed: Invalid configuration: DATABASE_URL/);
        assert.equal(err.stdout, "");
        return true;
      },
    );
  });
});
