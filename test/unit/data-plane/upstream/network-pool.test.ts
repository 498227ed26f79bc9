import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NoopMetrics, type UpstreamOutcome } from "../../../../data-plane/src/metrics/metrics";
import { WINDOW_MS } from "../../../../data-plane/src/upstream/latency-window";
import { NetworkPool, type PoolOptions } from "../../../../data-plane/src/upstream/network-pool";
import { ReplyKind } from "../../../../data-plane/src/upstream/reply";
import type { NetworkRecord } from "../../../../shared/src/redis/records";
import { freePort } from "../../../helpers/ports";
import { type StartedProcess, startProcess } from "../../../helpers/process";

interface Call {
  method: string;
  id: unknown;
  params: unknown;
}

/**
 * A scripted loopback JSON-RPC node: `head` for eth_blockNumber, `delayMs(calls)` per exchange (so one
 * node can be slow for some calls), `nullFor(call)` answers null. Counts methods, and exchanges whose
 * connection closed before the answer was sent (what cancelling a hedge's loser does).
 */
class Node {
  head = 100;
  delayMs: (calls: Call[]) => number = () => 0;
  nullFor: (c: Call) => boolean = () => false;
  readonly seen: string[] = [];
  /** Each exchange's traceparent header ("" = none) and its methods. */
  readonly traced: { traceparent: string; methods: string[] }[] = [];
  exchanges = 0;
  abortedBeforeAnswer = 0;
  url = "";
  private server: Server | undefined;

