/**
 * Indexer benchmark (issue 28 §2): an indexer keeping 50 batches of 100 in flight through one app key on the
 * `growth` plan as seeded (its per-second limit, quotas and concurrency caps), against a gateway run with the
 * data plane's defaults (bench/gateway.ts), in front of the bench stub node answering each exchange after
 * BENCH_INDEXER_NODE_MS (a node working through a batch). Reports the elements served per second and the
 * share of batches refused (429), by reason.
 *
 * Each of the 50 clients sends a batch of 100 unique receipt lookups, and the next one as soon as the
 * answer is in; on a 429 it waits the answer's `data.retryAfterMs` (as viem's and ethers' retries do) and
 * sends again. Two runs, one gateway, two keys:
 * - `growth`: the plan as seeded (500 requests/s, 5,000,000 per day; 500 calls in flight per key, 32 heavy).
 * - `growthCapsOnly`: growth's concurrency caps with the per-second limit lifted to 1,000,000, the
 *   situation of the issue (97% of batches refused for concurrency before batches were counted per
 *   upstream exchange): what the caps alone let through.
 *
 *   node dist/bench/indexer.js     (alone: prints the figures and writes the `indexer` section of
 *                                   bench/results.json, or BENCH_RESULTS; the rest of the file is kept)
 *   import { runIndexerBench } from "./indexer"   (from bench/run.ts; BENCH_INDEXER=0 skips it there)
 *
 * Environment: BENCH_DURATION_S (10), BENCH_WARMUP_S (2), BENCH_INDEXER_BATCHES (50), BENCH_INDEXER_SIZE
 * (100), BENCH_INDEXER_NODE_MS (20), BENCH_GATEWAY_MAIN (another build of the data plane, e.g. an older
 * one for a before / after), REDIS_URL.
 */
import { Agent, request } from "undici";
import { generateApiKey, hashApiKey } from "../shared/src/crypto/api-key";
import { KeyRecordSchema, type PlanLimits } from "../shared/src/redis/records";
import { envInt } from "./env";
import { BENCH_NETWORK, BenchRedis, type Gateway, startGateway } from "./gateway";
import { writeResultsSection } from "./results-file";
import { runStandalone } from "./standalone";
import { startStubUpstream } from "./stub-upstream";

/**
 * The `growth` plan as the migrations seed it (1700000000000-initial.ts: 500 requests/s, 5,000,000 per
 * day; 1700000025300-plan-in-flight-caps.ts: 500 calls and 32 heavy calls in flight per key).
 */
export const SEEDED_GROWTH: PlanLimits = {
  name: "growth",
  requestsPerSecond: 500,
  dailyRequestLimit: 5_000_000,
  monthlyRequestLimit: null,
  maxInFlightPerKey: 500,
  maxHeavyInFlightPerKey: 32,
};

export interface IndexerBenchOptions {
  redisUrl?: string;
  durationS?: number;
  warmupS?: number;
  batches?: number;
  size?: number;
  nodeMs?: number;
}

export interface IndexerRunResult {
  plan: PlanLimits;
  /** Batch elements answered by the node (in 200 answers) per second of the measured run. */
  elementsPerSec: number;
  /** Batches sent (every try counts, retries included). */
  batchesSent: number;
  batchesServed: number;
  /** Refused batches / batches sent. */
  refusedShare: number;
  /** Refused batches per `data.reason` (concurrency_limit, rate_limit, daily_limit, ...). */
  refusedByReason: Record<string, number>;
  /** Answers neither 200 nor 429, and transport errors. */
  otherFailures: number;
  p50BatchMs: number;
  p99BatchMs: number;
}

export interface IndexerBenchResult {
  batches: number;
  size: number;
  nodeMs: number;
  durationS: number;
  /** What the gateway process was started with besides its defaults (none for the caps). */
  gatewayEnv: Record<string, string>;
  growth: IndexerRunResult;
  growthCapsOnly: IndexerRunResult;
}

const log = (s: string) => process.stdout.write(`${s}\n`);

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function seedKey(redis: BenchRedis, appId: string, plan: PlanLimits): Promise<string> {
  const key = generateApiKey();
  const record = KeyRecordSchema.parse({
    kind: "app",
    workspaceId: `ws-${appId}`,
    appId,
    nodeId: null,
    plan,
    allowlist: { origins: [], ips: [] },
    expiresAtMs: null,
    rpcMethods: null,
  });
  await redis.redis.set(redis.names.apiKey(hashApiKey(key)), JSON.stringify(record));
  return key;
}

