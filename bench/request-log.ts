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
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "../test/helpers/ports";
import { type StartedProcess, startProcess } from "../test/helpers/process";
import { type SectionLoadOptions, sectionLoadFromEnv } from "./env";
import { BENCH_NETWORK, BenchRedis, type Gateway, startGateway } from "./gateway";
import { type Body, runLoad, which } from "./load";
import { writeResultsSection } from "./results-file";

export interface RequestLogBenchOptions extends SectionLoadOptions {
  log: (s: string) => void;
}

export interface RequestLogVariant {
  label: string;
  env: Record<string, string>;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Every round's req/s, worst first (the row is the median). */
  runsRequestsPerSec: number[];
  failed: number;
}

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

const VARIANTS: { label: string; env: Record<string, string> }[] = [
  { label: "request-log-off", env: { REQUEST_LOG_ENABLED: "false" } },
  { label: "request-log-on-1pct", env: { REQUEST_LOG_ENABLED: "true", REQUEST_LOG_SAMPLE_PERCENT: "1" } },
  { label: "request-log-on-100pct", env: { REQUEST_LOG_ENABLED: "true", REQUEST_LOG_SAMPLE_PERCENT: "100" } },
];

export async function runRequestLogBench(o: RequestLogBenchOptions): Promise<RequestLogBenchResult> {
  const tool: "wrk" | "autocannon" = which("wrk") ? "wrk" : "autocannon";
  const outDir = join(resolve(__dirname, "../../bench"), "out");
  mkdirSync(outDir, { recursive: true });
  const stops: (() => Promise<void>)[] = [];
  const redis = new BenchRedis(o.redisUrl);
  try {
    const stubPort = await freePort();
    const stub: StartedProcess = await startProcess(
      process.execPath,
      [join(__dirname, "stub-upstream.js"), "--port", String(stubPort), "--impl", "uws"],
      { readyLine: /listening on \d+/ },
    );
    stops.push(async () => {
      await stub.stop();
    });
    await redis.connect();
    await redis.seedNetwork(`http://127.0.0.1:${stubPort}`);
    const [key] = await redis.seedKeys(1);
    const path = `/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key!)}`;
    // One gateway per variant on the same prefix (network, key, stream): only the one under load writes.
    const gateways: { v: (typeof VARIANTS)[number]; gw: Gateway; stream: string }[] = [];
    for (const v of VARIANTS) {
      const gw = await startGateway({ redisUrl: o.redisUrl, prefix: redis.prefix, env: v.env });
      stops.push(async () => {
        await gw.proc.stop();
      });
      gateways.push({ v, gw, stream: redis.names.requestLogStream() });
    }
    const body: Body = { kind: "unique-eth-call" };
    const runs = new Map<string, { rps: number; p50: number; p99: number; failed: number }[]>(
      VARIANTS.map((v) => [v.label, []]),
    );
    const streamEntries: Record<string, number> = {};
    for (let round = 0; round < o.repeats; round++) {
      for (const { v, gw, stream } of gateways) {
        const base = {
          url: `${gw.baseUrl}${path}`,
          body,
          connections: o.connections,
          threads: o.threads,
          outDir,
        };
        if (o.warmupS > 0) await runLoad({ ...base, durationS: o.warmupS, label: `${v.label}.warmup` }, tool);
        // The warm-up's last flush (REQUEST_LOG_FLUSH_INTERVAL_MS, 1 s) lands before the count restarts.
        await new Promise((res) => setTimeout(res, 1_200));
        await redis.redis.del(stream);
        const r = await runLoad({ ...base, durationS: o.durationS, label: `${v.label}.${round + 1}` }, tool);
        // Let the last flush (every REQUEST_LOG_FLUSH_INTERVAL_MS, 1 s) land before counting records.
        await new Promise((res) => setTimeout(res, 1_500));
        streamEntries[v.label] = await countRecords(redis, stream);
        runs
          .get(v.label)!
          .push({ rps: r.requestsPerSec, p50: r.p50Ms, p99: r.p99Ms, failed: r.non2xx + r.socketErrors });
        o.log(
          `  ${`${v.label}.${round + 1}`.padEnd(26)} ${Math.round(r.requestsPerSec).toLocaleString("en-US").padStart(8)} req/s` +
            `  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  records logged ${streamEntries[v.label]}`,
        );
      }
    }
    const variants: RequestLogVariant[] = VARIANTS.map((v) => {
      const sorted = [...runs.get(v.label)!].sort((a, b) => a.rps - b.rps);
      const m = sorted[Math.floor((sorted.length - 1) / 2)]!;
      return {
        label: v.label,
        env: v.env,
        requestsPerSec: Math.round(m.rps),
        p50Ms: m.p50,
        p99Ms: m.p99,
        runsRequestsPerSec: sorted.map((r) => Math.round(r.rps)),
        failed: m.failed,
      };
    });
    const rps = (label: string) => variants.find((x) => x.label === label)!.requestsPerSec;
    const ratio = (a: number, b: number) => (b > 0 ? Number((a / b).toFixed(3)) : null);
    return {
      tool,
      durationS: o.durationS,
      connections: o.connections,
      repeats: o.repeats,
      variants,
      onVsOff: ratio(rps("request-log-on-1pct"), rps("request-log-off")),
      allVsOff: ratio(rps("request-log-on-100pct"), rps("request-log-off")),
      streamEntries,
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    await redis.cleanup().catch(() => {});
  }
}

/** Records in the stream (each entry is one flush: a JSON batch). */
async function countRecords(redis: BenchRedis, stream: string): Promise<number> {
  const entries = (await redis.redis.xrange(stream, "-", "+")) as [string, string[]][];
  let n = 0;
  for (const [, fields] of entries) n += (JSON.parse(fields[1]!) as { records: unknown[] }).records.length;
  return n;
}

export function printRequestLogBench(r: RequestLogBenchResult, log: (s: string) => void): void {
  for (const v of r.variants)
    log(
      `  ${v.label.padEnd(24)} ${v.requestsPerSec.toLocaleString("en-US").padStart(8)} req/s (median of ${v.runsRequestsPerSec.join(", ")})`,
    );
  log(`request log on (1%) / off cache-miss req/s:   ${r.onVsOff ?? "-"}`);
  log(`request log on (100%) / off cache-miss req/s: ${r.allVsOff ?? "-"}`);
}

export function requestLogOptionsFromEnv(log: (s: string) => void): RequestLogBenchOptions {
  return { ...sectionLoadFromEnv(), log };
}

if (require.main === module) {
  const log = (s: string) => process.stdout.write(`${s}\n`);
  const o = requestLogOptionsFromEnv(log);
  log(
    `request-log bench: ${o.durationS} s per run (+${o.warmupS} s warm-up), ${o.connections} connections, ${o.repeats} rounds`,
  );
  runRequestLogBench(o).then(
    (r) => {
      printRequestLogBench(r, log);
      writeResultsSection("requestLog", { date: new Date().toISOString(), ...r });
      process.exit(0);
    },
    (e: unknown) => {
      process.stderr.write(`request-log bench failed: ${e instanceof Error ? e.stack : String(e)}\n`);
      process.exit(1);
    },
  );
}
