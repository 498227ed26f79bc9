/**
 * Thread scaling of the data plane: the same gateway with DATA_PLANE_THREADS=1 and =2, cache-hit and
 * cache-miss, measured in one run with `taskset` pinning. Called by `npm run bench` (bench/run.ts, section
 * "threads"), or on its own: `npm run build && node dist/bench/threads.js`, which also writes its section
 * into bench/results.json (`threads`), leaving the rest of that file as it was.
 *
 * Layouts (CPU numbers from this machine's; N = available CPUs):
 * - `1t`: 1 thread pinned to CPU 1; wrk and the stub upstream pinned to CPU 0.
 * - `2t`: 2 threads. With N >= 3 on CPUs 1-2, wrk and stub on CPU 0: the gateway has twice the CPU of `1t`
 *   and the load generator keeps its own. With N = 2 there is no third CPU: the gateway gets CPUs 0-1 and
 *   wrk and the stub run unpinned, sharing both CPUs with it.
 * - `1t-any`: 1 thread, everything unpinned: against `2t` on 2 CPUs, the same scheduling freedom with one
 *   thread fewer.
 * - `2t-1cpu`: 2 threads both pinned to CPU 1, wrk and stub on CPU 0: the same CPU as `1t`, so the
 *   difference is what threads cost (or save) by themselves, with no CPU added.
 *
 * Every layout's stub and gateway run at once (idle but for the one under load); the runs go round-robin
 * so that other work on the machine hits every layout alike.
 *
 * Environment: BENCH_DURATION_S (10), BENCH_WARMUP_S (2), BENCH_CONNECTIONS (64), BENCH_THREADS (wrk
 * threads), BENCH_REPEATS (1; round-robin, median by req/s kept), BENCH_RESULTS, REDIS_URL.
 */
import { mkdirSync, readFileSync } from "node:fs";
import os from "node:os";
import { join, resolve } from "node:path";
import { freePort } from "../test/helpers/ports";
import { type StartedProcess, startProcess } from "../test/helpers/process";
import { CHAIN_ID_BODY } from "./bodies";
import { BENCH_NETWORK, BenchRedis, type Gateway, startGateway } from "./gateway";
import { type Body, type LoadResult, runLoad, which } from "./load";
import { RESULTS_FILE, writeResultsSection } from "./results-file";
import { runStandalone } from "./standalone";

export interface ThreadsBenchOptions {
  durationS: number;
  warmupS: number;
  connections: number;
  /** wrk threads */
  wrkThreads: number;
  repeats: number;
  redisUrl: string;
  outDir: string;
  log?: (s: string) => void;
}

interface Layout {
  label: string;
  threads: number;
  /** `taskset -c` list for the gateway, the load generator and the stub; undefined = unpinned. */
  gatewayCpus?: string;
  loadCpus?: string;
  what: string;
}

export interface ThreadsBenchRow {
  layout: string;
  threads: number;
  gatewayCpus: string | null;
  loadCpus: string | null;
  scenario: "cache-hit" | "cache-miss";
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: number;
  runsRequestsPerSec: number[];
  /**
   * CPU the gateway process used during that run (all its threads, V8's included), in cores: below the
   * CPUs it may use = it was not the bottleneck (the load generator, the stub, or CPU taken by other work).
   */
  gatewayCpuCores: number;
  /** Gateway CPU per request (µs): what a request costs whatever limited the rate. */
  gatewayCpuMicrosPerRequest: number;
}

export interface ThreadsBenchResult {
  date: string;
  cpus: number;
  pinned: boolean;
  /** 1-minute load average before the section started (other work on the machine skews every figure). */
  loadAverage1m: number;
  layouts: {
    label: string;
    threads: number;
    gatewayCpus: string | null;
    loadCpus: string | null;
    what: string;
  }[];
  rows: ThreadsBenchRow[];
  ratios: {
    cacheHit2vs1: number | null;
    cacheMiss2vs1: number | null;
    cacheHit2on1CpuVs1: number | null;
    cacheMiss2on1CpuVs1: number | null;
    /** 2t against 1t-any: both free to run anywhere (on 2 CPUs, the fairer comparison on a shared machine). */
    cacheHit2vs1Unpinned: number | null;
    cacheMiss2vs1Unpinned: number | null;
  };
  /** 1-minute load average after the section (before: loadAverage1m). */
  loadAverage1mAfter: number;
  note: string;
}

