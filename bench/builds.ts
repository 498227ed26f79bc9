/**
 * Two builds of the data plane in one run: this checkout's and another's (`dist/data-plane/src/main.js` of a
 * worktree at an older commit), with nginx beside them, all in front of the same instant stub upstream. Each
 * round loads every target once per scenario (keyed cache miss, keyed cache hit, batch of 100), in an order
 * that rotates every round so a burst of other work on the machine falls on each target alike; the medians
 * of the rounds are compared. This is how a change is checked for "no regression against the commit
 * before": ratios against nginx and between the builds, measured side by side, not across runs.
 *
 *   git worktree add /tmp/base <commit> && (cd /tmp/base && npm ci && npm run build)
 *   node dist/bench/builds.js /tmp/base/dist/data-plane/src/main.js
 *
 * Both gateways get the environment bench/gateway.ts gives every gateway. Environment: BENCH_DURATION_S
 * (10), BENCH_WARMUP_S (2), BENCH_CONNECTIONS (64), BENCH_THREADS, BENCH_REPEATS (5), REDIS_URL,
 * BENCH_BASE_NODE (the node binary for the other build when it needs another Node; default this one).
 * Needs wrk and nginx (Debian packages). Writes `bench/out/builds.json`.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "../test/helpers/ports";
import { type StartedProcess, startProcess } from "../test/helpers/process";
import { BATCH_100_BODY, CHAIN_ID_BODY } from "./bodies";
import { envInt, sectionLoadFromEnv } from "./env";
import { BENCH_NETWORK, BenchRedis, processCpuUs, startGateway } from "./gateway";
import { type Body, runLoad, which } from "./load";
import { startNginx } from "./nginx";

const log = (s: string) => process.stdout.write(`${s}\n`);

/**
 * The one setting this section changes, for both builds alike: older builds count each batch element
 * against the per-key in-flight cap (64 connections x 100 elements would be refused past the default),
 * newer ones count upstream exchanges; lifted, the cap is checked on every call but decides nothing.
 */
const SAME_CAPS = { MAX_IN_FLIGHT_PER_KEY: "1000000" };

type Scenario = "miss" | "hit" | "batch";
type Target = "nginx" | "this" | "base";

const BODIES: Record<Scenario, Body> = {
  miss: { kind: "unique-eth-call" },
  hit: { kind: "static", body: CHAIN_ID_BODY },
  batch: { kind: "static", body: BATCH_100_BODY },
};

interface Run {
  requestsPerSec: number;
  /** The gateway's CPU (user + system) per request over the run, µs; null for nginx. */
  cpuUsPerRequest: number | null;
  failed: number;
}

/** The median; with an even count, the lower of the middle two (the worse, for req/s). */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
}

