/**
 * Tracing cost: keyed cache-miss req/s (unique eth_call) of the same gateway with OpenTelemetry tracing
 * off (no OTEL_* set: no SDK loaded) and on at 1% sampling (OTEL_TRACES_SAMPLER=parentbased_traceidratio,
 * OTEL_TRACES_SAMPLER_ARG=0.01, OTLP/HTTP protobuf to a loopback sink that discards), measured in one run,
 * round-robin over BENCH_REPEATS rounds (median kept) so a burst of load from elsewhere hits both alike.
 * A third variant at 100% shows the cost of a span tree per request (the worst case).
 *
 * Also the gateway's CPU time per request (user + system, /proc/PID/stat) of each run: on a loaded
 * machine req/s swings with whatever else runs, and cache-miss CPU per request with it (fewer calls per
 * coalesced upstream batch at a lower rate), so the rows are medians of interleaved rounds and
 * `cpuOnVsOff` is the figure to compare (> 1 = tracing costs CPU).
 *
 * `node dist/bench/tracing.js` runs it alone and writes the `tracing` section of bench/results.json;
 * `npm run bench` runs it too (BENCH_TRACING=0 skips it). Environment: BENCH_DURATION_S (10),
 * BENCH_WARMUP_S (2), BENCH_CONNECTIONS (64), BENCH_THREADS, BENCH_REPEATS (3 here), REDIS_URL.
 */
import { mkdirSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { freePort } from "../test/helpers/ports";
import { type StartedProcess, startProcess } from "../test/helpers/process";
import { type SectionLoadOptions, sectionLoadFromEnv } from "./env";
import { BENCH_NETWORK, BenchRedis, type Gateway, processCpuUs, startGateway } from "./gateway";
import { type Body, runLoad, which } from "./load";
import { writeResultsSection } from "./results-file";

export interface TracingBenchOptions extends SectionLoadOptions {
  log: (s: string) => void;
}

export interface TracingVariant {
  label: string;
  env: Record<string, string>;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Every round's req/s, worst first (the row is the median). */
  runsRequestsPerSec: number[];
  /** The gateway's CPU (user + system) per request, median of the rounds. */
  cpuUsPerRequest: number;
  failed: number;
}

export interface TracingBenchResult {
  tool: string;
  durationS: number;
  connections: number;
  repeats: number;
  variants: TracingVariant[];
  /** Cache-miss req/s with tracing on at 1% / off: the feature's cost. */
  onVsOff: number | null;
  /** The same with every request traced (100%). */
  allVsOff: number | null;
  /** Gateway CPU per request with tracing on at 1% / off (1.05 = 5% more CPU per request). */
  cpuOnVsOff: number | null;
  cpuAllVsOff: number | null;
  /** Spans the sink received per variant in its last round (export requests and bytes). */
  exported: Record<string, { requests: number; bytes: number }>;
}

/** Where the on variants export to: OTLP/HTTP (protobuf, the SDK default) at the sink's port. */
function otel(sinkUrl: string, ratio: string): Record<string, string> {
  return {
    OTEL_TRACES_EXPORTER: "otlp",
    OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: ratio,
  };
}

const LABELS = ["tracing-off", "tracing-on-1pct", "tracing-on-100pct"] as const;

/** A loopback OTLP sink: answers every export 200 and keeps only counts. */
async function startSink(): Promise<{
  url: string;
  counts: { requests: number; bytes: number };
  close(): void;
}> {
  const counts = { requests: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on("data", (c: Buffer) => {
      counts.bytes += c.length;
    });
    req.on("end", () => {
      counts.requests++;
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    counts,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

export async function runTracingBench(o: TracingBenchOptions): Promise<TracingBenchResult> {
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
    const sink = await startSink();
    stops.push(async () => sink.close());
    const VARIANTS = [
      { label: LABELS[0], env: {} },
      { label: LABELS[1], env: otel(sink.url, "0.01") },
      { label: LABELS[2], env: otel(sink.url, "1") },
    ];
    await redis.connect();
    await redis.seedNetwork(`http://127.0.0.1:${stubPort}`);
    const [key] = await redis.seedKeys(1);
    const path = `/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key!)}`;
    // One gateway per variant on the same prefix (network, key); the bench's own OTEL_* never leak in.
    const clean: NodeJS.ProcessEnv = {};
    for (const k of Object.keys(process.env)) if (k.startsWith("OTEL_")) clean[k] = undefined;
    const gateways: { v: (typeof VARIANTS)[number]; gw: Gateway }[] = [];
    for (const v of VARIANTS) {
      const gw = await startGateway({
        redisUrl: o.redisUrl,
        prefix: redis.prefix,
        env: { ...clean, ...v.env },
      });
      stops.push(async () => {
        await gw.proc.stop();
      });
      gateways.push({ v, gw });
    }
    const body: Body = { kind: "unique-eth-call" };
    const runs = new Map<string, { rps: number; p50: number; p99: number; failed: number; cpu: number }[]>(
      VARIANTS.map((v) => [v.label, []]),
    );
    const exported: Record<string, { requests: number; bytes: number }> = {};
    for (let round = 0; round < o.repeats; round++) {
      for (const { v, gw } of gateways) {
        const base = {
          url: `${gw.baseUrl}${path}`,
          body,
          connections: o.connections,
          threads: o.threads,
          outDir,
        };
        if (o.warmupS > 0) await runLoad({ ...base, durationS: o.warmupS, label: `${v.label}.warmup` }, tool);
        // The warm-up's last export (every OTEL_BSP_SCHEDULE_DELAY, 5 s by default) lands before the count.
        await new Promise((res) => setTimeout(res, 5_500));
        const r0 = { ...sink.counts };
        const cpu0 = processCpuUs(gw.proc.pid);
        const r = await runLoad({ ...base, durationS: o.durationS, label: `${v.label}.${round + 1}` }, tool);
        const cpu = (processCpuUs(gw.proc.pid) - cpu0) / Math.max(1, r.requests);
        await new Promise((res) => setTimeout(res, 5_500));
        exported[v.label] = {
          requests: sink.counts.requests - r0.requests,
          bytes: sink.counts.bytes - r0.bytes,
        };
        runs.get(v.label)!.push({
          rps: r.requestsPerSec,
          p50: r.p50Ms,
          p99: r.p99Ms,
          failed: r.non2xx + r.socketErrors,
          cpu,
        });
        o.log(
          `  ${`${v.label}.${round + 1}`.padEnd(26)} ${Math.round(r.requestsPerSec).toLocaleString("en-US").padStart(8)} req/s` +
            `  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  CPU ${cpu.toFixed(1)} µs/req` +
            `  exports ${exported[v.label]!.requests} (${exported[v.label]!.bytes} B)`,
        );
      }
    }
    const variants: TracingVariant[] = VARIANTS.map((v) => {
      const sorted = [...runs.get(v.label)!].sort((a, b) => a.rps - b.rps);
      const m = sorted[Math.floor((sorted.length - 1) / 2)]!;
      const cpus = runs
        .get(v.label)!
        .map((r) => r.cpu)
        .sort((a, b) => a - b);
      return {
        label: v.label,
        env: v.env,
        requestsPerSec: Math.round(m.rps),
        p50Ms: m.p50,
        p99Ms: m.p99,
        runsRequestsPerSec: sorted.map((r) => Math.round(r.rps)),
        cpuUsPerRequest: Number(cpus[Math.floor((cpus.length - 1) / 2)]!.toFixed(1)),
        failed: m.failed,
      };
    });
    const rps = (label: string) => variants.find((x) => x.label === label)!.requestsPerSec;
    const cpu = (label: string) => variants.find((x) => x.label === label)!.cpuUsPerRequest;
    const ratio = (a: number, b: number) => (b > 0 ? Number((a / b).toFixed(3)) : null);
    return {
      tool,
      durationS: o.durationS,
      connections: o.connections,
      repeats: o.repeats,
      variants,
      onVsOff: ratio(rps("tracing-on-1pct"), rps("tracing-off")),
      allVsOff: ratio(rps("tracing-on-100pct"), rps("tracing-off")),
      cpuOnVsOff: ratio(cpu("tracing-on-1pct"), cpu("tracing-off")),
      cpuAllVsOff: ratio(cpu("tracing-on-100pct"), cpu("tracing-off")),
      exported,
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    await redis.cleanup().catch(() => {});
  }
}

export function printTracingBench(r: TracingBenchResult, log: (s: string) => void): void {
  for (const v of r.variants)
    log(
      `  ${v.label.padEnd(24)} ${v.requestsPerSec.toLocaleString("en-US").padStart(8)} req/s (median of ${v.runsRequestsPerSec.join(", ")}), ${v.cpuUsPerRequest} µs CPU/req`,
    );
  log(`tracing on (1%) / off cache-miss req/s:   ${r.onVsOff ?? "-"}`);
  log(`tracing on (100%) / off cache-miss req/s: ${r.allVsOff ?? "-"}`);
  log(`gateway CPU per request, on (1%) / off:   ${r.cpuOnVsOff ?? "-"}`);
  log(`gateway CPU per request, on (100%) / off: ${r.cpuAllVsOff ?? "-"}`);
}

export function tracingOptionsFromEnv(log: (s: string) => void): TracingBenchOptions {
  return { ...sectionLoadFromEnv(), log };
}

if (require.main === module) {
  const log = (s: string) => process.stdout.write(`${s}\n`);
  const o = tracingOptionsFromEnv(log);
  log(
    `tracing bench: ${o.durationS} s per run (+${o.warmupS} s warm-up), ${o.connections} connections, ${o.repeats} rounds`,
  );
  runTracingBench(o).then(
    (r) => {
      printTracingBench(r, log);
      writeResultsSection("tracing", { date: new Date().toISOString(), ...r });
      process.exit(0);
    },
    (e: unknown) => {
      process.stderr.write(`tracing bench failed: ${e instanceof Error ? e.stack : String(e)}\n`);
      process.exit(1);
    },
  );
}
