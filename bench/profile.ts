/**
 * Profiles the gateway's hot path: the same stub upstream and seeded key as `npm run bench`, one gateway
 * started with `node --cpu-prof`, one scenario of wrk load, then the profile's top functions by self time.
 *
 *   npm run bench:profile -- [hit|miss|batch] [seconds]
 *
 * The .cpuprofile is kept in bench/out/profile/ (open it in Chrome DevTools or speedscope for a flame graph).
 * It also prints the gateway's CPU time per request (user and system, from /proc/PID/stat), which is less
 * noisy than req/s on a shared machine. PROFILE=0 runs without the profiler (the profiler's sampling
 * costs CPU too).
 * Environment: PROFILE_RATE (req/s: a steady rate, as the bench's fixed-rate row, instead of full load),
 * PROFILE_BEFORE (`scenario:seconds` of load on the same gateway first, e.g. `miss:10`: left out of the
 * CPU per request, not out of the .cpuprofile, which covers the whole process),
 * BENCH_CONNECTIONS (64), BENCH_THREADS (1), REDIS_URL, GATEWAY_ENV (extra `K=V,K=V` for the
 * gateway, e.g. `CACHE_MAX_BYTES=0`), GATEWAY_OUTPUT=1 (print the gateway's output, e.g. with
 * GATEWAY_NODE_ARGS=--trace-gc), GATEWAY_NODE_ARGS (node flags for the gateway, space-separated).
 */

import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "../test/helpers/ports";
import { startProcess } from "../test/helpers/process";
import { BATCH_100_BODY, CHAIN_ID_BODY } from "./bodies";
import { BENCH_NETWORK, BenchRedis, startGateway } from "./gateway";
import { type Body, runWrk, runWrkAtRate } from "./load";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
}

const SCENARIOS: Record<string, Body> = {
  hit: { kind: "static", body: CHAIN_ID_BODY },
  miss: { kind: "unique-eth-call" },
  batch: { kind: "static", body: BATCH_100_BODY },
};

/** Self-time share per function (name + file:line), highest first. */
export function topSelf(profile: CpuProfile, n: number): Array<{ share: number; frame: string }> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const counts = new Map<string, number>();
  for (const id of profile.samples) {
    const f = byId.get(id)?.callFrame;
    if (f === undefined) continue;
    const file = f.url.replace(/^.*\/(dist|node_modules)\//, "");
    const frame = `${f.functionName || "(anonymous)"} ${file}${file ? `:${f.lineNumber + 1}` : ""}`;
    counts.set(frame, (counts.get(frame) ?? 0) + 1);
  }
  const total = profile.samples.length || 1;
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([frame, c]) => ({ share: c / total, frame }));
}

/** Linux reports /proc/PID/stat CPU times in clock ticks of 1/100 s (USER_HZ) on every mainstream arch. */
const TICKS_PER_S = 100;

function cpuTicks(pid: number): { user: number; system: number } {
  // Fields after the parenthesised command name: utime is the 14th field, stime the 15th.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { user: Number(rest[11]), system: Number(rest[12]) };
}

async function main(): Promise<void> {
  const scenario = process.argv[2] ?? "hit";
  const body = SCENARIOS[scenario];
  if (body === undefined)
    throw new Error(`unknown scenario ${scenario}: use ${Object.keys(SCENARIOS).join("|")}`);
  const durationS = Number(process.argv[3] ?? 10);
  const outDir = resolve(__dirname, "../../bench/out/profile");
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const extraEnv = Object.fromEntries(
    (process.env.GATEWAY_ENV ?? "")
      .split(",")
      .filter((kv) => kv.includes("="))
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );

  const profiling = process.env.PROFILE !== "0";
  const redis = new BenchRedis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  const stubPort = await freePort();
  const stub = await startProcess(
    process.execPath,
    [join(__dirname, "stub-upstream.js"), "--port", String(stubPort)],
    {
      readyLine: /listening on \d+/,
    },
  );
  try {
    await redis.connect();
    await redis.seedNetwork(`http://127.0.0.1:${stubPort}`);
    const [key] = await redis.seedKeys(1);
    const gw = await startGateway({
      redisUrl: redis.url,
      prefix: redis.prefix,
      env: extraEnv,
      nodeArgs: [
        ...(process.env.GATEWAY_NODE_ARGS ?? "").split(" ").filter((a) => a !== ""),
        ...(profiling ? ["--cpu-prof", `--cpu-prof-dir=${outDir}`] : []),
      ],
    });
    try {
      const load = {
        url: `${gw.baseUrl}/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key!)}`,
        body,
        durationS,
        connections: Number(process.env.BENCH_CONNECTIONS ?? 64),
        threads: Number(process.env.BENCH_THREADS ?? 1),
        outDir,
        label: scenario,
      };
      // PROFILE_BEFORE=scenario:seconds loads the same gateway first (as the bench's rounds do) without
      // measuring it, e.g. `miss:10` before `hit`.
      const before = process.env.PROFILE_BEFORE;
      if (before) {
        const [name, secs] = before.split(":");
        const pre = SCENARIOS[name ?? ""];
        const seconds = Number(secs ?? 10);
        if (pre === undefined || !(seconds > 0))
          throw new Error(`PROFILE_BEFORE: expected scenario:seconds, got ${before}`);
        await runWrk({ ...load, body: pre, durationS: seconds, label: `${name}.before` });
      }
      const cpuBefore = cpuTicks(gw.proc.pid);
      const rate = Number(process.env.PROFILE_RATE ?? 0);
      const r = rate > 0 ? await runWrkAtRate({ ...load, rate, warmupS: 2 }) : await runWrk(load);
      const after = cpuTicks(gw.proc.pid);
      const perReqUs = (ticks: number) => ((ticks / TICKS_PER_S) * 1e6) / Math.max(1, r.requests);
      process.stdout.write(
        `${scenario}: ${Math.round(r.requestsPerSec)} req/s, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms (${r.non2xx} non-2xx); ` +
          `gateway CPU per request: user ${perReqUs(after.user - cpuBefore.user).toFixed(1)} µs, ` +
          `system ${perReqUs(after.system - cpuBefore.system).toFixed(1)} µs\n`,
      );
    } finally {
      await gw.proc.stop(); // SIGTERM: the gateway drains and exits, and node writes the profile
      if (process.env.GATEWAY_OUTPUT === "1") process.stdout.write(gw.proc.output());
    }
  } finally {
    await stub.stop();
    await redis.cleanup();
  }
  if (!profiling) return;
  const file = readdirSync(outDir).find((f) => f.endsWith(".cpuprofile"));
  if (file === undefined) throw new Error("no .cpuprofile written");
  const profile = JSON.parse(readFileSync(join(outDir, file), "utf8")) as CpuProfile;
  process.stdout.write(`profile: ${join(outDir, file)} (${profile.samples.length} samples)\nself time:\n`);
  for (const { share, frame } of topSelf(profile, Number(process.env.PROFILE_TOP ?? 30))) {
    process.stdout.write(`  ${(share * 100).toFixed(1).padStart(5)}%  ${frame}\n`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
