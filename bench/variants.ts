/**
 * The body the on/off sections share (request log, tracing, JWT): one stub upstream, the section's gateways,
 * rounds of keyed cache-miss load over every variant in turn (a burst of load from elsewhere hits every
 * variant alike), the serving gateway's CPU per request read around each run, then the median round per
 * variant and the ratios between variants. What differs per section (gateways, what to count around a run,
 * the result's shape) comes in through `VariantsSection`.
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "../test/helpers/ports";
import { type StartedProcess, startProcess } from "../test/helpers/process";
import type { SectionLoadOptions } from "./env";
import { BENCH_NETWORK, BenchRedis, processCpuUs, startGateway } from "./gateway";
import { type Body, type LoadResult, runLoad, which } from "./load";

/** Where one variant's load goes. */
export interface VariantTarget {
  url: string;
  headers?: Record<string, string>;
  /** The gateway process serving it: its CPU time is read around each run. */
  pid: number;
}

export interface VariantRun extends LoadResult {
  /** The serving gateway's CPU time (user + system) over the run per request, µs. */
  cpuUsPerRequest: number;
}

export interface VariantMedian {
  /** The median round by req/s; with an even count, the worse of the middle two. */
  median: VariantRun;
  /** The median round's req/s, rounded. */
  requestsPerSec: number;
  /** Every round's req/s, rounded, worst first. */
  runsRequestsPerSec: number[];
  /** The median of the rounds' CPU per request (taken apart from the req/s median), `cpuDigits` decimals. */
  cpuUsPerRequest: number;
}

/** A ratio between two variants' medians: `of` / `over`, 3 decimals; null when `over` is 0. */
export interface VariantRatio<L extends string> {
  of: L;
  over: L;
  by: "requestsPerSec" | "cpuUsPerRequest";
}

export interface VariantsSetup<L extends string> {
  /** Connected; the bench network (upstream: the stub) is seeded under its prefix. */
  redis: BenchRedis;
  stub: StartedProcess;
  tool: "wrk" | "autocannon";
  /** Registers a teardown step; steps run last first, whether the section completes or fails. */
  defer(stop: () => Promise<unknown>): void;
  /** One key, and one gateway per variant on the same prefix with the variant's environment. */
  gatewayPerVariant(env: (label: L) => NodeJS.ProcessEnv): Promise<Record<L, VariantTarget>>;
}

export interface VariantsSection<L extends string, R extends string, F> {
  /** The variants, in the order a round runs them (unless `order`); a run's label is `<label>.<round>`. */
  labels: readonly L[];
  load: SectionLoadOptions & { stubImpl?: "uws" | "node"; outDir?: string };
  log: (s: string) => void;
  /** Starts the section's gateways (and whatever else it needs) and says where each variant's load goes. */
  setup(ctx: VariantsSetup<L>): Promise<Record<L, VariantTarget>>;
  /** The variants' order in a round (e.g. flipped every round). */
  order?(round: number): readonly L[];
  /** Between the warm-up and the measured run (e.g. wait for the warm-up's last flush, reset a count). */
  beforeRun?(label: L): Promise<void>;
  /** After the measured run (e.g. count what it wrote); returns text appended to the run's line. */
  afterRun?(label: L, run: VariantRun): Promise<string> | string;
  /** After the last round, before teardown (e.g. read the gateway's metrics). */
  afterRounds?(): Promise<F>;
  /** Width the run label is padded to in the run's line (26). */
  labelWidth?: number;
  /** Append a run's failed requests to its line, and warn when more than 1% failed. */
  flagFailures?: boolean;
  /** Decimals of the CPU per request median (1). */
  cpuDigits?: number;
  /** With an even count of rounds, which of the middle two CPU figures is the median ("higher": worse). */
  cpuEvenMedian?: "higher" | "lower";
  ratios?: Record<R, VariantRatio<L>>;
}

export interface VariantsOutcome<L extends string, R extends string, F> {
  tool: "wrk" | "autocannon";
  variants: Record<L, VariantMedian>;
  ratios: Record<R, number | null>;
  /** What `afterRounds` returned. */
  afterRounds: F | undefined;
}

function ratio(a: number, b: number): number | null {
  return b > 0 ? Number((a / b).toFixed(3)) : null;
}

/** A variant as the request-log and tracing sections report it in bench/results.json. */
export interface VariantRow {
  label: string;
  env: Record<string, string>;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Every round's req/s, worst first (the row is the median). */
  runsRequestsPerSec: number[];
  failed: number;
}

/** The same with the gateway's CPU (user + system) per request, median of the rounds. */
export interface VariantRowWithCpu extends VariantRow {
  cpuUsPerRequest: number;
}

/** `label`'s row from its medians. */
export function variantRow(label: string, env: Record<string, string>, v: VariantMedian): VariantRow {
  const m = v.median;
  return {
    label,
    env,
    requestsPerSec: v.requestsPerSec,
    p50Ms: m.p50Ms,
    p99Ms: m.p99Ms,
    runsRequestsPerSec: v.runsRequestsPerSec,
    failed: m.non2xx + m.socketErrors,
  };
}

