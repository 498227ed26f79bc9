/**
 * eth_getLogs split benchmark (issue 14, benchmark c): one eth_getLogs over 50,000 blocks through the gateway,
 * split into sub-ranges of the network's logsChunkBlocks sent in parallel across two upstreams, against the
 * same call sent whole to one upstream (logsChunkBlocks 0), both in one run against the same nodes.
 *
 * Nodes (BENCH_LOGS_NODES):
 * - `stub` (default): two stand-in nodes (bench/logs-node-stub.ts) whose eth_getLogs costs
 *   BENCH_LOGS_BASE_MS (5) + BENCH_LOGS_PER_BLOCK_US (20) per block of the range, on BENCH_LOGS_WORKERS (4)
 *   workers per node: a 50,000-block call costs one node about 1 s. Real anvil nodes cannot hold 50,000
 *   blocks in bench time: anvil's mining cost per block grows with the chain (measured here: 2 ms per block
 *   at the start, 14 ms by block 10,000; 50,000 blocks would take well over 20 min of CPU per node).
 * - `anvil`: two real anvil nodes with byte-identical histories (test/helpers/evm-logs.ts), of
 *   BENCH_LOGS_BLOCKS blocks (default 5,000 in this mode). anvil answers eth_getLogs from memory (about
 *   1-2 ms per 1,000 blocks), so this mode mostly shows the splitting's own overhead.
 * A block with BENCH_LOGS_PER_BLOCK (3) logs every BENCH_LOGS_EVERY (100) blocks. The gateway runs as its
 * own process (bench/gateway.ts) with the response cache off; the network's range limit (maxLogsBlockRange)
 * is raised to the range. After one warm-up of each, calls alternate split / whole BENCH_LOGS_REPEATS (7)
 * times; medians are reported, and every answer is checked byte for byte against node A's own answer.
 *
 *   node dist/bench/logs-split.js        (alone: prints the figures and writes the `logsSplit` section of
 *                                         bench/results.json, or BENCH_RESULTS)
 *   import { runLogsSplitBench } from "./logs-split"   (from bench/run.ts)
 *
 * Environment: the BENCH_LOGS_* above, BENCH_LOGS_CHUNK (2000), LOGS_SPLIT_CONCURRENCY (passed to the
 * gateway; its default 8), REDIS_URL.
 */
import { NetworkRecordSchema } from "../shared/src/redis/records";
import { type Anvil, startAnvil } from "../test/helpers/anvil";
import { ANVIL_DETERMINISTIC_ARGS, LogHistory } from "../test/helpers/evm-logs";
import { BenchRedis, type Gateway, startGateway } from "./gateway";
import { startLogsNode } from "./logs-node-stub";
import { RESULTS_FILE, writeResultsSection } from "./results-file";
import { runStandalone } from "./standalone";

export interface LogsSplitBenchOptions {
  nodes?: "stub" | "anvil";
  blocks?: number;
  every?: number;
  perBlock?: number;
  chunk?: number;
  repeats?: number;
  redisUrl?: string;
}

export interface LogsSplitBenchResult {
  nodes: "stub" | "anvil";
  /** The stub's cost model (null for anvil). */
  stubCost: { baseMs: number; perBlockUs: number; workersPerNode: number } | null;
  blocks: number;
  logs: number;
  answerBytes: number;
  chunkBlocks: number;
  subCallsPerCall: number;
  concurrency: number;
  repeats: number;
  /** Median wall time of the call through the gateway, split across two upstreams (ms). */
  splitMs: number;
  /** Median wall time of the same call sent whole to one upstream through the gateway (ms). */
  wholeMs: number;
  /** Median wall time of the call straight to node A, no gateway (ms). */
  directMs: number;
  /** wholeMs / splitMs: how many times sooner the split answer came. */
  speedup: number;
  runsSplitMs: number[];
  runsWholeMs: number[];
  /** eth_getLogs exchanges each upstream of the split network answered, warm-up included (gateway metrics). */
  splitExchangesByUpstream: Record<string, number>;
  setupSeconds: number;
}

const envInt = (name: string, def: number): number => {
  const v = process.env[name];
  if (v === undefined || v === "") return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name}: expected a non-negative number, got ${v}`);
  return n;
};

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
};

const round = (n: number, digits = 1): number => Number(n.toFixed(digits));

async function timedPost(url: string, body: string): Promise<{ ms: number; text: string }> {
  const start = performance.now();
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  const text = await res.text();
  const ms = performance.now() - start;
  if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status}: ${text.slice(0, 300)}`);
  return { ms, text };
}