/** `batches` clients, each with one batch in flight at a time, for `ms`; counts only what ends in the window. */
async function drive(
  gw: Gateway,
  key: string,
  o: { batches: number; size: number; ms: number; seed: number },
): Promise<Omit<IndexerRunResult, "plan">> {
  const path = `/${BENCH_NETWORK}/rpc?apikey=${key}`;
  const dispatcher = new Agent({ connections: o.batches, keepAliveTimeout: 30_000 });
  const refusedByReason: Record<string, number> = {};
  const latencies: number[] = [];
  let sent = 0;
  let served = 0;
  let elements = 0;
  let other = 0;
  let next = o.seed;
  const started = performance.now();
  const end = started + o.ms;
  const client = async () => {
    while (performance.now() < end) {
      const from = next;
      next += o.size;
      const body = JSON.stringify(
        Array.from({ length: o.size }, (_, i) => ({
          jsonrpc: "2.0",
          id: i,
          method: "eth_getTransactionReceipt",
          params: [`0x${(from + i).toString(16).padStart(64, "0")}`],
        })),
      );
      const t0 = performance.now();
      sent++;
      try {
        const res = await request(`${gw.baseUrl}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
          dispatcher,
        });
        const text = await res.body.text();
        if (res.statusCode === 200) {
          served++;
          elements += o.size;
          latencies.push(performance.now() - t0);
        } else if (res.statusCode === 429) {
          const e = (JSON.parse(text) as { error?: { data?: { reason?: string; retryAfterMs?: number } } })
            .error?.data;
          const reason = e?.reason ?? "unknown";
          refusedByReason[reason] = (refusedByReason[reason] ?? 0) + 1;
          const wait = Math.min(e?.retryAfterMs ?? 1000, Math.max(0, end - performance.now()));
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        } else other++;
      } catch {
        other++;
      }
    }
  };
  await Promise.all(Array.from({ length: o.batches }, () => client()));
  const seconds = (performance.now() - started) / 1000;
  await dispatcher.close();
  latencies.sort((a, b) => a - b);
  let refused = 0;
  for (const n of Object.values(refusedByReason)) refused += n;
  return {
    elementsPerSec: Math.round(elements / seconds),
    batchesSent: sent,
    batchesServed: served,
    refusedShare: sent === 0 ? 0 : Number((refused / sent).toFixed(4)),
    refusedByReason,
    otherFailures: other,
    p50BatchMs: Number(percentile(latencies, 50).toFixed(1)),
    p99BatchMs: Number(percentile(latencies, 99).toFixed(1)),
  };
}

/** Runs the bench: its own stub node (in this process) and gateway process (stopped by PID), Redis records under a fresh prefix. */
export async function runIndexerBench(opts: IndexerBenchOptions = {}): Promise<IndexerBenchResult> {
  const durationS = Math.max(1, opts.durationS ?? 10);
  const warmupS = Math.max(0, opts.warmupS ?? 2);
  const batches = Math.max(1, opts.batches ?? 50);
  const size = Math.max(1, opts.size ?? 100);
  const nodeMs = Math.max(0, opts.nodeMs ?? 20);
  const redis = new BenchRedis(opts.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  // Every exchange answered after nodeMs: a node working through a batch.
  const stub = await startStubUpstream({ slowPercent: nodeMs > 0 ? 100 : 0, slowMs: nodeMs });
  let gw: Gateway | undefined;
  try {
    await redis.connect();
    await redis.seedNetwork(`http://127.0.0.1:${stub.port}`);
    const growthKey = await seedKey(redis, "indexer-growth", SEEDED_GROWTH);
    const capsOnly = { ...SEEDED_GROWTH, name: "growth-caps-only", requestsPerSecond: 1_000_000 };
    const capsKey = await seedKey(redis, "indexer-caps-only", capsOnly);
    // The data plane's defaults; only the log level is quieter than an operator's.
    const gatewayEnv = { LOG_LEVEL: "warn" };
    gw = await startGateway({ redisUrl: redis.url, prefix: redis.prefix, env: gatewayEnv });
    log(
      `indexer bench: ${batches} clients x batches of ${size} through one key, node answers each exchange after ${nodeMs} ms, ${durationS} s per run (+${warmupS} s warm-up); gateway with the data plane's defaults (MAX_IN_FLIGHT_PER_KEY, MAX_HEAVY_IN_FLIGHT_PER_KEY unset: the plans' caps apply)`,
    );
    const run = async (
      label: string,
      key: string,
      plan: PlanLimits,
      seed: number,
    ): Promise<IndexerRunResult> => {
      // The warm-up runs on the caps-only key, so it spends none of the measured key's windows.
      if (warmupS > 0) await drive(gw!, capsKey, { batches, size, ms: warmupS * 1000, seed: seed + 5e8 });
      const r = { plan, ...(await drive(gw!, key, { batches, size, ms: durationS * 1000, seed })) };
      const reasons = Object.entries(r.refusedByReason)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ");
      log(
        `  ${label.padEnd(16)} ${r.elementsPerSec.toLocaleString("en-US")} elements/s; ${r.batchesServed}/${r.batchesSent} batches served, refused ${(r.refusedShare * 100).toFixed(1)}%${reasons === "" ? "" : ` (${reasons})`}; batch p50 ${r.p50BatchMs} ms, p99 ${r.p99BatchMs} ms${r.otherFailures > 0 ? `; other failures ${r.otherFailures}` : ""}`,
      );
      return r;
    };
    const growth = await run("growth", growthKey, SEEDED_GROWTH, 1);
    const growthCapsOnly = await run("growth caps only", capsKey, capsOnly, 1e9);
    return { batches, size, nodeMs, durationS, gatewayEnv, growth, growthCapsOnly };
  } finally {
    await gw?.proc.stop();
    await stub.close();
    await redis.cleanup();
  }
}

/** Standalone: runs, prints, and writes the `indexer` section into the results file (the rest kept). */
async function main(): Promise<void> {
  const result = await runIndexerBench({
    durationS: envInt("BENCH_DURATION_S", 10),
    warmupS: envInt("BENCH_WARMUP_S", 2),
    batches: envInt("BENCH_INDEXER_BATCHES", 50),
    size: envInt("BENCH_INDEXER_SIZE", 100),
    nodeMs: envInt("BENCH_INDEXER_NODE_MS", 20),
  });
  writeResultsSection("indexer", { date: new Date().toISOString(), ...result });
  log("\nwrote the indexer section of the results file");
}

if (require.main === module) runStandalone("indexer", main);
