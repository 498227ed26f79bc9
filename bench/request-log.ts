/**
 * Request-log cost: keyed cache-miss req/s (unique eth_call, all Success) of the same gateway with the
 * request log off, on at the default 1% success sample, and on at 100% (every request logged: the worst
 * case), measured in one run, round-robin over BENCH_REPEATS rounds (median kept) so a burst of load from
 * elsewhere hits every variant alike. Each variant is its own gateway process on one shared stub upstream;
 * the request-log stream is trimmed between rounds and nobody consumes it.
 *
 * `node dist/bench/request-log.js` runs it alone and writes the `requestLog` section of bench/results.json;
 * `npm run bench` runs it too (BENCH_REQUEST_LOG=0 skips it). Environment: BENCH_DURATION_S (10),
 * BENCH_WARMUP_S (2), BENCH_CONNECTIONS (64), BENCH_THREADS, BENCH_REPEATS (3 here), REDIS_URL.
 */
import { type SectionLoadOptions, sectionLoadFromEnv } from "./env";
import type { BenchRedis } from "./gateway";
import { writeResultsSection } from "./results-file";
import { runStandalone } from "./standalone";
import { medianRow, runVariantsSection, type VariantRow, variantRow } from "./variants";

export interface RequestLogBenchOptions extends SectionLoadOptions {
  log: (s: string) => void;
}

export type RequestLogVariant = VariantRow;

export interface RequestLogBenchResult {
  tool: string;
  durationS: number;
  connections: number;
  repeats: number;
  variants: RequestLogVariant[];
  /** Cache-miss req/s with the request log on (default 1% sample) / off: the feature's cost (target > 0.95). */
  onVsOff: number | null;
  /** The same with every request logged (100% sample). */
  allVsOff: number | null;
  /** Records the 1% and 100% gateways wrote to the stream in their last round (the sample shows). */
  streamEntries: Record<string, number>;
}

const VARIANT_ENV = {
  "request-log-off": { REQUEST_LOG_ENABLED: "false" },
  "request-log-on-1pct": { REQUEST_LOG_ENABLED: "true", REQUEST_LOG_SAMPLE_PERCENT: "1" },
  "request-log-on-100pct": { REQUEST_LOG_ENABLED: "true", REQUEST_LOG_SAMPLE_PERCENT: "100" },
} satisfies Record<string, Record<string, string>>;
type Label = keyof typeof VARIANT_ENV;
const LABELS = Object.keys(VARIANT_ENV) as Label[];

export async function runRequestLogBench(o: RequestLogBenchOptions): Promise<RequestLogBenchResult> {
  let redis!: BenchRedis;
  // Every gateway shares the prefix (network, key, stream): only the one under load writes to the stream.
  let stream = "";
  const streamEntries: Record<string, number> = {};
  const r = await runVariantsSection({
    labels: LABELS,
    load: o,
    log: o.log,
    setup: (ctx) => {
      redis = ctx.redis;
      stream = redis.names.requestLogStream();
      return ctx.gatewayPerVariant((label) => VARIANT_ENV[label]);
    },
    beforeRun: async () => {
      // The warm-up's last flush (REQUEST_LOG_FLUSH_INTERVAL_MS, 1 s) lands before the count restarts.
      await new Promise((res) => setTimeout(res, 1_200));
      await redis.redis.del(stream);
    },
    afterRun: async (label) => {
      // Let the last flush (every REQUEST_LOG_FLUSH_INTERVAL_MS, 1 s) land before counting records.
      await new Promise((res) => setTimeout(res, 1_500));
      streamEntries[label] = await countRecords(redis, stream);
      return `  records logged ${streamEntries[label]}`;
    },
    ratios: {
      onVsOff: { of: "request-log-on-1pct", over: "request-log-off", by: "requestsPerSec" },
      allVsOff: { of: "request-log-on-100pct", over: "request-log-off", by: "requestsPerSec" },
    },
  });
  return {
    tool: r.tool,
    durationS: o.durationS,
    connections: o.connections,
    repeats: o.repeats,
    variants: LABELS.map((label) => variantRow(label, VARIANT_ENV[label], r.variants[label])),
    ...r.ratios,
    streamEntries,
  };
}

/** Records in the stream (each entry is one flush: a JSON batch). */
async function countRecords(redis: BenchRedis, stream: string): Promise<number> {
  const entries = (await redis.redis.xrange(stream, "-", "+")) as [string, string[]][];
  let n = 0;
  for (const [, fields] of entries) n += (JSON.parse(fields[1]!) as { records: unknown[] }).records.length;
  return n;
}

export function printRequestLogBench(r: RequestLogBenchResult, log: (s: string) => void): void {
  for (const v of r.variants) log(medianRow(v));
  log(`request log on (1%) / off cache-miss req/s:   ${r.onVsOff ?? "-"}`);
  log(`request log on (100%) / off cache-miss req/s: ${r.allVsOff ?? "-"}`);
}

export function requestLogOptionsFromEnv(log: (s: string) => void): RequestLogBenchOptions {
  return { ...sectionLoadFromEnv(), log };
}

if (require.main === module) {
  runStandalone("request-log", async () => {
    const log = (s: string) => process.stdout.write(`${s}\n`);
    const o = requestLogOptionsFromEnv(log);
    log(
      `request-log bench: ${o.durationS} s per run (+${o.warmupS} s warm-up), ${o.connections} connections, ${o.repeats} rounds`,
    );
    const r = await runRequestLogBench(o);
    printRequestLogBench(r, log);
    writeResultsSection("requestLog", { date: new Date().toISOString(), ...r });
  });
}
