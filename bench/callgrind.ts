/**
 * The gateway's instructions per request under `valgrind --tool=callgrind`: a figure that other work on
 * the machine does not move, unlike req/s or CPU time (a shared CPU slows each instruction, it does not
 * add any). The same stub upstream and seeded key as `npm run bench`; one gateway under callgrind with
 * instrumentation off, a warm-up, then instrumentation on for a fixed number of requests.
 *
 *   npm run build && node dist/bench/callgrind.js [hit|miss|batch] [warm-up requests] [measured requests]
 *
 * Defaults: batch, 1,500, 1,000 (about a minute: the gateway runs some 50 times slower under valgrind).
 * Counts only user-space instructions of the whole process (JIT code, V8, libuv, GC threads), not the
 * kernel's. JIT code is compiled under valgrind's emulated CPU, so compare builds with each other, not
 * with native CPU time. The dump stays in bench/out/callgrind/ (`callgrind_annotate`; with
 * CALLGRIND_PERF_MAP=1 the gateway writes /tmp/perf-PID.map to name JIT addresses).
 * Environment: CALLGRIND_CONCURRENCY (8 requests in flight), REDIS_URL.
 */

import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { Pool } from "undici";
import { freePort } from "../test/helpers/ports";
import { startProcess } from "../test/helpers/process";
import { BATCH_100_BODY, CHAIN_ID_BODY } from "./bodies";
import { BENCH_NETWORK, BenchRedis } from "./gateway";

const GATEWAY_MAIN = resolve(__dirname, "../data-plane/src/main.js");

function body(scenario: string, n: number): string {
  if (scenario === "batch") return BATCH_100_BODY;
  if (scenario === "hit") return CHAIN_ID_BODY;
  // A cache miss: params unique per request.
  return `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x${n.toString(16).padStart(40, "0")}"},"latest"]}`;
}

async function main(): Promise<void> {
  const scenario = process.argv[2] ?? "batch";
  if (!["hit", "miss", "batch"].includes(scenario))
    throw new Error(`unknown scenario ${scenario}: hit|miss|batch`);
  const warm = Number(process.argv[3] ?? 1_500);
  const measured = Number(process.argv[4] ?? 1_000);
  const concurrency = Number(process.env.CALLGRIND_CONCURRENCY ?? 8);
  const outDir = resolve(__dirname, "../../bench/out/callgrind");
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const redis = new BenchRedis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  const stubPort = await freePort();
  const stub = await startProcess(
    process.execPath,
    [join(__dirname, "stub-upstream.js"), "--port", String(stubPort)],
    {
      readyLine: /listening on \d+/,
    },
  );
  let failed = 0;
  try {
    await redis.connect();
    await redis.seedNetwork(`http://127.0.0.1:${stubPort}`);
    const [key] = await redis.seedKeys(1);
    const port = await freePort();
    const gw = await startProcess(
      "valgrind",
      [
        "--tool=callgrind",
        "--instr-atstart=no",
        `--callgrind-out-file=${join(outDir, "callgrind.out")}`,
        // V8 writes code into its heap: valgrind must notice it changing.
        "--smc-check=all-non-file",
        process.execPath,
        ...(process.env.CALLGRIND_PERF_MAP === "1" ? ["--perf-basic-prof"] : []),
        GATEWAY_MAIN,
      ],
      {
        env: {
          DATA_PLANE_PORT: String(port),
          DATA_PLANE_HOST: "127.0.0.1",
          // Not scraped here: any free port, so that runs side by side never collide on the default.
          METRICS_PORT: "0",
          REDIS_URL: redis.url,
          REDIS_KEY_PREFIX: redis.prefix,
          LOG_LEVEL: "warn",
          DATA_PLANE_THREADS: "1",
        },
        ready: async () => {
          try {
            return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
          } catch {
            return false;
          }
        },
        timeoutMs: 600_000,
      },
    );
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: concurrency });
    let sent = 0;
    const run = async (n: number) => {
      let left = n;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (left-- > 0) {
            const r = await pool.request({
              path: `/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key!)}`,
              method: "POST",
              headers: { "content-type": "application/json" },
              body: body(scenario, sent++),
            });
            await r.body.text();
            if (r.statusCode !== 200) failed++;
          }
        }),
      );
    };
    try {
      await run(warm);
      execFileSync("callgrind_control", ["-i", "on", String(gw.pid)], { stdio: "ignore" });
      await run(measured);
      execFileSync("callgrind_control", ["-i", "off", String(gw.pid)], { stdio: "ignore" });
      execFileSync("callgrind_control", ["-d", String(gw.pid)], { stdio: "ignore" });
    } finally {
      await pool.close();
      await gw.stop(60_000);
    }
  } finally {
    await stub.stop();
    await redis.cleanup();
  }
  // The dump taken after the measured requests holds their instructions (`totals:`); the one written at
  // exit holds nothing more (instrumentation was off).
  let instructions = 0;
  for (const f of readdirSync(outDir)) {
    const text = readFileSync(join(outDir, f), "utf8");
    for (const m of text.matchAll(/^(?:summary|totals): (\d+)/gm))
      instructions = Math.max(instructions, Number(m[1]));
  }
  process.stdout.write(
    `${scenario}: ${Math.round(instructions / measured / 100) / 10}k instructions per request ` +
      `(${measured} measured after ${warm}, ${failed} not 200; dumps in ${outDir})\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