/** A variant's summary row: its median req/s and every round's. */
export function medianRow(v: {
  label: string;
  requestsPerSec: number;
  runsRequestsPerSec: number[];
}): string {
  return `  ${v.label.padEnd(24)} ${v.requestsPerSec.toLocaleString("en-US").padStart(8)} req/s (median of ${v.runsRequestsPerSec.join(", ")})`;
}

export async function runVariantsSection<L extends string, R extends string = never, F = undefined>(
  s: VariantsSection<L, R, F>,
): Promise<VariantsOutcome<L, R, F>> {
  const o = s.load;
  const tool: "wrk" | "autocannon" = which("wrk") ? "wrk" : "autocannon";
  const outDir = o.outDir ?? join(resolve(__dirname, "../../bench"), "out");
  mkdirSync(outDir, { recursive: true });
  const stops: (() => Promise<unknown>)[] = [];
  const redis = new BenchRedis(o.redisUrl);
  try {
    const stubPort = await freePort();
    const stub = await startProcess(
      process.execPath,
      [join(__dirname, "stub-upstream.js"), "--port", String(stubPort), "--impl", o.stubImpl ?? "uws"],
      { readyLine: /listening on \d+/ },
    );
    stops.push(() => stub.stop());
    await redis.connect();
    await redis.seedNetwork(`http://127.0.0.1:${stubPort}`);
    const targets = await s.setup({
      redis,
      stub,
      tool,
      defer: (stop) => {
        stops.push(stop);
      },
      gatewayPerVariant: async (env) => {
        const [key] = await redis.seedKeys(1);
        const path = `/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key!)}`;
        const out = {} as Record<L, VariantTarget>;
        for (const label of s.labels) {
          const gateway = await startGateway({ redisUrl: o.redisUrl, prefix: redis.prefix, env: env(label) });
          stops.push(() => gateway.proc.stop());
          out[label] = { url: `${gateway.baseUrl}${path}`, pid: gateway.proc.pid };
        }
        return out;
      },
    });

    const body: Body = { kind: "unique-eth-call" };
    const runs = new Map<L, VariantRun[]>(s.labels.map((l) => [l, []]));
    for (let round = 0; round < o.repeats; round++) {
      for (const v of s.order?.(round) ?? s.labels) {
        const t = targets[v];
        const base = {
          url: t.url,
          body,
          connections: o.connections,
          threads: o.threads,
          outDir,
          headers: t.headers,
        };
        const label = `${v}.${round + 1}`;
        if (o.warmupS > 0) await runLoad({ ...base, durationS: o.warmupS, label: `${label}.warmup` }, tool);
        await s.beforeRun?.(v);
        const cpu0 = processCpuUs(t.pid);
        const load = await runLoad({ ...base, durationS: o.durationS, label }, tool);
        const run: VariantRun = {
          ...load,
          cpuUsPerRequest: (processCpuUs(t.pid) - cpu0) / Math.max(1, load.requests),
        };
        runs.get(v)!.push(run);
        const note = (await s.afterRun?.(v, run)) ?? "";
        const bad = run.non2xx + run.socketErrors;
        s.log(
          `  ${label.padEnd(s.labelWidth ?? 26)} ${Math.round(run.requestsPerSec).toLocaleString("en-US").padStart(8)} req/s` +
            `  p50 ${run.p50Ms.toFixed(2)} ms  p99 ${run.p99Ms.toFixed(2)} ms${note}` +
            (s.flagFailures && bad > 0 ? `  (${run.non2xx} non-2xx, ${run.socketErrors} socket errors)` : ""),
        );
        if (s.flagFailures && bad > run.requests * 0.01)
          s.log(`  WARNING: ${label} failed ${bad} of ${run.requests} requests`);
      }
    }
    const afterRounds = await s.afterRounds?.();

    const variants = {} as Record<L, VariantMedian>;
    for (const l of s.labels)
      variants[l] = medianOf(runs.get(l)!, s.cpuDigits ?? 1, s.cpuEvenMedian ?? "higher");
    const ratios = {} as Record<R, number | null>;
    for (const [name, r] of Object.entries(s.ratios ?? {}) as [R, VariantRatio<L>][])
      ratios[name] = ratio(variants[r.of][r.by], variants[r.over][r.by]);
    return { tool, variants, ratios, afterRounds };
  } finally {
    while (stops.length > 0) await stops.pop()!().catch(() => undefined);
    await redis.cleanup().catch(() => undefined);
  }
}

function medianOf(runs: VariantRun[], cpuDigits: number, cpuEven: "higher" | "lower"): VariantMedian {
  const sorted = [...runs].sort((a, b) => a.requestsPerSec - b.requestsPerSec);
  const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
  const cpus = runs.map((r) => r.cpuUsPerRequest).sort((a, b) => (cpuEven === "higher" ? b - a : a - b));
  return {
    median,
    requestsPerSec: Math.round(median.requestsPerSec),
    runsRequestsPerSec: sorted.map((r) => Math.round(r.requestsPerSec)),
    cpuUsPerRequest: Number(cpus[Math.floor((cpus.length - 1) / 2)]!.toFixed(cpuDigits)),
  };
}
