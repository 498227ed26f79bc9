import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { Client } from "pg";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { RedisNames } from "../../../shared/src/redis/keys";
import { freePort } from "../../helpers/ports";
import { createTestDatabase, TestDatabase } from "../../helpers/postgres";
import { startProcess } from "../../helpers/process";
import { createTestRedisNamespace, TEST_REDIS_URL, TestRedisNamespace } from "../../helpers/redis";

const run = promisify(execFile);
const DIST = join(__dirname, "../../../control-plane/src");

describe("control-plane: processes and CLIs", function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let ns: TestRedisNamespace;
  let env: NodeJS.ProcessEnv;
  let redis: Redis;
  before(async () => {
    db = await createTestDatabase();
    ns = createTestRedisNamespace();
    redis = new Redis(TEST_REDIS_URL);
    env = {
      ...process.env,
      DATABASE_URL: db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_KEY_PREFIX: ns.prefix,
      LOG_LEVEL: "info",
      ADMIN_TOKEN: "process-test-admin-token-123456",
      KEY_ENCRYPTION_SECRET: "process-test-key-encryption-secret",
    };
  });
  after(async () => {
    redis?.disconnect();
    await ns?.cleanup();
    await db?.drop();
  });

  it("bootstrap-demo is idempotent and prints token, key, endpoints and example command as JSON", async () => {
    const args = [join(DIST, "cli/bootstrap-demo.js"), "--upstream", "http://127.0.0.1:8545"];
    const first = JSON.parse((await run(process.execPath, args, { env })).stdout);
    const second = JSON.parse((await run(process.execPath, args, { env })).stdout);
    assert.equal(first.appId, second.appId);
    assert.equal(first.apiKey, second.apiKey);
    assert.equal(first.workspaceId, second.workspaceId);
    assert.notEqual(first.token, second.token);
    assert.equal(first.network, "local-evm");
    assert.equal(first.endpoints[0].httpsUrl, `http://127.0.0.1:8080/local-evm/rpc?apikey=${first.apiKey}`);
    assert.match(first.exampleCommand, /eth_blockNumber/);
    const names = new RedisNames(ns.prefix);
    const net = JSON.parse((await redis.hget(names.networks(), "local-evm"))!);
    assert.equal(net.chainId, 31337);
    assert.equal(net.upstreams.length, 1, "upstream not duplicated");
    assert.equal(await redis.exists(names.apiKey(hashApiKey(first.apiKey))), 1);
    // A random password, returned only by the run that created the account; never a platform operator.
    assert.match(first.password, /^[A-Za-z0-9_-]{24}$/);
    assert.equal(second.password, null, "the password is shown once");
    assert.equal(first.operator, false);
    const other = [...args, "--email", "second-demo@example.com"];
    const third = JSON.parse((await run(process.execPath, other, { env })).stdout);
    assert.equal(third.operator, false);
    assert.notEqual(third.password, first.password, "each demo account gets its own random password");
    const pg = new Client({ connectionString: db.url });
    await pg.connect();
    try {
      const rows = (await pg.query("SELECT email, is_operator FROM accounts ORDER BY email")).rows;
      assert.deepEqual(rows, [
        { email: "demo@example.com", is_operator: false },
        { email: "second-demo@example.com", is_operator: false },
      ]);
    } finally {
      await pg.end();
    }
  });

  it("republish CLI rebuilds Redis from Postgres", async () => {
    const names = new RedisNames(ns.prefix);
    await redis.del(names.networks(), names.publishedAt());
    const { stdout } = await run(process.execPath, [join(DIST, "cli/republish.js")], { env });
    const res = JSON.parse(stdout);
    assert.equal(res.networks, 1);
    assert.ok(res.keys >= 1);
    assert.equal(await redis.exists(names.publishedAt()), 1);
    assert.equal(await redis.hexists(names.networks(), "local-evm"), 1);
  });

  it("main.ts serves GraphQL, then exits 0 on SIGTERM; a generated ADMIN_TOKEN is announced, not printed", async () => {
    const port = await freePort();
    const childEnv = { ...env, CONTROL_PLANE_PORT: String(port) };
    delete (childEnv as NodeJS.ProcessEnv).ADMIN_TOKEN;
    delete (childEnv as NodeJS.ProcessEnv).KEY_ENCRYPTION_SECRET;
    const proc = await startProcess(process.execPath, [join(DIST, "main.js")], {
      env: childEnv,
      readyLine: /control plane listening/,
    });
    try {
      const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ query: "{ networks { slug } }" }),
      });
      assert.deepEqual(await res.json(), { data: { networks: [{ slug: "local-evm" }] } });
      assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
    } finally {
      const code = await proc.stop(10_000);
      assert.equal(code, 0, proc.output());
    }
    assert.match(proc.output(), /ADMIN_TOKEN is not set: generated a random operator token/);
    assert.match(proc.output(), /KEY_ENCRYPTION_SECRET is not set: using the fixed development secret/);
    assert.doesNotMatch(proc.output(), /"adminToken"/);
  });

  it("main.ts refuses a bad variable with an error naming it", async () => {
    await assert.rejects(
      run(process.execPath, [join(DIST, "main.js")], { env: { ...env, CONTROL_PLANE_PORT: "99999" } }),
      (e: { stderr: string; code: number }) => {
        assert.equal(e.code, 1);
        assert.match(e.stderr, /CONTROL_PLANE_PORT: expected a port number/);
        return true;
      },
    );
  });

  it("main.ts with NODE_ENV=production refuses a short KEY_ENCRYPTION_SECRET and a missing ADMIN_TOKEN", async () => {
    const { ADMIN_TOKEN: _unset, ...noToken } = env;
    const short = "only-31-bytes-of-secret-0123456";
    await assert.rejects(
      run(process.execPath, [join(DIST, "main.js")], {
        env: { ...noToken, NODE_ENV: "production", KEY_ENCRYPTION_SECRET: short },
      }),
      (e: { stderr: string; code: number }) => {
        assert.equal(e.code, 1);
        assert.match(e.stderr, /KEY_ENCRYPTION_SECRET: required with NODE_ENV=production: at least 32 bytes/);
        assert.match(e.stderr, /ADMIN_TOKEN: required with NODE_ENV=production/);
        assert.ok(!e.stderr.includes(short), "the secret is not echoed");
        return true;
      },
    );
  });

  it("worker main.ts starts and exits 0 on SIGTERM", async () => {
    const proc = await startProcess(process.execPath, [join(DIST, "worker/main.js")], {
      env,
      readyLine: /publication worker started/,
    });
    assert.equal(await proc.stop(10_000), 0, proc.output());
  });
});