  count(method: string): number {
    return this.seen.filter((m) => m === method).length;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => {
        body += d.toString();
      });
      req.on("end", () => {
        const parsed = JSON.parse(body) as Call | Call[];
        const calls = Array.isArray(parsed) ? parsed : [parsed];
        this.exchanges++;
        for (const c of calls) this.seen.push(c.method);
        const tp = req.headers.traceparent;
        this.traced.push({
          traceparent: typeof tp === "string" ? tp : "",
          methods: calls.map((c) => c.method),
        });
        let answered = false;
        res.on("close", () => {
          if (!answered) this.abortedBeforeAnswer++;
        });
        const answer = () => {
          if (res.destroyed) return;
          answered = true;
          const out = calls.map((c) => ({
            jsonrpc: "2.0",
            id: c.id,
            result:
              c.method === "eth_blockNumber"
                ? `0x${this.head.toString(16)}`
                : this.nullFor(c)
                  ? null
                  : { method: c.method, params: c.params ?? null },
          }));
          res
            .writeHead(200, { "content-type": "application/json" })
            .end(JSON.stringify(Array.isArray(parsed) ? out : out[0]));
        };
        const d = calls.some((c) => c.method === "eth_blockNumber") ? 0 : this.delayMs(calls);
        if (d > 0) setTimeout(answer, d);
        else answer();
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

/** NoopMetrics that keeps what the pool reports about hedges, empty retries and exchange outcomes. */
class SeenMetrics extends NoopMetrics {
  readonly hedges: string[] = [];
  readonly emptyRetries: string[] = [];
  readonly outcomes: { upstream: string; outcome: UpstreamOutcome }[] = [];
  override upstreamHedge(_n: string, outcome: "won" | "lost" | "capped"): void {
    this.hedges.push(outcome);
  }
  override upstreamEmptyRetry(_n: string, outcome: "found" | "empty" | "failed"): void {
    this.emptyRetries.push(outcome);
  }
  override upstreamRequest(_n: string, upstream: string, outcome: UpstreamOutcome): void {
    this.outcomes.push({ upstream, outcome });
  }
  hedgeCount(outcome: string): number {
    return this.hedges.filter((h) => h === outcome).length;
  }
}

const BASE: PoolOptions = {
  timeoutMs: 5_000,
  connections: 8,
  breakerThreshold: 2,
  breakerCooldownMs: 60_000,
  maxAttempts: 3,
  maxLagBlocks: 5,
  coalesceMax: 1,
  hedge: { enabled: true, minDelayMs: 30, maxDelayMs: 30, maxPercent: 100 },
};

function record(nodes: { id: string; node: Node; weight?: number }[]): NetworkRecord {
  return {
    slug: "eth",
    name: "eth",
    protocol: "EVM",
    chainId: 1,
    allowDebug: false,
    upstreams: nodes.map((n) => ({ id: n.id, httpUrl: n.node.url, wsUrl: null, weight: n.weight ?? 1 })),
  };
}

const HASH = `0x${"cd".repeat(32)}`;

describe("data plane: network pool routing away from a degraded node", function () {
  this.timeout(60_000);
  let slow: Node;
  let fast: Node;
  let pool: NetworkPool;

  beforeEach(async () => {
    slow = await new Node().start();
    fast = await new Node().start();
    pool = new NetworkPool(
      record([
        { id: "slow", node: slow },
        { id: "fast", node: fast },
      ]),
      // Hedging off: what is measured is where selection sends each call.
      { ...BASE, hedge: { enabled: false, minDelayMs: 0, maxDelayMs: 1, maxPercent: 0 } },
      new NoopMetrics(),
    );
  });

  afterEach(async () => {
    await pool.close();
    await slow.stop();
    await fast.stop();
  });

  /** `n` calls, `wave` at a time; returns how many of them the slow node got. */
  async function send(n: number, wave = 8): Promise<number> {
    const before = slow.count("eth_call");
    for (let i = 0; i < n; i += wave) {
      const rs = await Promise.all(
        Array.from({ length: wave }, (_, k) =>
          pool.call({ method: "eth_call", params: [{ data: `0x${i + k}` }] }),
        ),
      );
      for (const r of rs) assert.ok(r.ok);
    }
    return slow.count("eth_call") - before;
  }

  it("a node slow on 30% of its calls loses nearly all traffic; probed still, it earns traffic back once fast", async () => {
    let n = 0;
    slow.delayMs = () => (n++ % 10 < 3 ? 300 : 0);
    await send(200);
    // Two candidates drawn with replacement would give it a quarter at least; distinct ones and a
    // tail-aware score leave it what it wins on load alone.
    const share = (await send(400)) / 400;
    assert.ok(share < 0.1, `the degraded node still got ${(share * 100).toFixed(1)}% of the calls`);
    // It recovers. Its window of slow answers is retired by time (WINDOW_MS twice, simulated here) and the
    // health checks keep probing it: their latency is its only news.
    slow.delayMs = () => 0;
    const up = (pool as unknown as { upstreams: { id: string; latency: { expire(ms: number): void } }[] })
      .upstreams;
    const t = performance.now() + 3 * WINDOW_MS;
    up.find((u) => u.id === "slow")!.latency.expire(t);
    up.find((u) => u.id === "slow")!.latency.expire(t + WINDOW_MS + 1);
    const probes = slow.count("eth_blockNumber");
    for (let i = 0; i < 20; i++) await pool.healthCheck();
    assert.ok(slow.count("eth_blockNumber") >= probes + 20, "probed while out of favour");
    const back = (await send(400)) / 400;
    assert.ok(back > 0.25, `the recovered node got ${(back * 100).toFixed(1)}% of the calls`);
  });
});

describe("data plane: network pool served head", () => {
  it("never goes back while the nodes' heads do, follows a chain that started again", async () => {
    const a = await new Node().start();
    const p = new NetworkPool(record([{ id: "a", node: a }]), BASE, new NoopMetrics());
    try {
      assert.equal(p.servedHead(), -1);
      a.head = 5000;
      await p.healthCheck();
      assert.equal(p.servedHead(), 5000);
      a.head = 4998; // a lagging answer (another node, a breaker opening on the one ahead)
      await p.healthCheck();
      assert.equal(p.servedHead(), 5000);
      p.observeHead(5001); // seen in an answer
      assert.equal(p.servedHead(), 5001);
      a.head = 3; // far below (HEAD_OUTLIER_BLOCKS): a development chain reset, not a lag
      await p.healthCheck();
      assert.equal(p.servedHead(), 3);
    } finally {
      await p.close();
      await a.stop();
    }
  });
});

describe("data plane: network pool hedged reads", function () {
  this.timeout(30_000);
  let slow: Node;
  let fast: Node;
  let pool: NetworkPool;
  let metrics: SeenMetrics;

  beforeEach(async () => {
    slow = await new Node().start();
    fast = await new Node().start();
    metrics = new SeenMetrics();
  });

  afterEach(async () => {
    await pool?.close();
    await slow.stop();
    await fast.stop();
  });

  /** The slow node carries weight 1000 to 1: nearly every call goes to it first. */
  const makePool = (opts: Partial<PoolOptions> = {}) => {
    pool = new NetworkPool(
      record([
        { id: "slow", node: slow, weight: 1000 },
        { id: "fast", node: fast, weight: 1 },
      ]),
      { ...BASE, ...opts },
      metrics,
    );
    return pool;
  };

  it("a read the first node is slow on is answered by the copy on the other node; the loser is cancelled and not held against it", async () => {
    // The slow node holds reads past the test's own timeout: that every call is answered at all proves the
    // copies on the other node served them, with no bound on elapsed time.
    slow.delayMs = () => 120_000;
    const p = makePool();
    const rs = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        p.call({ method: "eth_call", params: [{ data: `0x0${i}` }, "latest"] }),
      ),
    );
    for (const r of rs) {
      assert.ok(r.ok && r.reply.kind === ReplyKind.Result);
      assert.match(r.reply.tail, /"method":"eth_call"/);
    }
    const viaSlow = slow.count("eth_call");
    assert.ok(viaSlow >= 1, "the slow node got first copies");
    assert.equal(metrics.hedgeCount("won"), viaSlow, "every call the slow node had first was won by a copy");
    assert.equal(fast.count("eth_call"), 6, "the fast node answered every call (copies and direct)");
    // The loser is cancelled: undici aborts its request (the node sees the connection close unanswered),
    // its in-flight count is released and it is no breaker failure nor an error.
    const cancelled = metrics.outcomes.filter((o) => o.upstream === "slow" && o.outcome === "cancelled");
    assert.equal(cancelled.length, viaSlow);
    await waitFor(() => slow.abortedBeforeAnswer === viaSlow, "the slow node saw its exchanges aborted");
    const s = p.describe().find((u) => u.id === "slow")!;
    assert.equal(s.inFlight, 0);
    assert.equal(s.breakerOpen, false);
    const up = (
      p as unknown as { upstreams: { id: string; consecutiveFailures: number; errorRateEwma: number }[] }
    ).upstreams;
    const su = up.find((u) => u.id === "slow")!;
    assert.equal(su.consecutiveFailures, 0);
    assert.equal(su.errorRateEwma, 0);
  });

  it("a fast first answer cancels nothing and sends no copy", async () => {
    // A delay far above a loopback answer, so that a loaded machine does not make a copy go out.
    const p = makePool({ hedge: { enabled: true, minDelayMs: 500, maxDelayMs: 500, maxPercent: 100 } });
    for (let i = 0; i < 10; i++) {
      const r = await p.call({ method: "eth_getBalance", params: ["0x01", "latest"] });
      assert.ok(r.ok);
    }
    assert.deepEqual(metrics.hedges, []);
    assert.equal(slow.count("eth_getBalance") + fast.count("eth_getBalance"), 10);
  });

  it("never hedges sends, filters or heavy calls: each reaches one node exactly once", async () => {
    slow.delayMs = () => 300;
    fast.delayMs = () => 300;
    const p = makePool();
    const methods = [
      "eth_sendRawTransaction",
      "eth_sendTransaction",
      "author_submitExtrinsic",
      "eth_getFilterChanges",
      "eth_getLogs",
      "debug_traceTransaction",
    ];
    await Promise.all(methods.map((method) => p.call({ method, params: ["0x01"] })));
    for (const m of methods) assert.equal(slow.count(m) + fast.count(m), 1, m);
    assert.deepEqual(metrics.hedges, []);
  });

  it("hedges coalesced batches and callBatch chunks as one exchange each", async () => {
    slow.delayMs = () => 1_500;
    const p = makePool({ coalesceMax: 20 });
    const started = performance.now();
    const [coalesced, batch] = await Promise.all([
      Promise.all(
        Array.from({ length: 5 }, (_, i) => p.call({ method: "eth_getBalance", params: [`0x0${i}`] })),
      ),
      p.callBatch(
        Array.from({ length: 5 }, (_, i) => ({ method: "eth_call", params: [{ data: `0x${i}` }] })),
      ),
    ]);
    assert.ok(performance.now() - started < 1_200);
    for (const r of [...coalesced, ...batch]) assert.ok(r.ok && r.reply.kind === ReplyKind.Result);
    assert.ok(metrics.hedgeCount("won") >= 1);
    // A batch with a send in it is never hedged.
    metrics.hedges.length = 0;
    slow.delayMs = () => 200;
    fast.delayMs = () => 200;
    await p.callBatch([
      { method: "eth_getBalance", params: ["0x1"] },
      { method: "eth_sendRawTransaction", params: ["0x02"] },
    ]);
    assert.equal(slow.count("eth_sendRawTransaction") + fast.count("eth_sendRawTransaction"), 1);
    assert.deepEqual(metrics.hedges, []);
  });

  it("HEDGE_MAX_PERCENT caps copies: past the burst, the slow answers are waited for", async () => {
    slow.delayMs = () => 100;
    const p = makePool({ hedge: { enabled: true, minDelayMs: 10, maxDelayMs: 10, maxPercent: 1 } });
    await Promise.all(
      Array.from({ length: 30 }, (_, i) => p.call({ method: "eth_call", params: [`0x${i}`] })),
    );
    const sent = metrics.hedgeCount("won") + metrics.hedgeCount("lost");
    assert.equal(sent, 10, "the burst of HEDGE_BURST; 30 exchanges at 1% earn no more");
    assert.equal(metrics.hedgeCount("capped"), 20, "every other call waited for the slow node");
  });

  it("HEDGE_ENABLED=false: the slow node's answers are waited for", async () => {
    slow.delayMs = () => 200;
    const p = makePool({ hedge: { enabled: false, minDelayMs: 10, maxDelayMs: 10, maxPercent: 100 } });
    const rs = await Promise.all(Array.from({ length: 4 }, () => p.call({ method: "eth_call", params: [] })));
    for (const r of rs) assert.ok(r.ok);
    assert.deepEqual(metrics.hedges, []);
    assert.equal(slow.count("eth_call") + fast.count("eth_call"), 4);
  });

  it("the first node failing while the copy is in flight: the copy's answer is used; both failing: failover goes on elsewhere", async () => {
    slow.delayMs = () => 1_000;
    const p = makePool();
    const r = await p.call({ method: "eth_call", params: ["x"] });
    assert.ok(r.ok);
    // Now the fast node is gone too: the copy fails at once, the slow node's answer still comes.
    await fast.stop();
    slow.delayMs = () => 100;
    const again = await p.call({ method: "eth_call", params: ["y"] });
    assert.ok(again.ok, JSON.stringify(again));
  });
});

/**
 * A node in its own process (so it answers while this one is busy) that answers eth_call after `delay` ms
 * and appends one byte to `log` once each answer is handed to the kernel: this process can then tell,
 * synchronously, that the answers are waiting in its sockets.
 */
const LOGGING_NODE = `
const fs = require("node:fs");
const [port, log, delay] = process.argv.slice(1);
require("node:http").createServer((req, res) => {
  let body = "";
  req.on("data", (d) => { body += d; });
  req.on("end", () => {
    const call = JSON.parse(body);
    setTimeout(() => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: call.id, result: "0x1" }), () => fs.appendFileSync(log, "x"));
    }, call.method === "eth_call" ? Number(delay) : 0);
  });
}).listen(Number(port), "127.0.0.1", () => console.log("listening on " + port));
`;

describe("data plane: network pool hedged reads after an event-loop stall", function () {
  this.timeout(30_000);
  const nodes: StartedProcess[] = [];
  const urls: string[] = [];
  const logs: string[] = [];
  let dir = "";

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "hedge-stall-"));
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      const log = join(dir, `answers-${i}`);
      writeFileSync(log, "");
      nodes.push(
        await startProcess(process.execPath, ["-e", LOGGING_NODE, String(port), log, "100"], {
          readyLine: /listening on \d+/,
        }),
      );
      urls.push(`http://127.0.0.1:${port}`);
      logs.push(log);
    }
  });
  after(async () => {
    for (const n of nodes) await n.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const answered = () => logs.reduce((n, f) => n + statSync(f).size, 0);

  it("sends no copy of a call whose answer arrived while the event loop was busy past the delay", async () => {
    const metrics = new SeenMetrics();
    const pool = new NetworkPool(
      {
        slug: "eth",
        name: "eth",
        protocol: "EVM",
        chainId: 1,
        allowDebug: false,
        upstreams: urls.map((url, i) => ({ id: `n${i}`, httpUrl: url, wsUrl: null, weight: 1 })),
      },
      { ...BASE, hedge: { enabled: true, minDelayMs: 200, maxDelayMs: 200, maxPercent: 100 } },
      metrics,
    );
    try {
      // Open the connections first.
      await Promise.all(Array.from({ length: 4 }, () => pool.call({ method: "eth_chainId", params: [] })));
      for (let round = 0; round < 3; round++) {
        await new Promise((r) => setTimeout(r, 50)); // the last round's log writes are done
        const before = answered();
        const sent = performance.now();
        const pending = Promise.all(
          Array.from({ length: 4 }, (_, i) => pool.call({ method: "eth_call", params: [`0x${round}${i}`] })),
        );
        // The requests go out (the nodes answer after 100 ms); then busy, with no event loop, until the nodes
        // have answered all 4 and the 200 ms hedge delays have expired.
        await new Promise((r) => setTimeout(r, 30));
        // Spin in the check phase, so that the next loop turn starts with the timers phase, as after a
        // stall in an I/O callback or a GC pause (a spin in the timers phase would be followed by poll).
        await new Promise((r) => setImmediate(r));
        const deadline = performance.now() + 5_000;
        while (answered() < before + 4 || performance.now() - sent < 220) {
          if (performance.now() > deadline) {
            assert.fail(`round ${round}: ${answered() - before} of 4 answers within 5 s`);
          }
        }
        const settle = performance.now() + 10; // loopback delivery
        while (performance.now() < settle) {
          // spin
        }
        for (const r of await pending) assert.ok(r.ok);
      }
      // Timers run before I/O in a loop turn: without deferring the decision, each of these 12 calls
      // would get a copy although its answer was already waiting.
      assert.deepEqual(metrics.hedges, [], "every answer was read before a copy was decided");
    } finally {
      await pool.close();
    }
  });
});

