/**
 * Finality-aware cache benchmark (issue 14, bench a): an indexer-like workload that keeps re-reading
 * finalized history while the chain's head advances, through two gateway processes in front of the same
 * real anvil node, one with CACHE_FINALITY_ENABLED=true (the default) and one with false, in one run.
 *
 * History: `BENCH_FINALITY_BLOCKS` (2000) old blocks, the first 100 each carrying a call that emits a log,
 * mined at once; then anvil mines one block a second (evm_setIntervalMining), so the head keeps moving
 * and, anvil's `finalized` being head - 64, every block read is final throughout. The workload cycles,
 * from `BENCH_FINALITY_CONNECTIONS` (32) connections, over three reads per old block b:
 * `eth_getBlockByNumber(b, false)`, `eth_getLogs` over b-9..b, `eth_getBalance(dev account, b)`. Each
 * gateway first gets two passes over every read (the cache's default second-request admission stores an
 * answer on its second request), then `BENCH_FINALITY_DURATION_S` (BENCH_DURATION_S, 10) seconds are
 * measured: requests/s and p50/p99 seen by the client, the share of `X-Cache: HIT` answers, and the
 * upstream exchanges the gateway made (its rpcgw_upstream_requests_total) per request.
 *
 * Without finality the same reads are cached per head only (and at most CACHE_PER_BLOCK_TTL_MS, 2 s): a
 * read comes back after a pass over the 6,000 keys, by which time the head has usually moved.
 *
 *   node dist/bench/finality.js     (alone: prints the figures and writes the `finality` section of
 *                                    bench/results.json, or BENCH_RESULTS; the rest of the file is kept)
 *   import { runFinalityBench } from "./finality"   (from bench/run.ts)
 *
 * The load comes from this process (undici), so on a small machine the client, anvil and the gateway share
 * the CPUs: the figures are a comparison within one run, not capacity.
 */
import { Pool } from "undici";
import { type Anvil, startAnvil } from "../test/helpers/anvil";
import { envInt } from "./env";
import { BENCH_NETWORK, BenchRedis, type Gateway, startGateway } from "./gateway";
import { RESULTS_FILE, writeResultsSection } from "./results-file";
import { runStandalone } from "./standalone";

export interface FinalityBenchOptions {
  redisUrl?: string;
  /** Distinct old blocks re-read (three reads each). */
  blocks?: number;
  connections?: number;
  durationS?: number;
}

/** One gateway's measured window. */
export interface FinalityModeResult {
  requests: number;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Answers with X-Cache: HIT / all answers. */
  hitRatio: number;
  /** Upstream exchanges the gateway made during the window (rpcgw_upstream_requests_total). */
  upstreamRequests: number;
  upstreamRequestsPerRequest: number;
  /** Non-200 answers, JSON-RPC errors and transport errors. */
  errors: number;
  /** Blocks anvil mined during the window. */
  headAdvanced: number;
}

export interface FinalityBenchResult {
  upstream: string;
  blocks: number;
  keys: number;
  connections: number;
  durationS: number;
  warmupPasses: number;
  finalityOn: FinalityModeResult;
  finalityOff: FinalityModeResult;
  ratios: { requestsPerSecOnVsOff: number | null; upstreamRequestsOffVsOn: number | null };
}

const DEV = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
/** Runtime code: CALLER PUSH1 0 PUSH1 0 LOG1 STOP (a log on any call). */
const LOGGER = "0x00000000000000000000000000000000000000b1";
const LOG_BLOCKS = 100;
const WARMUP_PASSES = 2;

const log = (s: string) => process.stdout.write(`${s}\n`);

async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const v = (await res.json()) as { result?: unknown; error?: unknown };
  if (v.error !== undefined) throw new Error(`${method}: ${JSON.stringify(v.error)}`);
  return v.result;
}

