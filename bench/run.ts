/**
 * `npm run bench`: throughput, latency and memory of the gateway against a plain nginx proxy_pass, both in
 * front of the same instant stub upstream. Not a timed test; results go to bench/results.json (committed)
 * and raw tool output to bench/out/ (ignored).
 *
 * Every process (stub, nginx, gateway) runs separately on a free port and is stopped by PID. Load comes
 * from wrk (Debian package `wrk`) or, when missing, autocannon (1 ms latency resolution). nginx comes from
 * the Debian package `nginx`; without it that row is skipped. wrk2 is not packaged in Debian, so fixed-rate
 * latency uses wrk with calibrated per-connection pauses (or, without wrk, this repo's open-loop client).
 *
 * Environment: BENCH_DURATION_S (10), BENCH_WARMUP_S (2), BENCH_CONNECTIONS (64), BENCH_THREADS (wrk threads:
 * 1 on <= 2 CPUs, else 2), BENCH_REPEATS (1; runs per scenario, round-robin, median kept), BENCH_RSS_KEYS
 * (100000; 0 skips), BENCH_STUB_IMPL (uws | node), BENCH_RESULTS (bench/results.json), REDIS_URL,
 * BENCH_FINALITY_BLOCKS (2000; 0 skips the finality section), BENCH_FINALITY_CONNECTIONS (32),
 * BENCH_FINALITY_DURATION_S (BENCH_DURATION_S),
 * BENCH_WS_CONNECTIONS (10000; 0 skips), BENCH_LOGS_SPLIT (0 skips; BENCH_LOGS_* in bench/logs-split.ts),
 * BENCH_HEDGING (0 skips the hedged-reads section, bench/hedging.ts, which has its own BENCH_HEDGING_* settings),
 * BENCH_JWT_REPEATS (3; 0 skips the JWT section),
 * BENCH_INDEXER (0 skips the indexer section, bench/indexer.ts, which has its own BENCH_INDEXER_* settings),
 * BENCH_THREAD_SCALING (1; 0 skips the DATA_PLANE_THREADS 1 vs 2 section, bench/threads.ts),
 * BENCH_REQUEST_LOG (0 skips the request-log cost section, bench/request-log.ts),
 * BENCH_TRACING (0 skips the tracing cost section, bench/tracing.ts).
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join, resolve } from "node:path";
import { Pool } from "undici";
import { freePort } from "../test/helpers/ports";
import { type StartedProcess, startProcess } from "../test/helpers/process";
import { BATCH_100_BODY, CHAIN_ID_BODY } from "./bodies";
import { type ComputeUnitsBenchResult, runComputeUnitsBench } from "./compute-units";
import { type FinalityBenchResult, runFinalityBench } from "./finality";
import {
  BENCH_GATEWAY_CHANGES,
  BENCH_NETWORK,
  BenchRedis,
  type Gateway,
  processMemory,
  startGateway,
} from "./gateway";
import {
  type HedgingBenchResult,
  hedgingOptionsFromEnv,
  printHedgingBench,
  runHedgingBench,
} from "./hedging";
import { type IndexerBenchResult, runIndexerBench } from "./indexer";
import { type JwtBenchResult, runJwtBench } from "./jwt";
import { type Body, type LoadResult, runFixedRate, runLoad, runWrkAtRate, which } from "./load";
import { type LogsSplitBenchResult, printLogsSplitBench, runLogsSplitBench } from "./logs-split";
import { type Nginx, startNginx } from "./nginx";
import {
  printRequestLogBench,
  type RequestLogBenchResult,
  requestLogOptionsFromEnv,
  runRequestLogBench,
} from "./request-log";
import { formatWithBiome } from "./results-file";
import { runThreadsBench, type ThreadsBenchResult } from "./threads";
import {
  printTracingBench,
  runTracingBench,
  type TracingBenchResult,
  tracingOptionsFromEnv,
} from "./tracing";
import { printWsBench, runWsBench, type WsBenchResult } from "./ws";

const envInt = (name: string, def: number) => {
  const v = process.env[name];
  if (v === undefined || v === "") return def;
  const n = Number.parseInt(v, 10);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name}: expected a non-negative integer, got ${v}`);
  return n;
};

/**
 * The median of `runs` by `score` (higher = better), sorted worst first; with an even count, the worse of
 * the middle two, so repeats never flatter a figure.
 */
function medianRun<T>(runs: readonly T[], score: (r: T) => number): { median: T; sorted: T[] } {
  const sorted = [...runs].sort((a, b) => score(a) - score(b));
  return { median: sorted[Math.floor((sorted.length - 1) / 2)]!, sorted };
}

const cfg = {
  durationS: Math.max(1, envInt("BENCH_DURATION_S", 10)),
  warmupS: envInt("BENCH_WARMUP_S", 2),
  connections: Math.max(1, envInt("BENCH_CONNECTIONS", 64)),
  threads: Math.max(1, envInt("BENCH_THREADS", os.cpus().length <= 2 ? 1 : 2)),
  repeats: Math.max(1, envInt("BENCH_REPEATS", 1)),
  rssKeys: envInt("BENCH_RSS_KEYS", 100_000),
  stubImpl: (process.env.BENCH_STUB_IMPL ?? "uws") as "uws" | "node",
  redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
};