async function main(): Promise<void> {
  const baseMain = process.argv[2] ?? process.env.BENCH_BASE_MAIN;
  if (!baseMain)
    throw new Error("usage: node dist/bench/builds.js <other build's dist/data-plane/src/main.js>");
  const nginxBin = which("nginx");
  if (!which("wrk") || !nginxBin)
    throw new Error("builds bench needs wrk and nginx (apt-get install wrk nginx)");
  const o = { ...sectionLoadFromEnv(), repeats: Math.max(1, envInt("BENCH_REPEATS", 5)) };
  const outDir = join(resolve(__dirname, "../../bench"), "out");
  mkdirSync(outDir, { recursive: true });
  const stops: (() => Promise<unknown>)[] = [];
  let stopping: Promise<void> | null = null;
  // Once, whether the run ends, fails or is interrupted: every process it started is stopped by PID.
  const stopAll = () => {
    stopping ??= (async () => {
      for (const stop of stops.reverse()) await stop().catch(() => undefined);
    })();
    return stopping;
  };
  for (const sig of ["SIGINT", "SIGTERM"] as const)
    process.once(sig, () => void stopAll().then(() => process.exit(130)));
  const redis = new BenchRedis(o.redisUrl);
  try {
    const stubPort = await freePort();
    const stub: StartedProcess = await startProcess(
      process.execPath,
      [join(__dirname, "stub-upstream.js"), "--port", String(stubPort), "--impl", "uws"],
      { readyLine: /listening on \d+/ },
    );
    stops.push(() => stub.stop());
    const nginx = await startNginx({
      binary: nginxBin,
      dir: join(outDir, "nginx-builds"),
      upstreamPort: stubPort,
      keepalive: o.connections,
    });
    stops.push(() => nginx.proc.stop());
    await redis.connect();
    stops.push(() => redis.cleanup());
    await redis.seedNetwork(`http://127.0.0.1:${stubPort}`);
    const [key] = await redis.seedKeys(1);
    const path = `/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key!)}`;
    const urls: Record<Target, string> = { nginx: `${nginx.url}${path}`, this: "", base: "" };
    const pids: Partial<Record<Target, number>> = {};
    for (const [t, m] of [
      ["this", undefined],
      ["base", baseMain],
    ] as const) {
      // BENCH_BASE_NODE: the other build runs on another Node (e.g. Node 20 against this checkout's 24).
      const node = t === "base" ? process.env.BENCH_BASE_NODE || undefined : undefined;
      const gw = await startGateway({
        redisUrl: o.redisUrl,
        prefix: redis.prefix,
        main: m,
        env: SAME_CAPS,
        node,
      });
      stops.push(() => gw.proc.stop());
      urls[t] = `${gw.baseUrl}${path}`;
      pids[t] = gw.proc.pid;
      log(`gateway ${t} (${m ?? "this checkout"}${node ? ` on ${node}` : ""}) pid ${gw.proc.pid}`);
    }

    log(`both gateways: ${JSON.stringify(SAME_CAPS)} (the calls-in-flight cap checked, never refusing)`);
    const targets: Target[] = ["nginx", "this", "base"];
    const runs = new Map<string, Run[]>();
    for (let round = 0; round < o.repeats; round++) {
      const order = targets.map((_, i) => targets[(i + round) % targets.length]!);
      for (const scenario of ["miss", "hit", "batch"] as const) {
        for (const t of order) {
          const label = `builds-${scenario}-${t}.${round + 1}`;
          const base = {
            url: urls[t],
            body: BODIES[scenario],
            connections: o.connections,
            threads: o.threads,
            outDir,
          };
          if (o.warmupS > 0)
            await runLoad({ ...base, durationS: o.warmupS, label: `${label}.warmup` }, "wrk");
          const pid = pids[t];
          const cpu0 = pid === undefined ? 0 : processCpuUs(pid);
          const load = await runLoad({ ...base, durationS: o.durationS, label }, "wrk");
          const run: Run = {
            requestsPerSec: load.requestsPerSec,
            cpuUsPerRequest:
              pid === undefined ? null : (processCpuUs(pid) - cpu0) / Math.max(1, load.requests),
            failed: load.non2xx + load.socketErrors,
          };
          const k = `${scenario}/${t}`;
          runs.set(k, [...(runs.get(k) ?? []), run]);
          log(
            `  ${label.padEnd(26)} ${Math.round(run.requestsPerSec).toLocaleString("en-US").padStart(8)} req/s` +
              (run.cpuUsPerRequest === null ? "" : `  CPU ${run.cpuUsPerRequest.toFixed(1)} µs/req`) +
              (run.failed > 0 ? `  FAILED ${run.failed}` : ""),
          );
        }
      }
    }

    const med = (scenario: Scenario, t: Target) => {
      const rs = runs.get(`${scenario}/${t}`) ?? [];
      const cpus = rs.map((r) => r.cpuUsPerRequest).filter((c): c is number => c !== null);
      return {
        requestsPerSec: Math.round(median(rs.map((r) => r.requestsPerSec))),
        runsRequestsPerSec: rs.map((r) => Math.round(r.requestsPerSec)),
        cpuUsPerRequest: cpus.length > 0 ? Number(median(cpus).toFixed(1)) : null,
        failed: rs.reduce((a, r) => a + r.failed, 0),
      };
    };
    // Paired: the ratio of two targets' runs within each round (minutes apart at most, so a burst of other
    // work falls on both), then the median over rounds. Steadier than a ratio of medians on a busy machine.
    const paired = (
      scenario: Scenario,
      of: Target,
      over: Target,
      by: "requestsPerSec" | "cpuUsPerRequest",
    ) => {
      const xs = runs.get(`${scenario}/${of}`) ?? [];
      const ys = runs.get(`${scenario}/${over}`) ?? [];
      const rs: number[] = [];
      for (let i = 0; i < Math.min(xs.length, ys.length); i++) {
        const x = xs[i]![by];
        const y = ys[i]![by];
        if (x !== null && y !== null && y > 0) rs.push(x / y);
      }
      return rs.length > 0 ? Number(median(rs).toFixed(3)) : null;
    };
    const result = {
      baseMain,
      repeats: o.repeats,
      durationS: o.durationS,
      connections: o.connections,
      scenarios: {} as Record<string, unknown>,
    };
    log(
      `\nmedians of ${o.repeats} rounds (req/s; gateway CPU µs per request); ratios: median of the rounds' paired ratios:`,
    );
    for (const scenario of ["miss", "hit", "batch"] as const) {
      const n = med(scenario, "nginx");
      const a = med(scenario, "this");
      const b = med(scenario, "base");
      const row = {
        nginx: n,
        this: a,
        base: b,
        thisVsNginx: paired(scenario, "this", "nginx", "requestsPerSec"),
        baseVsNginx: paired(scenario, "base", "nginx", "requestsPerSec"),
        thisVsBaseRequests: paired(scenario, "this", "base", "requestsPerSec"),
        thisVsBaseCpu: paired(scenario, "this", "base", "cpuUsPerRequest"),
      };
      result.scenarios[scenario] = row;
      log(
        `  ${scenario.padEnd(6)} nginx ${n.requestsPerSec}  this ${a.requestsPerSec} (CPU ${a.cpuUsPerRequest})  base ${b.requestsPerSec} (CPU ${b.cpuUsPerRequest})` +
          `  | this/nginx ${row.thisVsNginx}  base/nginx ${row.baseVsNginx}  this/base req/s ${row.thisVsBaseRequests}, CPU ${row.thisVsBaseCpu}`,
      );
    }
    writeFileSync(join(outDir, "builds.json"), `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    await stopAll();
  }
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