/** The request bodies: three reads per old block, interleaved by block. */
function bodies(blocks: number): string[] {
  const out: string[] = [];
  for (let b = 10; b < 10 + blocks; b++) {
    const hex = `0x${b.toString(16)}`;
    out.push(`{"jsonrpc":"2.0","id":${b},"method":"eth_getBlockByNumber","params":["${hex}",false]}`);
    out.push(
      `{"jsonrpc":"2.0","id":${b},"method":"eth_getLogs","params":[{"fromBlock":"0x${(b - 9).toString(16)}","toBlock":"${hex}"}]}`,
    );
    out.push(`{"jsonrpc":"2.0","id":${b},"method":"eth_getBalance","params":["${DEV}","${hex}"]}`);
  }
  return out;
}

interface Run {
  requests: number;
  hits: number;
  errors: number;
  latenciesMs: number[];
}

/** Sends `list` in order from `connections` connections: `passes` times over, or for `durationMs`. */
async function drive(
  pool: Pool,
  path: string,
  list: readonly string[],
  connections: number,
  until: { passes: number } | { durationMs: number },
): Promise<Run> {
  const run: Run = { requests: 0, hits: 0, errors: 0, latenciesMs: [] };
  let next = 0;
  const total = "passes" in until ? until.passes * list.length : Number.POSITIVE_INFINITY;
  const deadline = "durationMs" in until ? performance.now() + until.durationMs : Number.POSITIVE_INFINITY;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < total && performance.now() < deadline) {
        const body = list[next++ % list.length]!;
        const t0 = performance.now();
        try {
          const res = await pool.request({
            path,
            method: "POST",
            headers: { "content-type": "application/json" },
            body,
          });
          const text = await res.body.text();
          run.latenciesMs.push(performance.now() - t0);
          run.requests++;
          if (res.headers["x-cache"] === "HIT") run.hits++;
          if (res.statusCode !== 200 || !text.includes('"result"')) run.errors++;
        } catch {
          run.errors++;
        }
      }
    }),
  );
  return run;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function upstreamRequests(gw: Gateway): Promise<number> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^rpcgw_upstream_requests_total\{[^}]*\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}

async function finalizedOf(gw: Gateway): Promise<number> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text();
  const m = new RegExp(`rpcgw_network_finalized_block\\{network="${BENCH_NETWORK}"\\} (\\d+)`).exec(text);
  return m === null ? -1 : Number(m[1]);
}

async function measure(
  label: string,
  gw: Gateway,
  anvil: Anvil,
  path: string,
  list: readonly string[],
  connections: number,
  durationS: number,
): Promise<FinalityModeResult> {
  const pool = new Pool(gw.baseUrl, { connections, pipelining: 1 });
  try {
    await drive(pool, path, list, connections, { passes: WARMUP_PASSES });
    const headBefore = Number.parseInt((await rpc(anvil.httpUrl, "eth_blockNumber")) as string, 16);
    const upBefore = await upstreamRequests(gw);
    const t0 = performance.now();
    const run = await drive(pool, path, list, connections, { durationMs: durationS * 1000 });
    const seconds = (performance.now() - t0) / 1000;
    const upstream = (await upstreamRequests(gw)) - upBefore;
    const headAfter = Number.parseInt((await rpc(anvil.httpUrl, "eth_blockNumber")) as string, 16);
    const sorted = run.latenciesMs.sort((a, b) => a - b);
    const r: FinalityModeResult = {
      requests: run.requests,
      requestsPerSec: Math.round(run.requests / seconds),
      p50Ms: Number(percentile(sorted, 50).toFixed(3)),
      p99Ms: Number(percentile(sorted, 99).toFixed(3)),
      hitRatio: Number((run.requests > 0 ? run.hits / run.requests : 0).toFixed(4)),
      upstreamRequests: upstream,
      upstreamRequestsPerRequest: Number((run.requests > 0 ? upstream / run.requests : 0).toFixed(4)),
      errors: run.errors,
      headAdvanced: headAfter - headBefore,
    };
    log(
      `  ${label.padEnd(14)} ${r.requestsPerSec.toLocaleString("en-US").padStart(7)} req/s  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  hit ${(r.hitRatio * 100).toFixed(1)}%  upstream/request ${r.upstreamRequestsPerRequest}  head +${r.headAdvanced}` +
        (r.errors > 0 ? `  (${r.errors} errors)` : ""),
    );
    return r;
  } finally {
    await pool.close();
  }
}