describe("data plane: network pool coalescing of sampled calls", function () {
  this.timeout(30_000);
  let node: Node;
  let pool: NetworkPool;

  beforeEach(async () => {
    node = await new Node().start();
  });

  afterEach(async () => {
    await pool?.close();
    await node.stop();
  });

  /** A sampled call's upstream span that records what the pool tells it. */
  const span = (n: number) => {
    const told: { size: number; sent: string }[] = [];
    return {
      told,
      traceparent: `00-${String(n).repeat(32)}-${String(n).repeat(16)}-01`,
      coalesced: (size: number, sent: string) => {
        told.push({ size, sent });
      },
    };
  };

  it("sampled calls join a coalesced batch, which carries the first one's traceparent; each is told", async () => {
    pool = new NetworkPool(
      record([{ id: "n", node }]),
      { ...BASE, hedge: undefined, coalesceMax: 20 },
      new SeenMetrics(),
    );
    const a = span(1);
    const b = span(2);
    const results = await Promise.all([
      pool.call({ method: "eth_getBalance", params: ["0x01", "latest"] }),
      pool.call({ method: "eth_getBalance", params: ["0x02", "latest"], span: a }),
      pool.call({ method: "eth_getBalance", params: ["0x03", "latest"] }),
      pool.call({ method: "eth_getBalance", params: ["0x04", "latest"], span: b }),
    ]);
    results.forEach((r, i) => {
      assert.ok(r.ok && r.reply.kind === ReplyKind.Result, JSON.stringify(r));
      assert.ok(r.reply.tail.includes(`"0x0${i + 1}"`), r.reply.tail);
    });
    assert.deepEqual(node.traced, [{ traceparent: a.traceparent, methods: Array(4).fill("eth_getBalance") }]);
    assert.deepEqual(a.told, [{ size: 4, sent: a.traceparent }]);
    assert.deepEqual(
      b.told,
      [{ size: 4, sent: a.traceparent }],
      "b's span learns which traceparent went out",
    );
  });

  it("a sampled call alone goes out alone with its own traceparent; an unsampled batch carries none", async () => {
    pool = new NetworkPool(
      record([{ id: "n", node }]),
      { ...BASE, hedge: undefined, coalesceMax: 20 },
      new SeenMetrics(),
    );
    const a = span(3);
    const r = await pool.call({ method: "eth_getBalance", params: ["0x01", "latest"], span: a });
    assert.ok(r.ok);
    await Promise.all([
      pool.call({ method: "eth_getBalance", params: ["0x02", "latest"] }),
      pool.call({ method: "eth_getBalance", params: ["0x03", "latest"] }),
    ]);
    assert.deepEqual(node.traced, [
      { traceparent: a.traceparent, methods: ["eth_getBalance"] },
      { traceparent: "", methods: ["eth_getBalance", "eth_getBalance"] },
    ]);
    assert.deepEqual(a.told, [], "not coalesced");
  });
});