function layouts(cpus: number, pinned: boolean): Layout[] {
  if (!pinned || cpus < 2)
    return [
      { label: "1t", threads: 1, what: "1 thread, unpinned (taskset missing or 1 CPU)" },
      { label: "2t", threads: 2, what: "2 threads, unpinned (taskset missing or 1 CPU)" },
    ];
  return [
    {
      label: "1t",
      threads: 1,
      gatewayCpus: "1",
      loadCpus: "0",
      what: "1 thread on CPU 1; wrk and stub on CPU 0",
    },
    {
      label: "1t-any",
      threads: 1,
      what: "1 thread, everything unpinned (the scheduling freedom of 2t on 2 CPUs, with one thread)",
    },
    cpus >= 3
      ? {
          label: "2t",
          threads: 2,
          gatewayCpus: "1,2",
          loadCpus: "0",
          what: "2 threads on CPUs 1-2; wrk and stub on CPU 0",
        }
      : {
          label: "2t",
          threads: 2,
          gatewayCpus: "0,1",
          what: "2 threads on CPUs 0-1; wrk and stub unpinned, sharing both CPUs with the gateway",
        },
    {
      label: "2t-1cpu",
      threads: 2,
      gatewayCpus: "1",
      loadCpus: "0",
      what: "2 threads both on CPU 1 (the CPU of 1t); wrk and stub on CPU 0",
    },
  ];
}

/** What a machine with `cpus` CPUs can show, in words, for the report. */
function honestNote(cpus: number, pinned: boolean): string {
  if (!pinned)
    return "taskset not available: every process ran unpinned; the figures mix gateway and load-generator CPU.";
  if (cpus >= 3)
    return (
      "1t and 2t give the gateway 1 and 2 CPUs of its own while wrk and the stub keep CPU 0: 2t/1t is the thread " +
      "scaling, as long as CPU 0 is not the bottleneck (one wrk thread and the stub on one CPU saturate first " +
      "on fast paths: a ratio below 2 may be the load generator's limit, not the gateway's)."
    );
  return (
    "A 2-CPU machine cannot show thread scaling cleanly: once the gateway has two CPUs, none is left for the " +
    "load generator. 1t pins the gateway to CPU 1 with wrk and the stub on CPU 0; 2t lets the gateway use both " +
    "CPUs and wrk and the stub run anywhere, so 2t/1t mixes what the second thread adds with what leaving the " +
    "pinning changes. 1t-any (one thread, everything unpinned) against 2t compares the two under the same " +
    "scheduling freedom; 2t-1cpu against 1t shows two threads on the one CPU of 1t. On a machine shared with " +
    "other work (loadAverage1m), a pinned process shares its CPU with whatever else runs there, and the " +
    "scheduler divides a contended CPU per thread, so more threads get a larger share of it: that inflates 2t " +
    "and 2t-1cpu against 1t. What it cannot show at all: throughput with cores to spare beyond the load " +
    "generator's (on N >= 3 CPUs, 2t runs on CPUs 1-2 with wrk and the stub on CPU 0). gatewayCpuCores says " +
    "whether the gateway was the bottleneck of a row: well below the CPUs it may use, the limit was elsewhere " +
    "(wrk, the stub, or CPU taken by other work)."
  );
}

