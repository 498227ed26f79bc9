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
 * counted, drained and the process exits 1 for its supervisor to restart. With several threads, a fault in
 * any of them (the main thread or a serving one) drains every thread.
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

  /**
   * `threads`: DATA_PLANE_THREADS; `faultThread`: 0 = the fault happens in the main thread (the only one
   * with 1 thread), N = in serving thread N.
   */
  const start = async (threads: number, faultThread: number, env: Record<string, string> = {}) => {
    await dp?.stop();
    const port = await freePort();
    const metricsPort = await freePort();
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
          METRICS_PORT: String(metricsPort),
          LOG_LEVEL: "info",
          DATA_PLANE_THREADS: String(threads),
          FAULT_THREAD: String(faultThread),
          ...env,
        },
        // Ready once the threads answer and /metrics is served (the main thread listens after them).
        ready: async () =>
          (await fetch(`${base}/readyz`)).ok && (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).ok,
      },
    );
    return { proc: dp, base, metricsBase: `http://127.0.0.1:${metricsPort}` };
  };

  /** Log lines (JSON) whose msg matches `msg`. */
  const lines = (proc: StartedProcess, msg: RegExp) =>
    proc
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { msg: string; thread?: number })
      .filter((l) => msg.test(l.msg));

  for (const [threads, faultThread, where] of [
    [1, 0, "1 thread"],
    [2, 0, "2 threads, fault in the main thread"],
    [2, 1, "2 threads, fault in serving thread 1"],
  ] as const) {
    it(`${where}: keeps serving after an unhandled rejection (logged + counted), drains and exits 1 on an uncaught exception`, async () => {
      const { proc, base, metricsBase } = await start(threads, faultThread);
      process.kill(proc.pid, "SIGUSR2");
      await until(
        () => /unhandled promise rejection \(kept serving\)/.test(proc.output()),
        "the rejection log line",
      );
      assert.match(proc.output(), /injected unhandled rejection/);
      if (threads > 1) assert.equal(lines(proc, /unhandled promise rejection/)[0]!.thread, faultThread);
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      // The process's /metrics, whichever thread answers the scrape and whichever thread counted it.
      for (let i = 0; i < (threads > 1 ? 4 : 1); i++) {
        const metrics = await (
          await fetch(`${metricsBase}/metrics`, { headers: { connection: "close" } })
        ).text();
        assert.match(metrics, /rpcgw_handler_exceptions_total\{handler="process\.unhandledRejection"\} 1\n/);
      }

      process.kill(proc.pid, "SIGUSR2");
      await until(() => proc.child.exitCode !== null, "the exit");
      assert.equal(proc.child.exitCode, 1, proc.output());
      assert.match(proc.output(), /uncaught exception: draining and exiting for a restart/);
      assert.match(proc.output(), /injected uncaught exception/);
      // Drained (usage flushed) before exiting: every thread.
      const stopped = lines(proc, /^data plane stopped$/);
      assert.equal(stopped.length, threads, proc.output());
      if (threads > 1) assert.deepEqual(stopped.map((l) => l.thread).sort(), [1, 2]);
    });

    it(`${where}: exits 1 after an uncaught exception during a SIGTERM drain (the shutdown then still completes)`, async () => {
      // The shutdown lasts at least the linger: the exception lands while it runs.
      const { proc } = await start(threads, faultThread, { SHUTDOWN_LINGER_MS: "3000" });
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
      assert.equal(
        lines(proc, /^data plane stopped$/).length,
        threads,
        "the drain went on to its end (usage flushed)",
      );
    });
  }
});