/** Runs the bench: its own anvil and two gateway processes (stopped by PID), Redis records under a fresh prefix. */
export async function runFinalityBench(opts: FinalityBenchOptions = {}): Promise<FinalityBenchResult> {
  const blocks = Math.max(10, opts.blocks ?? 2000);
  const connections = Math.max(1, opts.connections ?? 32);
  const durationS = Math.max(1, opts.durationS ?? 10);
  const redis = new BenchRedis(opts.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  const stops: Array<() => Promise<unknown>> = [];
  try {
    const anvil = await startAnvil();
    stops.push(() => anvil.stop());
    const version = ((await rpc(anvil.httpUrl, "web3_clientVersion")) as string) ?? "anvil";
    log(`history: ${blocks} blocks on ${version} (pid ${anvil.pid}) ...`);
    await rpc(anvil.httpUrl, "anvil_setCode", [LOGGER, "0x3360006000a100"]);
    for (let i = 0; i < LOG_BLOCKS; i++) {
      await rpc(anvil.httpUrl, "eth_sendTransaction", [{ from: DEV, to: LOGGER, data: "0x" }]);
    }
    // Past the last block read by anvil's finality lag (64) and a margin.
    await rpc(anvil.httpUrl, "anvil_mine", [`0x${(blocks + 100 - LOG_BLOCKS).toString(16)}`]);
    await rpc(anvil.httpUrl, "evm_setIntervalMining", [1]);

    await redis.connect();
    await redis.seedNetwork(anvil.httpUrl);
    const [key] = await redis.seedKeys(1);
    const path = `/${BENCH_NETWORK}/rpc?apikey=${encodeURIComponent(key!)}`;
    const on = await startGateway({ redisUrl: redis.url, prefix: redis.prefix });
    stops.push(() => on.proc.stop());
    const off = await startGateway({
      redisUrl: redis.url,
      prefix: redis.prefix,
      env: { CACHE_FINALITY_ENABLED: "false" },
    });
    stops.push(() => off.proc.stop());
    const lastRead = 10 + blocks - 1;
    const deadline = Date.now() + 30_000;
    while ((await finalizedOf(on)) < lastRead) {
      if (Date.now() > deadline) throw new Error(`finality bench: finalized head never reached ${lastRead}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const list = bodies(blocks);
    log(
      `${list.length.toLocaleString("en-US")} reads of finalized blocks, ${connections} connections, ${WARMUP_PASSES} warm-up passes, then ${durationS}s measured:`,
    );
    const finalityOff = await measure("finality off", off, anvil, path, list, connections, durationS);
    const finalityOn = await measure("finality on", on, anvil, path, list, connections, durationS);
    return {
      upstream: version,
      blocks,
      keys: list.length,
      connections,
      durationS,
      warmupPasses: WARMUP_PASSES,
      finalityOn,
      finalityOff,
      ratios: {
        requestsPerSecOnVsOff:
          finalityOff.requestsPerSec > 0
            ? Number((finalityOn.requestsPerSec / finalityOff.requestsPerSec).toFixed(3))
            : null,
        upstreamRequestsOffVsOn:
          finalityOn.upstreamRequestsPerRequest > 0
            ? Number(
                (finalityOff.upstreamRequestsPerRequest / finalityOn.upstreamRequestsPerRequest).toFixed(1),
              )
            : null,
      },
    };
  } finally {
    while (stops.length > 0) await stops.pop()!().catch(() => undefined);
    await redis.cleanup().catch(() => undefined);
  }
}

/** Standalone: runs, prints, and writes the `finality` section into the results file (the rest kept). */
async function main(): Promise<void> {
  const result = await runFinalityBench({
    blocks: envInt("BENCH_FINALITY_BLOCKS", 2000),
    connections: envInt("BENCH_FINALITY_CONNECTIONS", 32),
    durationS: envInt("BENCH_FINALITY_DURATION_S", envInt("BENCH_DURATION_S", 10)),
  });
  writeResultsSection("finality", { date: new Date().toISOString(), ...result });
  log(`\nwrote the finality section of ${RESULTS_FILE}`);
}

if (require.main === module) runStandalone("finality", main);
