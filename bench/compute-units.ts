/**
 * Compute-unit benchmark (issue 28 §1): keyed cache-miss requests per second through one gateway process
 * for a workspace whose plan limits compute units (per second, per day and per month, all far above the
 * load, so nothing is refused) against one whose plan counts requests only, measured in the same run,
 * alternating (BENCH_CU_REPEATS rounds, median kept), in front of the instant stub upstream. The network
 * carries method weights (eth_call 26, as the seeded platform table), so both variants weigh each request;
 * the compute-unit one also passes its compute-unit window and quotas. The body is an `eth_call` with
 * params unique per request: every request goes upstream.
 *
 *   node dist/bench/compute-units.js   (alone: prints the figures and writes the `computeUnits` section of
 *                                       bench/results.json, or BENCH_RESULTS; the rest of the file is kept)
 *   import { runComputeUnitsBench } from "./compute-units"   (from bench/run.ts)
 *
 * Environment: BENCH_DURATION_S (10), BENCH_WARMUP_S (2), BENCH_CONNECTIONS (64), BENCH_THREADS,
 * BENCH_CU_REPEATS (3), BENCH_STUB_IMPL (uws), REDIS_URL. Load by wrk when installed, else autocannon.
 */
import os from "node:os";
import { generateApiKey, hashApiKey } from "../shared/src/crypto/api-key";
import { KeyRecordSchema, NetworkRecordSchema, type PlanLimits } from "../shared/src/redis/records";
import { envInt } from "./env";
import { BENCH_NETWORK, startGateway } from "./gateway";
import { RESULTS_FILE, writeResultsSection } from "./results-file";
import { runStandalone } from "./standalone";
import { runVariantsSection, type VariantMedian } from "./variants";

export interface ComputeUnitsBenchOptions {
  redisUrl?: string;
  durationS?: number;
  warmupS?: number;
  connections?: number;
  threads?: number;
  repeats?: number;
  stubImpl?: "uws" | "node";
  outDir?: string;
}

export interface ComputeUnitsModeResult {
  requestsPerSec: number;
  /** The gateway process's CPU time per request, median round (less sensitive to other load than req/s). */
  cpuUsPerRequest: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  runsRequestsPerSec: number[];
}

export interface ComputeUnitsBenchResult {
  tool: "wrk" | "autocannon";
  connections: number;
  durationS: number;
  repeats: number;
  requestsOnly: ComputeUnitsModeResult;
  computeUnits: ComputeUnitsModeResult;
  /** The `X-Compute-Units` of one request of the body (eth_call: 26). */
  unitsPerRequest: number;
  ratios: { cacheMissCuVsRequestsOnly: number | null; cpuPerRequestCuVsRequestsOnly: number | null };
}

const log = (s: string) => process.stdout.write(`${s}\n`);
const CALL_BODY =
  '{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x0000000000000000000000000000000000000001"},"latest"]}';
const COSTS = { defaultUnits: 20, methods: { eth_call: 26, eth_chainId: 0, eth_getLogs: 75 } };

const REQUESTS_ONLY: PlanLimits = {
  name: "bench-requests",
  requestsPerSecond: 1_000_000_000,
  dailyRequestLimit: 1_000_000_000_000,
  monthlyRequestLimit: null,
};
const WITH_CU: PlanLimits = {
  ...REQUESTS_ONLY,
  name: "bench-cu",
  computeUnitsPerSecond: 2_000_000_000,
  dailyComputeUnitLimit: 1_000_000_000_000_000,
  monthlyComputeUnitLimit: 1_000_000_000_000_000,
};

function modeResult(v: VariantMedian): ComputeUnitsModeResult {
  const m = v.median;
  return {
    requestsPerSec: v.requestsPerSec,
    cpuUsPerRequest: v.cpuUsPerRequest,
    p50Ms: m.p50Ms,
    p99Ms: m.p99Ms,
    non2xx: m.non2xx,
    runsRequestsPerSec: v.runsRequestsPerSec,
  };
}

