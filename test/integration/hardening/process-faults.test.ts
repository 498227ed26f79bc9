import assert from "node:assert/strict";
import path from "node:path";
import { freePort } from "../../helpers/ports";
import { type StartedProcess, startProcess } from "../../helpers/process";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../helpers/seed-redis";

const root = path.resolve(__dirname, "../../../..");

async function until(check: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The data plane's process-level policy (main.ts) for faults outside any uWS handler: an unhandled
 * rejection is logged and counted and the process keeps serving; an uncaught exception is logged,
 * counted, drained and the process exits 1 for its supervisor to restart.
 */
describe("hardening: data plane process policy for unhandled rejections and uncaught exceptions", function () {
  this.timeout(60_000);
  let ns: TestRedisNamespace;
  let seeder: RedisSeeder;
  let dp: StartedProcess | undefined;

  before(async () => {
    ns = createTestRedisNamespace();
    seeder = new RedisSeeder(ns.prefix);
    await seeder.putNetwork(evmNetwork("eth-faults", [{ id: "u1", httpUrl: "http://127.0.0.1:9" }]));
  });
  after(async () => {
    await dp?.stop();
    await seeder?.close();
    await ns?.cleanup();
  });

  it("keeps serving after an unhandled rejection (logged + counted), drains and exits 1 on an uncaught exception", async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    dp = await startProcess(
      process.execPath,
      [
        "--require",
        path.join(__dirname, "fault-injector.js"),
        path.join(root, "dist/data-plane/src/main.js"),
      ],
      {
        cwd: root,
        env: {
          REDIS_URL: TEST_REDIS_URL,
          REDIS_KEY_PREFIX: ns.prefix,
          DATA_PLANE_PORT: String(port),
          DATA_PLANE_HOST: "127.0.0.1",
          LOG_LEVEL: "info",
        },
        ready: async () => (await fetch(`${base}/readyz`)).ok,
      },
    );
    const proc = dp;
    process.kill(proc.pid, "SIGUSR2");
    await until(
      () => /unhandled promise rejection \(kept serving\)/.test(proc.output()),
      "the rejection log line",
    );
    assert.match(proc.output(), /injected unhandled rejection/);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    assert.match(metrics, /rpcgw_handler_exceptions_total\{handler="process\.unhandledRejection"\} 1/);

    process.kill(proc.pid, "SIGUSR2");
    await until(() => proc.child.exitCode !== null, "the exit");
    assert.equal(proc.child.exitCode, 1, proc.output());
    assert.match(proc.output(), /uncaught exception: draining and exiting for a restart/);
    assert.match(proc.output(), /injected uncaught exception/);
    assert.match(proc.output(), /data plane stopped/, "drained (usage flushed) before exiting");
  });

  it("exits 1 after an uncaught exception during a SIGTERM drain (the shutdown then still completes)", async () => {
    await dp?.stop();
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    dp = await startProcess(
      process.execPath,
      [
        "--require",
        path.join(__dirname, "fault-injector.js"),
        path.join(root, "dist/data-plane/src/main.js"),
      ],
      {
        cwd: root,
        env: {
          REDIS_URL: TEST_REDIS_URL,
          REDIS_KEY_PREFIX: ns.prefix,
          DATA_PLANE_PORT: String(port),
          DATA_PLANE_HOST: "127.0.0.1",
          LOG_LEVEL: "info",
          // The shutdown lasts at least the linger: the exception lands while it runs.
          SHUTDOWN_LINGER_MS: "3000",
        },
        ready: async () => (await fetch(`${base}/readyz`)).ok,
      },
    );
    const proc = dp;
    process.kill(proc.pid, "SIGTERM");
    await until(() => /shutting down: draining/.test(proc.output()), "the shutdown log line");
    // First SIGUSR2: a rejection (kept serving); second: the uncaught exception.
    process.kill(proc.pid, "SIGUSR2");
    await until(() => /unhandled promise rejection/.test(proc.output()), "the rejection log line");
    process.kill(proc.pid, "SIGUSR2");
    await until(() => /injected uncaught exception/.test(proc.output()), "the exception log line");
    assert.equal(proc.child.exitCode, null, "the exception landed before the shutdown ended");
    await until(() => proc.child.exitCode !== null, "the exit");
    assert.equal(proc.child.exitCode, 1, proc.output());
    assert.match(proc.output(), /data plane stopped/, "the drain went on to its end (usage flushed)");
  });
});