/** CPU seconds a process has used so far, all threads (utime + stime from /proc; USER_HZ = 100 on Linux). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
};

export async function runThreadsBench(o: ThreadsBenchOptions): Promise<ThreadsBenchResult> {
  const log = o.log ?? ((s: string) => process.stdout.write(`${s}\n`));
  if (which("wrk") === null) throw new Error("the threads bench needs wrk (apt-get install wrk)");
  mkdirSync(o.outDir, { recursive: true });
  const cpus = os.availableParallelism();
  const pinned = which("taskset") !== null;
  const plan = layouts(cpus, pinned);
  const loadAverage1m = Number(os.loadavg()[0]!.toFixed(2));
  log(
    `threads: ${cpus} CPUs, ${pinned ? "taskset pinning" : "no taskset: unpinned"}, load average ${loadAverage1m}`,
  );

  const stops: Array<() => Promise<unknown>> = [];
  try {
    // Every layout's stub and gateway first, then the runs round-robin (layout by layout, round by round):
    // other work on this machine comes and goes, and should hit every layout alike. The gateways not under
    // load sit idle meanwhile (health checks, limiter heartbeats).
    const targets: { layout: Layout; url: string; pid: number }[] = [];
    for (const layout of plan) {
      // A stub per layout, pinned with the load generator: its CPU must not come from the gateway's.
      const stubPort = await freePort();
      const stubArgs = [join(__dirname, "stub-upstream.js"), "--port", String(stubPort), "--impl", "uws"];
      const stub: StartedProcess = await startProcess(
        layout.loadCpus === undefined ? process.execPath : "taskset",
        layout.loadCpus === undefined ? stubArgs : ["-c", layout.loadCpus, process.execPath, ...stubArgs],
        { readyLine: /listening on \d+/ },
      );
      stops.push(() => stub.stop());
      // A prefix per layout: each gateway reads its own network (its own stub).
      const redis = new BenchRedis(o.redisUrl);
      await redis.connect();
      stops.push(() => redis.cleanup());
      await redis.seedNetwork(`http://127.0.0.1:${stubPort}`);
      const [key] = await redis.seedKeys(1, `ws-threads-${layout.label}`);
      const gw: Gateway = await startGateway({
        redisUrl: o.redisUrl,
        prefix: redis.prefix,
        env: { DATA_PLANE_THREADS: String(layout.threads) },
        cpus: layout.gatewayCpus,
      });
      stops.push(() => gw.proc.stop(30_000));
      targets.push({
        layout,
        url: `${gw.baseUrl}/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key!)}`,
        pid: gw.proc.pid,
      });
      log(`  ${layout.label}: ${layout.what} (gateway pid ${gw.proc.pid})`);
    }
    const scenarios: [ThreadsBenchRow["scenario"], Body][] = [
      ["cache-hit", { kind: "static", body: CHAIN_ID_BODY }],
      ["cache-miss", { kind: "unique-eth-call" }],
    ];
    const runs = new Map<string, (LoadResult & { cpuCores: number })[]>();
    for (let round = 0; round < o.repeats; round++) {
      for (const { layout, url, pid } of targets) {
        for (const [scenario, body] of scenarios) {
          const label = `threads-${layout.label}-${scenario}${o.repeats > 1 ? `.${round + 1}` : ""}`;
          const base = {
            url,
            body,
            connections: o.connections,
            threads: o.wrkThreads,
            outDir: o.outDir,
            cpus: layout.loadCpus,
          };
          if (o.warmupS > 0)
            await runLoad({ ...base, durationS: o.warmupS, label: `${label}.warmup` }, "wrk");
          const cpu0 = cpuSeconds(pid);
          const t0 = performance.now();
          const load = await runLoad({ ...base, durationS: o.durationS, label }, "wrk");
          const r = { ...load, cpuCores: (cpuSeconds(pid) - cpu0) / ((performance.now() - t0) / 1000) };
          const k = `${layout.label}\u0000${scenario}`;
          runs.set(k, [...(runs.get(k) ?? []), r]);
          log(
            `    ${label.padEnd(30)} ${Math.round(r.requestsPerSec).toLocaleString("en-US").padStart(9)} req/s  ` +
              `p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  gateway CPU ${r.cpuCores.toFixed(2)}` +
              (r.non2xx + r.socketErrors > 0
                ? `  (${r.non2xx} non-2xx, ${r.socketErrors} socket errors)`
                : ""),
          );
        }
      }
    }
    const rows: ThreadsBenchRow[] = [];
    for (const { layout } of targets) {
      for (const [scenario] of scenarios) {
        const all = runs.get(`${layout.label}\u0000${scenario}`)!;
        const m = median(all.map((r) => r.requestsPerSec));
        const r = all.find((x) => x.requestsPerSec === m)!;
        rows.push({
          layout: layout.label,
          threads: layout.threads,
          gatewayCpus: layout.gatewayCpus ?? null,
          loadCpus: layout.loadCpus ?? null,
          scenario,
          requestsPerSec: Math.round(r.requestsPerSec),
          p50Ms: r.p50Ms,
          p99Ms: r.p99Ms,
          non2xx: r.non2xx,
          socketErrors: r.socketErrors,
          runsRequestsPerSec: all.map((x) => Math.round(x.requestsPerSec)),
          gatewayCpuCores: Number(r.cpuCores.toFixed(2)),
          gatewayCpuMicrosPerRequest: Number(((r.cpuCores / r.requestsPerSec) * 1e6).toFixed(1)),
        });
      }
    }
    const rps = (layout: string, scenario: string) =>
      rows.find((r) => r.layout === layout && r.scenario === scenario)?.requestsPerSec ?? null;
    const ratio = (a: number | null, b: number | null) =>
      a !== null && b !== null && b > 0 ? Number((a / b).toFixed(3)) : null;
    const result: ThreadsBenchResult = {
      date: new Date().toISOString(),
      cpus,
      pinned,
      loadAverage1m,
      layouts: plan.map((l) => ({
        label: l.label,
        threads: l.threads,
        gatewayCpus: l.gatewayCpus ?? null,
        loadCpus: l.loadCpus ?? null,
        what: l.what,
      })),
      rows,
      ratios: {
        cacheHit2vs1: ratio(rps("2t", "cache-hit"), rps("1t", "cache-hit")),
        cacheMiss2vs1: ratio(rps("2t", "cache-miss"), rps("1t", "cache-miss")),
        cacheHit2on1CpuVs1: ratio(rps("2t-1cpu", "cache-hit"), rps("1t", "cache-hit")),
        cacheMiss2on1CpuVs1: ratio(rps("2t-1cpu", "cache-miss"), rps("1t", "cache-miss")),
        cacheHit2vs1Unpinned: ratio(rps("2t", "cache-hit"), rps("1t-any", "cache-hit")),
        cacheMiss2vs1Unpinned: ratio(rps("2t", "cache-miss"), rps("1t-any", "cache-miss")),
      },
      loadAverage1mAfter: Number(os.loadavg()[0]!.toFixed(2)),
      note: honestNote(cpus, pinned),
    };
    printThreadsBench(result, log);
    return result;
  } finally {
    while (stops.length > 0) await stops.pop()!().catch(() => undefined);
  }
}

export function printThreadsBench(r: ThreadsBenchResult, log: (s: string) => void): void {
  log(
    "\n| layout | threads | gateway CPUs | wrk+stub CPUs | scenario | req/s | p50 ms | p99 ms | gateway CPU used | CPU µs/req |",
  );
  log("|---|---:|---|---|---|---:|---:|---:|---:|---:|");
  for (const row of r.rows)
    log(
      `| ${row.layout} | ${row.threads} | ${row.gatewayCpus ?? "any"} | ${row.loadCpus ?? "any"} | ${row.scenario} | ` +
        `${row.requestsPerSec.toLocaleString("en-US")} | ${row.p50Ms.toFixed(2)} | ${row.p99Ms.toFixed(2)} | ` +
        `${row.gatewayCpuCores.toFixed(2)} | ${row.gatewayCpuMicrosPerRequest.toFixed(1)} |`,
    );
  const f = (v: number | null) => (v === null ? "-" : String(v));
  log(
    `\n2 threads / 1 thread req/s: cache-hit ${f(r.ratios.cacheHit2vs1)}, cache-miss ${f(r.ratios.cacheMiss2vs1)}`,
  );
  log(
    `2 threads on 1 CPU / 1 thread: cache-hit ${f(r.ratios.cacheHit2on1CpuVs1)}, cache-miss ${f(r.ratios.cacheMiss2on1CpuVs1)}`,
  );
  log(
    `2 threads / 1 thread, both unpinned: cache-hit ${f(r.ratios.cacheHit2vs1Unpinned)}, cache-miss ${f(r.ratios.cacheMiss2vs1Unpinned)}`,
  );
  log(`load average (1 min) before ${r.loadAverage1m}, after ${r.loadAverage1mAfter}`);
  log(`note: ${r.note}`);
}

/** Standalone: run the section and put it into the results file under `threads`. */
if (require.main === module) {
  const envInt = (name: string, def: number) => {
    const v = process.env[name];
    return v === undefined || v === "" ? def : Math.max(0, Number.parseInt(v, 10));
  };
  runStandalone("threads", async () => {
    const threads = await runThreadsBench({
      durationS: Math.max(1, envInt("BENCH_DURATION_S", 10)),
      warmupS: envInt("BENCH_WARMUP_S", 2),
      connections: Math.max(1, envInt("BENCH_CONNECTIONS", 64)),
      wrkThreads: Math.max(1, envInt("BENCH_THREADS", os.cpus().length <= 2 ? 1 : 2)),
      repeats: Math.max(1, envInt("BENCH_REPEATS", 1)),
      redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
      outDir: join(resolve(__dirname, "../../bench"), "out"),
    });
    writeResultsSection("threads", threads);
    process.stdout.write(`\nwrote the threads section of ${RESULTS_FILE}\n`);
  });
}