/** Two nodes with the same chain: their URLs and how to stop them. */
interface Nodes {
  urls: [string, string];
  stop(): Promise<void>;
}

async function anvilNodes(blocks: number, every: number, perBlock: number): Promise<Nodes> {
  const started: Anvil[] = [];
  const stop = async () => {
    for (const n of started) await n.stop();
  };
  try {
    for (let i = 0; i < 2; i++) started.push(await startAnvil({ args: ANVIL_DETERMINISTIC_ARGS }));
    const history = new LogHistory(started.map((n) => n.httpUrl));
    await history.init();
    await history.deployEmitter();
    // Blocks 0..blocks-1: a log block every `every` blocks, empty blocks between.
    let head = 1; // genesis, then the deployment
    let value = 0;
    while (head < blocks - 1) {
      await history.emitBlock(
        0,
        Array.from({ length: perBlock }, () => value++ % 16),
      );
      head++;
      const empty = Math.min(every - 1, blocks - 1 - head);
      await history.mine(empty);
      head += empty;
    }
    if ((await history.head()) !== blocks - 1) {
      throw new Error(`history ends at ${await history.head()}, expected ${blocks - 1}`);
    }
    return { urls: [started[0]!.httpUrl, started[1]!.httpUrl], stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

export async function runLogsSplitBench(o: LogsSplitBenchOptions = {}): Promise<LogsSplitBenchResult> {
  const mode = o.nodes ?? (process.env.BENCH_LOGS_NODES === "anvil" ? "anvil" : "stub");
  const blocks = o.blocks ?? envInt("BENCH_LOGS_BLOCKS", mode === "anvil" ? 5_000 : 50_000);
  const every = o.every ?? envInt("BENCH_LOGS_EVERY", 100);
  const perBlock = o.perBlock ?? envInt("BENCH_LOGS_PER_BLOCK", 3);
  const chunk = o.chunk ?? envInt("BENCH_LOGS_CHUNK", 2_000);
  const repeats = o.repeats ?? envInt("BENCH_LOGS_REPEATS", 7);
  const redisUrl = o.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
  const concurrency = envInt("LOGS_SPLIT_CONCURRENCY", 8);
  const stubCost = {
    baseMs: envInt("BENCH_LOGS_BASE_MS", 5),
    perBlockUs: envInt("BENCH_LOGS_PER_BLOCK_US", 20),
    workersPerNode: envInt("BENCH_LOGS_WORKERS", 4),
  };

  const started = performance.now();
  const redis = new BenchRedis(redisUrl);
  let nodes: Nodes | undefined;
  let gw: Gateway | undefined;
  try {
    if (mode === "anvil") {
      nodes = await anvilNodes(blocks, every, perBlock);
    } else {
      const opts = { blocks, every, perBlock, ...stubCost, workers: stubCost.workersPerNode };
      const [a, b] = await Promise.all([startLogsNode(opts), startLogsNode(opts)]);
      nodes = { urls: [a.url, b.url], stop: async () => void (await Promise.all([a.close(), b.close()])) };
    }
    const [urlA, urlB] = nodes.urls;

    await redis.connect();
    const put = async (slug: string, ups: [string, string][], chunkBlocks: number) => {
      const record = NetworkRecordSchema.parse({
        slug,
        name: slug,
        protocol: "EVM",
        chainId: 31337,
        allowDebug: false,
        upstreams: ups.map(([id, httpUrl]) => ({ id, httpUrl, wsUrl: null, weight: 1 })),
        maxLogsBlockRange: blocks,
        logsChunkBlocks: chunkBlocks,
      });
      await redis.redis.hset(redis.names.networks(), slug, JSON.stringify(record));
    };
    await put(
      "logs-split",
      [
        ["a", urlA],
        ["b", urlB],
      ],
      chunk,
    );
    await put("logs-whole", [["a", urlA]], 0);
    await redis.redis.set(redis.names.publishedAt(), new Date().toISOString());
    const [key] = await redis.seedKeys(1, "ws-bench-logs");
    gw = await startGateway({
      redisUrl,
      prefix: redis.prefix,
      env: {
        CACHE_MAX_BYTES: "0",
        RATE_LIMIT_MODE: "off",
        QUOTA_MODE: "off",
        LOGS_SPLIT_CONCURRENCY: String(concurrency),
        // A whole 50,000-block call takes the stub node about 1 s: well within, whatever the machine's load.
        UPSTREAM_TIMEOUT_MS: "120000",
      },
    });
    const setupSeconds = (performance.now() - started) / 1000;

    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getLogs",
      params: [{ fromBlock: "0x0", toBlock: `0x${(blocks - 1).toString(16)}` }],
    });
    const splitUrl = `${gw.baseUrl}/logs-split/rpc?apikey=${key}`;
    const wholeUrl = `${gw.baseUrl}/logs-whole/rpc?apikey=${key}`;
    const reference = (await timedPost(urlA, body)).text;
    const logs = (JSON.parse(reference) as { result: unknown[] }).result.length;
    const check = (label: string, text: string) => {
      if (text !== reference)
        throw new Error(`${label}: answer differs from node A's (${text.slice(0, 200)})`);
    };
    check("split warm-up", (await timedPost(splitUrl, body)).text);
    check("whole warm-up", (await timedPost(wholeUrl, body)).text);
    const split: number[] = [];
    const whole: number[] = [];
    const direct: number[] = [];
    for (let i = 0; i < repeats; i++) {
      const s = await timedPost(splitUrl, body);
      check("split", s.text);
      split.push(s.ms);
      const w = await timedPost(wholeUrl, body);
      check("whole", w.text);
      whole.push(w.ms);
      direct.push((await timedPost(urlA, body)).ms);
    }
    const metrics = await (await fetch(`${gw.metricsUrl}/metrics`)).text();
    const splitExchangesByUpstream: Record<string, number> = {};
    for (const m of metrics.matchAll(
      /^rpcgw_upstream_requests_total\{network="logs-split",upstream="([^"]+)",outcome="ok"\} (\d+)/gm,
    )) {
      splitExchangesByUpstream[m[1]!] = Number(m[2]);
    }
    const splitMs = median(split);
    const wholeMs = median(whole);
    return {
      nodes: mode,
      stubCost: mode === "stub" ? stubCost : null,
      blocks,
      logs,
      answerBytes: reference.length,
      chunkBlocks: chunk,
      subCallsPerCall: Math.ceil(blocks / chunk),
      concurrency,
      repeats,
      splitMs: round(splitMs),
      wholeMs: round(wholeMs),
      directMs: round(median(direct)),
      speedup: round(wholeMs / splitMs, 2),
      runsSplitMs: split.map((x) => round(x)),
      runsWholeMs: whole.map((x) => round(x)),
      splitExchangesByUpstream,
      setupSeconds: round(setupSeconds),
    };
  } finally {
    await gw?.proc.stop();
    await nodes?.stop();
    await redis.cleanup().catch(() => undefined);
  }
}