const BENCH_DIR = resolve(__dirname, "../../bench");
const OUT_DIR = join(BENCH_DIR, "out");
const RESULTS = process.env.BENCH_RESULTS || join(BENCH_DIR, "results.json");

const log = (s: string) => process.stdout.write(`${s}\n`);

/** Latency at a steady rate, from paced wrk or the open-loop client. */
interface FixedRow {
  method: "wrk-paced" | "open-loop";
  targetRate: number;
  achievedRate: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  p999Ms: number | null;
  failed: number;
  /** Every run's p99 (ms) when BENCH_REPEATS > 1; the row is the median run by p99. */
  runsP99Ms?: number[];
}

type Row = LoadResult & {
  label: string;
  target: string;
  elementsPerSec?: number;
  runsRequestsPerSec?: number[];
};

function versionOf(cmd: string, args: string[]): string | null {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  if (r.error) return null;
  return `${r.stdout ?? ""}${r.stderr ?? ""}`.split("\n")[0]!.trim() || null;
}

async function post(url: string, body: string): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  const text = await res.text();
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {
    // keep the text
  }
  return { status: res.status, json };
}

/** One request through the target before loading it: fails loudly when the setup is wrong. */
async function expectChainId(label: string, url: string): Promise<void> {
  const r = await post(url, CHAIN_ID_BODY);
  const result = (r.json as { result?: unknown }).result;
  if (r.status !== 200 || result !== "0x1")
    throw new Error(`${label}: sanity request failed: HTTP ${r.status} ${JSON.stringify(r.json)}`);
}

const fmt = (n: number | null | undefined, digits = 2) =>
  n === null || n === undefined || Number.isNaN(n) ? "-" : n.toFixed(digits);
const fmtInt = (n: number | null | undefined) =>
  n === null || n === undefined || Number.isNaN(n) ? "-" : Math.round(n).toLocaleString("en-US");