describe("data plane: network pool empty answers and head integrity", function () {
  this.timeout(30_000);
  let lagging: Node;
  let ahead: Node;
  let pool: NetworkPool;
  let metrics: SeenMetrics;

  beforeEach(async () => {
    lagging = await new Node().start();
    ahead = await new Node().start();
    metrics = new SeenMetrics();
  });

  afterEach(async () => {
    await pool?.close();
    await lagging.stop();
    await ahead.stop();
  });

  const makePool = (opts: Partial<PoolOptions> = {}) => {
    pool = new NetworkPool(
      record([
        { id: "lagging", node: lagging, weight: 1000 },
        { id: "ahead", node: ahead, weight: 1 },
      ]),
      { ...BASE, hedge: undefined, maxLagBlocks: 100, ...opts },
      metrics,
    );
    return pool;
  };

  it("a null for a block above the answering node's head is asked again on the node that has it", async () => {
    lagging.head = 100;
    ahead.head = 150;
    // The lagging node has nothing above its head; the other one has everything up to its head.
    lagging.nullFor = (c) =>
      blockArg(c) > lagging.head || c.method.includes("Hash") || c.method.includes("Receipt");
    ahead.nullFor = (c) => blockArg(c) > ahead.head;
    const p = makePool();
    await p.healthCheck();
    for (const method of [
      "eth_getBlockByNumber",
      "eth_getBlockReceipts",
      "eth_getTransactionByBlockNumberAndIndex",
    ]) {
      const r = await p.call({ method, params: ["0x8c", "0x0"] }); // block 140
      assert.ok(r.ok && r.reply.kind === ReplyKind.Result, `${method}: ${JSON.stringify(r)}`);
    }
    // By hash: the other node's head is above this one's, so it may know the block or transaction.
    for (const method of ["eth_getBlockByHash", "eth_getTransactionByHash", "eth_getTransactionReceipt"]) {
      const r = await p.call({ method, params: [HASH] });
      assert.ok(r.ok && r.reply.kind === ReplyKind.Result, `${method}: ${JSON.stringify(r)}`);
    }
    assert.ok(metrics.emptyRetries.length >= 1 && metrics.emptyRetries.every((o) => o === "found"));
    // Inside a batch too (the lagging node answers the chunk; its null element is asked again).
    const [a, b] = await p.callBatch([
      { method: "eth_getBlockByNumber", params: ["0x8c", false] },
      { method: "eth_chainId", params: [] },
    ]);
    assert.ok(a!.ok && a!.reply.kind === ReplyKind.Result, JSON.stringify(a));
    assert.ok(b!.ok && b!.reply.kind === ReplyKind.Result);
  });

  it("a null no other node can improve on is returned as it is, without a second call", async () => {
    lagging.head = 100;
    ahead.head = 100;
    lagging.nullFor = () => true;
    ahead.nullFor = () => true;
    const p = makePool();
    await p.healthCheck();
    const cases: [string, unknown[]][] = [
      ["eth_getBlockByNumber", ["0xc8", false]], // block 200: above every head
      ["eth_getTransactionReceipt", [HASH]], // same heads: a pending or unknown transaction
      ["eth_getBlockByNumber", ["latest", false]],
      ["stub_null", []],
    ];
    for (const [method, params] of cases) {
      const before = lagging.exchanges + ahead.exchanges;
      const r = await p.call({ method, params });
      assert.ok(r.ok && r.reply.kind === ReplyKind.NullResult, method);
      assert.equal(lagging.exchanges + ahead.exchanges - before, 1, `${method}: one exchange`);
    }
    assert.deepEqual(metrics.emptyRetries, []);
  });

  it("a head far above the others (HEAD_OUTLIER_BLOCKS) does not set the network head or attract retries", async () => {
    const third = await new Node().start();
    try {
      lagging.head = 1_000_000_000; // the liar
      ahead.head = 120;
      third.head = 118;
      pool = new NetworkPool(
        record([
          { id: "liar", node: lagging },
          { id: "ahead", node: ahead },
          { id: "third", node: third },
        ]),
        { ...BASE, hedge: undefined, headOutlierBlocks: 1000 },
        metrics,
      );
      await pool.healthCheck();
      assert.equal(pool.bestHead(), 120);
      assert.equal(pool.healthyCount(), 3, "honest nodes are not 'lagging' behind the liar");
      assert.equal(pool.cacheHead(), 120);
      pool.observeHead(5000);
      assert.equal(pool.cacheHead(), 120, "an answer's head far above the network head is ignored too");
      // Block 119: `third` (head 118) and the liar answer null and are asked again on `ahead` (120), never
      // on the liar, whose head is believed by nobody (it would answer null again: an `empty` retry).
      third.nullFor = (c) => blockArg(c) > third.head;
      ahead.nullFor = (c) => blockArg(c) > ahead.head;
      lagging.nullFor = () => true;
      let found = 0;
      for (let i = 0; i < 30; i++) {
        const r = await pool.call({ method: "eth_getBlockByNumber", params: ["0x77", false] });
        if (r.ok && r.reply.kind === ReplyKind.Result) found++;
      }
      assert.equal(found, 30);
      assert.ok(metrics.emptyRetries.length >= 1);
      assert.ok(
        metrics.emptyRetries.every((o) => o === "found"),
        metrics.emptyRetries.join(),
      );
      assert.equal(
        metrics.emptyRetries.length,
        third.count("eth_getBlockByNumber") + lagging.count("eth_getBlockByNumber"),
        "one retry per null, each on `ahead`",
      );
      // Without the liar's vote the single-upstream rule applies: one node is trusted.
      const solo = new NetworkPool(record([{ id: "liar", node: lagging }]), BASE, metrics);
      await solo.healthCheck();
      assert.equal(solo.bestHead(), 1_000_000_000);
      await solo.close();
    } finally {
      await third.stop();
    }
  });
});

function blockArg(c: Call): number {
  const p = (c.params as unknown[] | undefined)?.[0];
  return typeof p === "string" && /^0x[0-9a-f]+$/i.test(p) && p.length < 20 ? Number.parseInt(p, 16) : -1;
}

async function waitFor(cond: () => boolean, what: string, ms = 3_000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) assert.fail(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