export function printLogsSplitBench(r: LogsSplitBenchResult): void {
  const log = (s: string) => process.stdout.write(`${s}\n`);
  const cost = r.stubCost
    ? `stub nodes: ${r.stubCost.baseMs} ms + ${r.stubCost.perBlockUs} µs/block, ${r.stubCost.workersPerNode} workers each`
    : "real anvil nodes";
  log(
    `eth_getLogs over ${r.blocks.toLocaleString("en-US")} blocks (${r.logs.toLocaleString("en-US")} logs, ${(r.answerBytes / 1024).toFixed(0)} KiB; ${cost}), median of ${r.repeats}:`,
  );
  log(
    `  split across 2 upstreams (${r.subCallsPerCall} sub-calls of ${r.chunkBlocks} blocks, ${r.concurrency} at once): ${r.splitMs} ms`,
  );
  log(`  whole to one upstream: ${r.wholeMs} ms   (straight to the node, no gateway: ${r.directMs} ms)`);
  log(
    `  whole / split: ${r.speedup}x   eth_getLogs exchanges per upstream: ${JSON.stringify(r.splitExchangesByUpstream)}`,
  );
}

if (require.main === module) {
  runStandalone("logs-split", async () => {
    const r = await runLogsSplitBench();
    printLogsSplitBench(r);
    // Standalone: only this section of the results file changes.
    writeResultsSection("logsSplit", { date: new Date().toISOString(), ...r });
    process.stdout.write(`wrote the logsSplit section of ${RESULTS_FILE}\n`);
  });
}