async function main(): Promise<void> {
  mkdirSync(OUT_DIR, { recursive: true });
  const tool: "wrk" | "autocannon" = which("wrk") ? "wrk" : "autocannon";
  const nginxBin = which("nginx");
  log(
    `bench: ${cfg.durationS}s per run (+${cfg.warmupS}s warm-up), ${cfg.connections} connections, load by ${tool}` +
      (tool === "wrk" ? ` (${cfg.threads} thread${cfg.threads > 1 ? "s" : ""})` : " (wrk not installed)"),
  );

  const stops: Array<() => Promise<unknown>> = [];
  const stopAll = async () => {
    while (stops.length > 0) await stops.pop()!().catch(() => undefined);
  };
  process.once("SIGINT", () => void stopAll().then(() => process.exit(130)));

  const rows: Row[] = [];
  let fixed: {
    rate: number;
    direct: FixedRow;
    nginx: FixedRow | null;
    gateway: FixedRow;
  } | null = null;
  let rss: {
    keys: number;
    idleMiB: number;
    withKeysMiB: number;
    peakMiB: number;
    warmFailures: number;
  } | null = null;
  const skipped: string[] = [];

  /** One scenario run (after its warm-up). */
  const measureOnce = async (
    label: string,
    target: string,
    url: string,
    body: Body,
    round: number,
  ): Promise<Row> => {
    const base = { url, body, connections: cfg.connections, threads: cfg.threads, outDir: OUT_DIR };
    const suffix = cfg.repeats > 1 ? `.${round + 1}` : "";
    if (cfg.warmupS > 0)
      await runLoad({ ...base, durationS: cfg.warmupS, label: `${label}${suffix}.warmup` }, tool);
    const r = await runLoad({ ...base, durationS: cfg.durationS, label: `${label}${suffix}` }, tool);
    const bad = r.non2xx + r.socketErrors;
    log(
      `  ${`${label}${suffix}`.padEnd(22)} ${fmtInt(r.requestsPerSec).padStart(9)} req/s  p50 ${fmt(r.p50Ms)} ms  p99 ${fmt(r.p99Ms)} ms` +
        (bad > 0 ? `  (${r.non2xx} non-2xx, ${r.socketErrors} socket errors)` : ""),
    );
    // A row whose answers are mostly refusals measures the refusal path, not forwarding: say so loudly.
    if (bad > r.requests * 0.01)
      log(`  WARNING: ${label} failed ${bad} of ${r.requests} requests; its figures are not comparable`);
    return { ...r, label, target };
  };

  /**
   * Runs every scenario `BENCH_REPEATS` times, round-robin (so a burst of load from something else on the
   * machine hits all targets alike), and keeps each scenario's median run by requests/s.
   */
  const measureAll = async (
    scenarios: Array<{ label: string; target: string; url: string; body: Body }>,
  ): Promise<Map<string, Row>> => {
    const runs = new Map<string, Row[]>(scenarios.map((sc) => [sc.label, []]));
    for (let round = 0; round < cfg.repeats; round++)
      for (const sc of scenarios)
        runs.get(sc.label)!.push(await measureOnce(sc.label, sc.target, sc.url, sc.body, round));
    const out = new Map<string, Row>();
    for (const sc of scenarios) {
      const { median, sorted } = medianRun(runs.get(sc.label)!, (r) => r.requestsPerSec);
      const row: Row = { ...median, runsRequestsPerSec: sorted.map((r) => Math.round(r.requestsPerSec)) };
      rows.push(row);
      out.set(sc.label, row);
    }
    return out;
  };

  const redis = new BenchRedis(cfg.redisUrl);
  try {
    // 1. stub upstream, its own process
    const stubPort = await freePort();
    const stub: StartedProcess = await startProcess(
      process.execPath,
      [join(__dirname, "stub-upstream.js"), "--port", String(stubPort), "--impl", cfg.stubImpl],
      { readyLine: /listening on \d+/ },
    );
    stops.push(() => stub.stop());
    const stubUrl = `http://127.0.0.1:${stubPort}`;
    await expectChainId("stub", stubUrl);
    log(`stub upstream (${cfg.stubImpl}) on ${stubPort}, pid ${stub.pid}`);

    // 2. nginx proxy_pass
    let nginx: Nginx | null = null;
    if (nginxBin) {
      const dir = mkdtempSync(join(os.tmpdir(), "bench-nginx-"));
      nginx = await startNginx({ binary: nginxBin, dir, upstreamPort: stubPort, keepalive: cfg.connections });
      stops.push(async () => {
        await nginx!.proc.stop();
        rmSync(dir, { recursive: true, force: true });
      });
      await expectChainId("nginx", nginx.url);
      log(`nginx ${nginx.version} on ${nginx.port}, pid ${nginx.proc.pid}`);
    } else {
      log("nginx not installed: skipped");
      skipped.push("nginx (not installed)");
    }

    // 3. gateway
    let gateway: Gateway | null = null;
    // The same gateway with per-second limits and quotas off, so the limiter's cost shows as a ratio.
    // Started first: the RSS step below stops the loaded (limits-on) gateway with `stops.pop()`.
    let gatewayOff: Gateway | null = null;
    let key = "";
    try {
      await redis.connect();
      await redis.seedNetwork(stubUrl);
      [key] = await redis.seedKeys(1);
      gatewayOff = await startGateway({
        redisUrl: cfg.redisUrl,
        prefix: redis.prefix,
        env: { RATE_LIMIT_MODE: "off", QUOTA_MODE: "off" },
      });
      const off = gatewayOff;
      stops.push(() => off.proc.stop());
      log(`gateway (limits off) on ${off.port}, pid ${off.proc.pid}`);
      gateway = await startGateway({ redisUrl: cfg.redisUrl, prefix: redis.prefix });
      const gw = gateway;
      stops.push(() => gw.proc.stop());
      log(`gateway on ${gateway.port}, pid ${gateway.proc.pid}, redis prefix ${redis.prefix}`);
      log(`gateway settings changed from the data plane's defaults: ${BENCH_GATEWAY_CHANGES}`);
    } catch (e) {
      log(`gateway not started: skipped (${(e as Error).message.split("\n")[0]})`);
      skipped.push(`gateway (${(e as Error).message.split("\n")[0]})`);
    }
    const path = `/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key)}`;
    const gwUrl = gateway ? `${gateway.baseUrl}${path}` : "";
    if (gateway) await expectChainId("gateway", gwUrl);
    const gwOffUrl = gatewayOff ? `${gatewayOff.baseUrl}${path}` : "";
    if (gatewayOff) await expectChainId("gateway (limits off)", gwOffUrl);

    // 4. throughput and latency at full load
    log("\nfull load:");
    const uniq: Body = { kind: "unique-eth-call" };
    const chainId: Body = { kind: "static", body: CHAIN_ID_BODY };
    const batch100: Body = { kind: "static", body: BATCH_100_BODY };
    const scenarios = [
      { label: "direct", target: "stub", url: `${stubUrl}${path}`, body: uniq },
      ...(nginx ? [{ label: "nginx", target: "nginx", url: `${nginx.url}${path}`, body: uniq }] : []),
      ...(gateway
        ? [
            { label: "gateway-cache-miss", target: "gateway", url: gwUrl, body: uniq },
            ...(gatewayOff
              ? [
                  {
                    label: "gateway-cache-miss-limits-off",
                    target: "gateway (RATE_LIMIT_MODE=off QUOTA_MODE=off)",
                    url: gwOffUrl,
                    body: uniq,
                  },
                ]
              : []),
            { label: "gateway-cache-hit", target: "gateway", url: gwUrl, body: chainId },
            { label: "gateway-batch-100", target: "gateway", url: gwUrl, body: batch100 },
          ]
        : []),
      ...(nginx
        ? [{ label: "nginx-batch-100", target: "nginx", url: `${nginx.url}${path}`, body: batch100 }]
        : []),
    ];
    const measured = await measureAll(scenarios);
    const direct = measured.get("direct")!;
    const viaNginx = measured.get("nginx") ?? null;
    const miss = measured.get("gateway-cache-miss") ?? null;
    const missLimitsOff = measured.get("gateway-cache-miss-limits-off") ?? null;
    const hit = measured.get("gateway-cache-hit") ?? null;
    const batch = measured.get("gateway-batch-100") ?? null;
    const nginxBatch = measured.get("nginx-batch-100") ?? null;
    if (batch) batch.elementsPerSec = batch.requestsPerSec * 100;
    if (nginxBatch) nginxBatch.elementsPerSec = nginxBatch.requestsPerSec * 100;
    if (cfg.repeats > 1) {
      log("medians:");
      for (const r of rows)
        log(
          `  ${r.label.padEnd(22)} ${fmtInt(r.requestsPerSec).padStart(9)} req/s  (runs: ${r.runsRequestsPerSec?.join(", ")})`,
        );
    }

    // 5. added latency at a fixed rate: half the gateway's cache-miss peak
    if (miss && miss.requestsPerSec > 0) {
      const rate = Math.max(100, Math.round(miss.requestsPerSec / 2 / 100) * 100);
      log(
        `\nfixed rate ~${rate} req/s (50% of the gateway's cache-miss peak), ` +
          (tool === "wrk" ? "wrk with calibrated per-connection pauses:" : "open-loop client:"),
      );
      const at = async (label: string, url: string, round: number): Promise<FixedRow> => {
        const suffix = cfg.repeats > 1 ? `.${round + 1}` : "";
        let r: FixedRow;
        if (tool === "wrk") {
          const w = await runWrkAtRate({
            url,
            body: uniq,
            rate,
            warmupS: Math.max(cfg.warmupS, 2),
            durationS: cfg.durationS,
            connections: cfg.connections,
            threads: cfg.threads,
            outDir: OUT_DIR,
            label: `fixed-${label}${suffix}`,
          });
          r = {
            method: "wrk-paced",
            targetRate: rate,
            achievedRate: w.requestsPerSec,
            p50Ms: w.p50Ms,
            p90Ms: w.p90Ms,
            p99Ms: w.p99Ms,
            p999Ms: null,
            failed: w.non2xx + w.socketErrors,
          };
        } else {
          if (cfg.warmupS > 0)
            await runFixedRate({
              url,
              body: uniq,
              rate,
              durationS: cfg.warmupS,
              connections: cfg.connections,
            });
          const o = await runFixedRate({
            url,
            body: uniq,
            rate,
            durationS: cfg.durationS,
            connections: cfg.connections,
          });
          r = { method: "open-loop", ...o };
        }
        log(
          `  ${`${label}${suffix}`.padEnd(22)} ${fmtInt(r.achievedRate).padStart(9)} req/s  p50 ${fmt(r.p50Ms, 3)} ms  p99 ${fmt(r.p99Ms, 3)} ms` +
            (r.failed > 0 ? `  (${r.failed} failed)` : ""),
        );
        return r;
      };
      // Round-robin like the full-load runs, keeping each target's median run by p99: one p99 from one
      // run moved by a millisecond or more between runs on this shared machine.
      const targets: Array<[string, string]> = [["direct", `${stubUrl}${path}`]];
      if (nginx) targets.push(["nginx", `${nginx.url}${path}`]);
      targets.push(["gateway-cache-miss", gwUrl]);
      const runs = new Map<string, FixedRow[]>(targets.map(([label]) => [label, []]));
      for (let round = 0; round < cfg.repeats; round++)
        for (const [label, url] of targets) runs.get(label)!.push(await at(label, url, round));
      const median = (label: string): FixedRow => {
        // Lower p99 is better: negated, so an even count keeps the worse of the middle two.
        const { median: m, sorted } = medianRun(runs.get(label)!, (r) => -r.p99Ms);
        return cfg.repeats > 1 ? { ...m, runsP99Ms: sorted.map((r) => r.p99Ms).reverse() } : m;
      };
      if (cfg.repeats > 1) {
        log("medians by p99:");
        for (const [label] of targets) {
          const m = median(label);
          log(
            `  ${label.padEnd(22)} p99 ${fmt(m.p99Ms, 3)} ms  (runs: ${m.runsP99Ms?.map((v) => fmt(v, 3)).join(", ")})`,
          );
        }
      }
      fixed = {
        rate,
        direct: median("direct"),
        nginx: nginx ? median("nginx") : null,
        gateway: median("gateway-cache-miss"),
      };
    }

    // 6. gateway RSS with many keys cached in process (a fresh gateway process)
    if (gateway && cfg.rssKeys > 0) {
      await stops.pop()!(); // the loaded gateway: free its CPU and memory first
      log(`\nRSS: seeding ${cfg.rssKeys.toLocaleString("en-US")} keys into Redis ...`);
      const keys = await redis.seedKeys(cfg.rssKeys);
      const fresh = await startGateway({ redisUrl: cfg.redisUrl, prefix: redis.prefix });
      stops.push(() => fresh.proc.stop());
      await expectChainId(
        "gateway (rss)",
        `${fresh.baseUrl}/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(keys[0]!)}`,
      );
      await new Promise((r) => setTimeout(r, 1000));
      const idle = processMemory(fresh.proc.pid);
      const pool = new Pool(fresh.baseUrl, { connections: cfg.connections, pipelining: 1 });
      let next = 0;
      let failures = 0;
      const started = Date.now();
      await Promise.all(
        Array.from({ length: cfg.connections }, async () => {
          while (next < keys.length) {
            const k = keys[next++]!;
            const res = await pool.request({
              path: `/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(k)}`,
              method: "POST",
              headers: { "content-type": "application/json" },
              body: CHAIN_ID_BODY,
            });
            await res.body.text();
            if (res.statusCode !== 200) failures++;
          }
        }),
      );
      await pool.close();
      await new Promise((r) => setTimeout(r, 2000));
      const warm = processMemory(fresh.proc.pid);
      rss = {
        keys: keys.length,
        idleMiB: idle.rssMiB,
        withKeysMiB: warm.rssMiB,
        peakMiB: warm.hwmMiB,
        warmFailures: failures,
      };
      log(
        `  warmed ${keys.length.toLocaleString("en-US")} keys in ${((Date.now() - started) / 1000).toFixed(1)} s` +
          ` (${failures} failed): RSS idle ${fmt(idle.rssMiB, 1)} MiB -> ${fmt(warm.rssMiB, 1)} MiB (peak ${fmt(warm.hwmMiB, 1)} MiB)`,
      );
    }

    // 7. WebSocket: 10k subscribed connections (delivery delay, RSS) and WS vs HTTP request/response.
    // Runs its own gateway and stub; BENCH_WS_CONNECTIONS=0 skips it.
    const wsConnections = Number(process.env.BENCH_WS_CONNECTIONS ?? 10_000);
    let ws: WsBenchResult | null = null;
    if (wsConnections > 0) {
      await stopAll();
      log(`\nWebSocket bench: ${wsConnections.toLocaleString("en-US")} connections subscribed to newHeads`);
      ws = await runWsBench({ connections: wsConnections });
      printWsBench(ws);
    } else {
      skipped.push("ws: BENCH_WS_CONNECTIONS=0");
    }

    // 7b. Hedged reads: p99 with a slow-tailed second upstream, hedging off / on, against the fast node
    // alone (bench/hedging.ts, its own stubs and gateways). BENCH_HEDGING=0 skips it.
    let hedging: HedgingBenchResult | null = null;
    if (process.env.BENCH_HEDGING !== "0") {
      await stopAll();
      log("\nhedged reads:");
      hedging = await runHedgingBench(hedgingOptionsFromEnv(log));
      printHedgingBench(hedging, log);
    } else {
      skipped.push("hedging: BENCH_HEDGING=0");
    }
    // 7c. A degraded node: the same section with the second upstream answering 30% of calls after 600 ms,
    // which selection has to route away from (not only hedge). BENCH_HEDGING=0 skips it too.
    let degraded: HedgingBenchResult | null = null;
    if (process.env.BENCH_HEDGING !== "0") {
      await stopAll();
      log("\ndegraded node (30% of calls after 600 ms):");
      degraded = await runHedgingBench({ ...hedgingOptionsFromEnv(log), slowPercent: 30, slowMs: 600 });
      printHedgingBench(degraded, log);
    } else {
      skipped.push("degraded node: BENCH_HEDGING=0");
    }

    // 8. Finality-aware cache: an indexer re-reading finalized history, finality on vs off (bench/finality.ts,
    // its own anvil and gateways). BENCH_FINALITY_BLOCKS=0 skips it.
    const finalityBlocks = envInt("BENCH_FINALITY_BLOCKS", 2000);
    let finality: FinalityBenchResult | null = null;
    if (finalityBlocks > 0) {
      await stopAll();
      log("\nfinality-aware cache bench:");
      finality = await runFinalityBench({
        redisUrl: cfg.redisUrl,
        blocks: finalityBlocks,
        connections: Math.max(1, envInt("BENCH_FINALITY_CONNECTIONS", 32)),
        durationS: Math.max(1, envInt("BENCH_FINALITY_DURATION_S", cfg.durationS)),
      });
    } else {
      skipped.push("finality: BENCH_FINALITY_BLOCKS=0");
    }

    // 9. eth_getLogs over 50,000 blocks split across two anvil nodes vs whole to one (bench/logs-split.ts).
    // Runs its own nodes and gateway; BENCH_LOGS_SPLIT=0 skips it.
    let logsSplit: LogsSplitBenchResult | null = null;
    if (process.env.BENCH_LOGS_SPLIT !== "0") {
      await stopAll();
      log("\neth_getLogs split bench");
      logsSplit = await runLogsSplitBench({ redisUrl: cfg.redisUrl });
      printLogsSplitBench(logsSplit);
    } else {
      skipped.push("logsSplit: BENCH_LOGS_SPLIT=0");
    }

    // 10. JWT: keyed cache-miss req/s for an app that requires a JWT vs one that does not, one gateway, same
    // run (bench/jwt.ts, its own stub and gateway). BENCH_JWT_REPEATS=0 skips it.
    const jwtRepeats = envInt("BENCH_JWT_REPEATS", 3);
    let jwt: JwtBenchResult | null = null;
    if (jwtRepeats > 0) {
      await stopAll();
      log("\nJWT bench (keyed cache miss, JWT required vs not):");
      jwt = await runJwtBench({
        redisUrl: cfg.redisUrl,
        durationS: cfg.durationS,
        warmupS: cfg.warmupS,
        connections: cfg.connections,
        threads: cfg.threads,
        repeats: jwtRepeats,
        stubImpl: cfg.stubImpl,
        outDir: OUT_DIR,
      });
    } else {
      skipped.push("jwt: BENCH_JWT_REPEATS=0");
    }

    // 11. An indexer's 50 concurrent batches of 100 through one key on the growth plan as seeded
    // (bench/indexer.ts, its own stub and gateway). BENCH_INDEXER=0 skips it.
    let indexer: IndexerBenchResult | null = null;
    if (process.env.BENCH_INDEXER !== "0") {
      await stopAll();
      log("");
      indexer = await runIndexerBench({
        redisUrl: cfg.redisUrl,
        durationS: cfg.durationS,
        warmupS: cfg.warmupS,
        batches: envInt("BENCH_INDEXER_BATCHES", 50),
        size: envInt("BENCH_INDEXER_SIZE", 100),
        nodeMs: envInt("BENCH_INDEXER_NODE_MS", 20),
      });
    } else {
      skipped.push("indexer: BENCH_INDEXER=0");
    }
    // 12. Compute units: keyed cache-miss req/s for a plan limiting compute units vs one counting requests
    // only, one gateway, same run (bench/compute-units.ts). BENCH_CU_REPEATS=0 skips it.
    const cuRepeats = envInt("BENCH_CU_REPEATS", 3);
    let computeUnits: ComputeUnitsBenchResult | null = null;
    if (cuRepeats > 0) {
      await stopAll();
      log("\ncompute units bench (keyed cache miss, plan limiting compute units vs requests only):");
      computeUnits = await runComputeUnitsBench({
        redisUrl: cfg.redisUrl,
        durationS: cfg.durationS,
        warmupS: cfg.warmupS,
        connections: cfg.connections,
        threads: cfg.threads,
        repeats: cuRepeats,
        stubImpl: cfg.stubImpl,
        outDir: OUT_DIR,
      });
    } else {
      skipped.push("computeUnits: BENCH_CU_REPEATS=0");
    }

    // 12. DATA_PLANE_THREADS=1 against =2, pinned with taskset (bench/threads.ts). Its own stub and gateways.
    let threads: ThreadsBenchResult | null = null;
    if (process.env.BENCH_THREAD_SCALING !== "0" && tool === "wrk") {
      await stopAll();
      log("\nthreads: DATA_PLANE_THREADS=1 vs 2");
      threads = await runThreadsBench({
        durationS: cfg.durationS,
        warmupS: cfg.warmupS,
        connections: cfg.connections,
        wrkThreads: cfg.threads,
        repeats: cfg.repeats,
        redisUrl: cfg.redisUrl,
        outDir: OUT_DIR,
        log,
      });
    } else {
      skipped.push(tool === "wrk" ? "threads: BENCH_THREAD_SCALING=0" : "threads: needs wrk");
    }

    // 13. Request-log cost: cache-miss req/s with the request log off / on 1% / on 100%
    // (bench/request-log.ts, its own stub and gateways). BENCH_REQUEST_LOG=0 skips it.
    let requestLog: RequestLogBenchResult | null = null;
    if (process.env.BENCH_REQUEST_LOG !== "0") {
      await stopAll();
      log("\nrequest log cost:");
      requestLog = await runRequestLogBench({ ...requestLogOptionsFromEnv(log), repeats: cfg.repeats });
      printRequestLogBench(requestLog, log);
    } else {
      skipped.push("requestLog: BENCH_REQUEST_LOG=0");
    }

    // 14. Tracing cost: cache-miss req/s with OpenTelemetry off / on at 1% / on at 100% (bench/tracing.ts,
    // its own stub, gateways and OTLP sink). BENCH_TRACING=0 skips it.
    let tracing: TracingBenchResult | null = null;
    if (process.env.BENCH_TRACING !== "0") {
      await stopAll();
      log("\ntracing cost:");
      tracing = await runTracingBench({ ...tracingOptionsFromEnv(log), repeats: cfg.repeats });
      printTracingBench(tracing, log);
    } else {
      skipped.push("tracing: BENCH_TRACING=0");
    }

    // 15. report
    const ratio = (a: Row | null, b: Row | null) =>
      a && b && b.requestsPerSec > 0 ? Number((a.requestsPerSec / b.requestsPerSec).toFixed(3)) : null;
    const results = {
      date: new Date().toISOString(),
      machine: {
        cpuModel: os.cpus()[0]?.model ?? "unknown",
        cpus: os.cpus().length,
        memoryGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
        os: `${os.type()} ${os.release()}`,
        node: process.version,
        nginx: nginx?.version ?? null,
        loadTool: tool === "wrk" ? versionOf("wrk", ["-v"]) : "autocannon 9",
        commit: versionOf("git", ["-C", BENCH_DIR, "rev-parse", "--short", "HEAD"]),
      },
      config: {
        durationS: cfg.durationS,
        warmupS: cfg.warmupS,
        repeats: cfg.repeats,
        connections: cfg.connections,
        wrkThreads: tool === "wrk" ? cfg.threads : null,
        stub: cfg.stubImpl,
        note: "stub, nginx (1 worker) and gateway (1 process, DATA_PLANE_THREADS=1) each run as their own process on this machine, with the load generator; threads compares 1 and 2 serving threads",
      },
      skipped,
      full: Object.fromEntries(
        rows.map((r) => [
          r.label,
          {
            target: r.target,
            requestsPerSec: Math.round(r.requestsPerSec),
            elementsPerSec: r.elementsPerSec === undefined ? undefined : Math.round(r.elementsPerSec),
            p50Ms: r.p50Ms,
            p90Ms: r.p90Ms,
            p99Ms: r.p99Ms,
            requests: r.requests,
            runsRequestsPerSec: r.runsRequestsPerSec,
            non2xx: r.non2xx,
            socketErrors: r.socketErrors,
          },
        ]),
      ),
      fixedRate: fixed,
      rss,
      ws,
      finality,
      logsSplit,
      requestLog,
      tracing,
      hedging,
      degraded,
      jwt,
      indexer,
      computeUnits,
      threads,
      ratios: {
        cacheMissVsNginx: ratio(miss, viaNginx),
        cacheHitVsNginx: ratio(hit, viaNginx),
        cacheMissVsDirect: ratio(miss, direct),
        /** Limits on (the default) vs off, cache-miss req/s: the cost of rate limiting + quota. */
        cacheMissLimitsOnVsOff: ratio(miss, missLimitsOff),
        batch100ElementsVsNginxBatch100: ratio(batch, nginxBatch),
        p99AddedLatencyMs: fixed ? Number((fixed.gateway.p99Ms - fixed.direct.p99Ms).toFixed(3)) : null,
        nginxP99AddedLatencyMs: fixed?.nginx
          ? Number((fixed.nginx.p99Ms - fixed.direct.p99Ms).toFixed(3))
          : null,
        rssMiBWith100kKeys: rss ? Number(rss.withKeysMiB.toFixed(1)) : null,
        /** Indexer re-reading finalized history: req/s with the finality-aware cache on / off. */
        finalityCacheOnVsOffReqPerSec: finality?.ratios.requestsPerSecOnVsOff ?? null,
        /** p99 of reads with hedging on (a second upstream answering 10% late) / the fast node alone; target < 2. */
        hedgingP99VsFastNode: hedging?.ratios.p99HedgingOnVsFastNode ?? null,
        /** p99 of reads with a degraded second upstream (30% after 600 ms), hedging on / the fast node alone. */
        degradedP99VsFastNode: degraded?.ratios.p99HedgingOnVsFastNode ?? null,
        /** Keyed cache-miss req/s of an app requiring a JWT (token reused, verdict cached) / one that does not. */
        jwtOnVsOffCacheMissReqPerSec: jwt?.ratios.cacheMissJwtOnVsOff ?? null,
        /** The same, gateway CPU per request (on / off). */
        jwtOnVsOffCpuPerRequest: jwt?.ratios.cpuPerRequestJwtOnVsOff ?? null,
        /** Keyed cache-miss req/s of a plan limiting compute units / one counting requests only (target > 0.95). */
        computeUnitsVsRequestsOnlyCacheMissReqPerSec: computeUnits?.ratios.cacheMissCuVsRequestsOnly ?? null,
        /** The same, gateway CPU per request. */
        computeUnitsVsRequestsOnlyCpuPerRequest: computeUnits?.ratios.cpuPerRequestCuVsRequestsOnly ?? null,
        /** DATA_PLANE_THREADS=2 / =1 req/s, pinned as bench/threads.ts says (on 2 CPUs: shared with wrk). */
        threads2vs1CacheHit: threads?.ratios.cacheHit2vs1 ?? null,
        threads2vs1CacheMiss: threads?.ratios.cacheMiss2vs1 ?? null,
        wsVsHttpReqPerSec:
          ws && ws.throughput.httpReqPerSec > 0
            ? Number((ws.throughput.wsReqPerSec / ws.throughput.httpReqPerSec).toFixed(3))
            : null,
        /**
         * WS fan-out of one head to every client: the gateway's mean time / the floor's (a C sender writing
         * the same frame to as many loopback sockets), and the same for CPU per head (user + sys).
         */
        wsFanoutVsFloor:
          ws?.floor && ws.floor.fanoutMs.mean > 0
            ? Number((ws.gatewayFanoutMs.mean / ws.floor.fanoutMs.mean).toFixed(3))
            : null,
        wsFanoutCpuVsFloor: ws?.floor ? wsCpuVsFloor(ws) : null,
        /** eth_getLogs over 50,000 blocks: time sent whole to one node / time split across two. */
        logsSplitSpeedup: logsSplit?.speedup ?? null,
        /** Request log on (1% sample) / off, cache-miss req/s (bench/request-log.ts). */
        requestLogOnVsOff: requestLog?.onVsOff ?? null,
        tracingOnVsOff: tracing?.onVsOff ?? null,
        /** Indexer (50 concurrent batches of 100, one key): share of batches refused on growth as seeded. */
        indexerGrowthRefusedShare: indexer?.growth.refusedShare ?? null,
        /** The same with growth's caps and the per-second limit lifted: share refused (concurrency). */
        indexerCapsOnlyRefusedShare: indexer?.growthCapsOnly.refusedShare ?? null,
      },
    };
    writeFileSync(RESULTS, `${JSON.stringify(results, null, 2)}\n`);
    formatWithBiome(RESULTS);
    writeFileSync(
      join(OUT_DIR, `results-${results.date.replace(/[:.]/g, "-")}.json`),
      `${JSON.stringify(results, null, 2)}\n`,
    );

    log("\n| target | req/s | p50 ms | p99 ms |");
    log("|---|---:|---:|---:|");
    for (const r of rows)
      log(
        `| ${r.label}${r.elementsPerSec ? ` (${fmtInt(r.elementsPerSec)} elements/s)` : ""} | ${fmtInt(r.requestsPerSec)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} |`,
      );
    const rt = results.ratios;
    log(`\ncache-miss / nginx req/s:   ${rt.cacheMissVsNginx ?? "-"}`);
    log(`cache-hit / nginx req/s:    ${rt.cacheHitVsNginx ?? "-"}`);
    log(`cache-miss / direct req/s:  ${rt.cacheMissVsDirect ?? "-"}`);
    log(`cache-miss limits on / off: ${rt.cacheMissLimitsOnVsOff ?? "-"}`);
    if (computeUnits)
      log(
        `cache-miss compute units / requests only: req/s ${rt.computeUnitsVsRequestsOnlyCacheMissReqPerSec ?? "-"}, CPU/request ${rt.computeUnitsVsRequestsOnlyCpuPerRequest ?? "-"} (target req/s > 0.95)`,
      );
    if (fixed)
      log(
        `p99 added latency at ${fixed.rate} req/s: gateway ${fmt(rt.p99AddedLatencyMs, 3)} ms, nginx ${fmt(rt.nginxP99AddedLatencyMs, 3)} ms`,
      );
    if (rss)
      log(`gateway RSS with ${rss.keys.toLocaleString("en-US")} cached keys: ${fmt(rss.withKeysMiB, 1)} MiB`);
    if (ws?.floor)
      log(
        `WS fan-out / the machine's floor: time ${rt.wsFanoutVsFloor ?? "-"}, CPU per head ${rt.wsFanoutCpuVsFloor ?? "-"}`,
      );
    if (hedging) log(`p99 with hedging / fast node alone: ${rt.hedgingP99VsFastNode ?? "-"} (target < 2)`);
    if (degraded?.floorTargets.hedgingOn)
      log(
        `p99 with a degraded node, hedging on: ${degraded.rows.find((r) => r.label === "hedging-on")?.p99Ms ?? "-"} ms, target < ${degraded.floorTargets.hedgingOn.targetMs} ms (2 x fast node + hedge floor): ${degraded.floorTargets.hedgingOn.met ? "met" : "NOT met"}`,
      );
    log(`\nwrote ${RESULTS}`);
  } finally {
    await stopAll();
    await redis.cleanup().catch(() => undefined);
  }
}

/** Gateway CPU per head over the floor sender's (user + sys), on the harness kept for the figures. */
function wsCpuVsFloor(ws: WsBenchResult): number | null {
  const d = ws.deliveries.find((x) => x.harness === ws.harness);
  const f = ws.floor;
  if (d === undefined || f === null) return null;
  const floor = f.senderCpuMsPerHead.user + f.senderCpuMsPerHead.system;
  if (!(floor > 0)) return null;
  return Number(((d.gatewayCpuMsPerHead.user + d.gatewayCpuMsPerHead.system) / floor).toFixed(3));
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`bench failed: ${e instanceof Error ? e.stack : String(e)}\n`);
    process.exit(1);
  },
);