/** Runs the bench: its own stub and gateway processes (stopped by PID), Redis records under a fresh prefix. */
export async function runComputeUnitsBench(
  opts: ComputeUnitsBenchOptions = {},
): Promise<ComputeUnitsBenchResult> {
  const durationS = Math.max(1, opts.durationS ?? 10);
  const warmupS = Math.max(0, opts.warmupS ?? 2);
  const connections = Math.max(1, opts.connections ?? 64);
  const threads = Math.max(1, opts.threads ?? (os.cpus().length <= 2 ? 1 : 2));
  const repeats = Math.max(1, opts.repeats ?? 3);
  let unitsPerRequest = -1;
  const r = await runVariantsSection({
    labels: ["requests-only", "compute-units"],
    load: {
      redisUrl: opts.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
      durationS,
      warmupS,
      connections,
      threads,
      repeats,
      stubImpl: opts.stubImpl,
      outDir: opts.outDir,
    },
    log,
    setup: async ({ redis, stub, tool, defer }) => {
      // The section's network (seeded without weights), now with method weights, before the gateway starts.
      const raw = await redis.redis.hget(redis.names.networks(), BENCH_NETWORK);
      const net = NetworkRecordSchema.parse(JSON.parse(raw ?? "null"));
      await redis.redis.hset(
        redis.names.networks(),
        BENCH_NETWORK,
        JSON.stringify({ ...net, methodCosts: COSTS }),
      );
      // Two workspaces, one key each: one plan counts requests only, the other limits compute units too.
      const keyFor = async (workspaceId: string, plan: PlanLimits) => {
        const key = generateApiKey();
        const record = KeyRecordSchema.parse({
          kind: "app",
          workspaceId,
          appId: `app-${workspaceId}`,
          nodeId: null,
          plan,
          allowlist: { origins: [], ips: [] },
          expiresAtMs: null,
          rpcMethods: null,
        });
        await redis.redis.set(redis.names.apiKey(hashApiKey(key)), JSON.stringify(record));
        return key;
      };
      const plainKey = await keyFor("ws-bench-requests", REQUESTS_ONLY);
      const cuKey = await keyFor("ws-bench-cu", WITH_CU);
      const gw = await startGateway({ redisUrl: redis.url, prefix: redis.prefix });
      defer(() => gw.proc.stop());
      const url = (key: string) => `${gw.baseUrl}/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key)}`;
      for (const [label, key] of [
        ["requests only", plainKey],
        ["compute units", cuKey],
      ] as const) {
        const res = await fetch(url(key), {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: CALL_BODY,
        });
        const text = await res.text();
        if (res.status !== 200 || !text.includes('"result"'))
          throw new Error(`${label}: sanity request failed: HTTP ${res.status} ${text}`);
        unitsPerRequest = Number(res.headers.get("x-compute-units") ?? -1);
        if (unitsPerRequest !== 26)
          throw new Error(`${label}: X-Compute-Units ${unitsPerRequest}, expected 26`);
      }
      log(
        `gateway pid ${gw.proc.pid}, stub pid ${stub.pid}; ${repeats} rounds of ${durationS}s (+${warmupS}s warm-up), ${connections} connections, ${tool}`,
      );
      return {
        "requests-only": { url: url(plainKey), pid: gw.proc.pid },
        "compute-units": { url: url(cuKey), pid: gw.proc.pid },
      };
    },
    order: (round) =>
      round % 2 === 0 ? ["requests-only", "compute-units"] : ["compute-units", "requests-only"],
    afterRun: (_, run) => `  gateway CPU ${run.cpuUsPerRequest.toFixed(1)} µs/request`,
    labelWidth: 13,
    flagFailures: true,
    cpuDigits: 2,
    ratios: {
      cacheMissCuVsRequestsOnly: { of: "compute-units", over: "requests-only", by: "requestsPerSec" },
      cpuPerRequestCuVsRequestsOnly: { of: "compute-units", over: "requests-only", by: "cpuUsPerRequest" },
    },
  });
  const requestsOnly = modeResult(r.variants["requests-only"]);
  const computeUnits = modeResult(r.variants["compute-units"]);
  const result: ComputeUnitsBenchResult = {
    tool: r.tool,
    connections,
    durationS,
    repeats,
    requestsOnly,
    computeUnits,
    unitsPerRequest,
    ratios: r.ratios,
  };
  log(
    `  median: requests-only ${requestsOnly.requestsPerSec.toLocaleString("en-US")} req/s (${requestsOnly.cpuUsPerRequest} µs CPU/request), compute units ${computeUnits.requestsPerSec.toLocaleString("en-US")} req/s (${computeUnits.cpuUsPerRequest} µs); CU/requests-only req/s ${result.ratios.cacheMissCuVsRequestsOnly}, CPU/request ${result.ratios.cpuPerRequestCuVsRequestsOnly}`,
  );
  return result;
}

/** Standalone: runs, prints, and writes the `computeUnits` section into the results file (the rest kept). */
async function main(): Promise<void> {
  log("compute units bench (keyed cache miss, plan limiting compute units vs requests only):");
  const result = await runComputeUnitsBench({
    durationS: envInt("BENCH_DURATION_S", 10),
    warmupS: envInt("BENCH_WARMUP_S", 2),
    connections: envInt("BENCH_CONNECTIONS", 64),
    threads: process.env.BENCH_THREADS ? envInt("BENCH_THREADS", 1) : undefined,
    repeats: envInt("BENCH_CU_REPEATS", 3),
    stubImpl: (process.env.BENCH_STUB_IMPL ?? "uws") as "uws" | "node",
  });
  writeResultsSection("computeUnits", { date: new Date().toISOString(), ...result }, RESULTS_FILE, {
    computeUnitsVsRequestsOnlyCacheMissReqPerSec: result.ratios.cacheMissCuVsRequestsOnly,
    computeUnitsVsRequestsOnlyCpuPerRequest: result.ratios.cpuPerRequestCuVsRequestsOnly,
  });
  log(`\nwrote the computeUnits section of ${RESULTS_FILE}`);
}

if (require.main === module) runStandalone("compute units", main);
