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
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type SectionLoadOptions, sectionLoadFromEnv } from "./env";
import { writeResultsSection } from "./results-file";
import { runStandalone } from "./standalone";
import { medianRow, runVariantsSection, type VariantRowWithCpu, variantRow } from "./variants";

export interface TracingBenchOptions extends SectionLoadOptions {
  log: (s: string) => void;
}

export type TracingVariant = VariantRowWithCpu;

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
type Label = (typeof LABELS)[number];

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
  let sink!: Awaited<ReturnType<typeof startSink>>;
  let env!: Record<Label, Record<string, string>>;
  let before = { requests: 0, bytes: 0 };
  const exported: Record<string, { requests: number; bytes: number }> = {};
  const r = await runVariantsSection({
    labels: LABELS,
    load: o,
    log: o.log,
    setup: async (ctx) => {
      sink = await startSink();
      ctx.defer(async () => sink.close());
      env = {
        "tracing-off": {},
        "tracing-on-1pct": otel(sink.url, "0.01"),
        "tracing-on-100pct": otel(sink.url, "1"),
      };
      // The bench's own OTEL_* never leak into the gateways.
      const clean: NodeJS.ProcessEnv = {};
      for (const k of Object.keys(process.env)) if (k.startsWith("OTEL_")) clean[k] = undefined;
      return ctx.gatewayPerVariant((label) => ({ ...clean, ...env[label] }));
    },
    beforeRun: async () => {
      // The warm-up's last export (every OTEL_BSP_SCHEDULE_DELAY, 5 s by default) lands before the count.
      await new Promise((res) => setTimeout(res, 5_500));
      before = { ...sink.counts };
    },
    afterRun: async (label, run) => {
      await new Promise((res) => setTimeout(res, 5_500));
      const e = { requests: sink.counts.requests - before.requests, bytes: sink.counts.bytes - before.bytes };
      exported[label] = e;
      return `  CPU ${run.cpuUsPerRequest.toFixed(1)} µs/req  exports ${e.requests} (${e.bytes} B)`;
    },
    cpuDigits: 1,
    // With an even count of rounds this section has always kept the lower of the middle two CPU figures.
    cpuEvenMedian: "lower",
    ratios: {
      onVsOff: { of: "tracing-on-1pct", over: "tracing-off", by: "requestsPerSec" },
      allVsOff: { of: "tracing-on-100pct", over: "tracing-off", by: "requestsPerSec" },
      cpuOnVsOff: { of: "tracing-on-1pct", over: "tracing-off", by: "cpuUsPerRequest" },
      cpuAllVsOff: { of: "tracing-on-100pct", over: "tracing-off", by: "cpuUsPerRequest" },
    },
  });
  return {
    tool: r.tool,
    durationS: o.durationS,
    connections: o.connections,
    repeats: o.repeats,
    variants: LABELS.map((label) => ({
      ...variantRow(label, env[label], r.variants[label]),
      cpuUsPerRequest: r.variants[label].cpuUsPerRequest,
    })),
    ...r.ratios,
    exported,
  };
}

export function printTracingBench(r: TracingBenchResult, log: (s: string) => void): void {
  for (const v of r.variants) log(`${medianRow(v)}, ${v.cpuUsPerRequest} µs CPU/req`);
  log(`tracing on (1%) / off cache-miss req/s:   ${r.onVsOff ?? "-"}`);
  log(`tracing on (100%) / off cache-miss req/s: ${r.allVsOff ?? "-"}`);
  log(`gateway CPU per request, on (1%) / off:   ${r.cpuOnVsOff ?? "-"}`);
  log(`gateway CPU per request, on (100%) / off: ${r.cpuAllVsOff ?? "-"}`);
}

export function tracingOptionsFromEnv(log: (s: string) => void): TracingBenchOptions {
  return { ...sectionLoadFromEnv(), log };
}

if (require.main === module) {
  runStandalone("tracing", async () => {
    const log = (s: string) => process.stdout.write(`${s}\n`);
    const o = tracingOptionsFromEnv(log);
    log(
      `tracing bench: ${o.durationS} s per run (+${o.warmupS} s warm-up), ${o.connections} connections, ${o.repeats} rounds`,
    );
    const r = await runTracingBench(o);
    printTracingBench(r, log);
    writeResultsSection("tracing", { date: new Date().toISOString(), ...r });
  });
}
