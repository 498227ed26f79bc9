import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { NoopMetrics } from "../../../../data-plane/src/metrics/metrics";
import { NetworkPool } from "../../../../data-plane/src/upstream/network-pool";
import type { NetworkRecord } from "../../../../shared/src/redis/records";

/**
 * A scripted node on loopback: its head, its finalized head (or a way of not having one) and the hashes
 * of its blocks (a `fork` label changes every hash, as a reorg does), over EVM or Substrate methods.
 */
class ScriptedNode {
  head = 100;
  /** A height, or how the node fails the finalized read. */
  finalized: number | "rpc-error" | "http500" | "null" = 36;
  fork = "a";
  /** Answer the health probe (eth_blockNumber) with HTTP 500. */
  failProbe = false;
  readonly calls = new Map<string, number>();
  url = "";
  private server: Server | undefined;

  hash(n: number): string {
    return `0x${Buffer.from(`${this.fork}:${n}`).toString("hex").padEnd(64, "0")}`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString();
      });
      req.on("end", () => {
        const r = JSON.parse(body) as { id: number; method: string; params: unknown[] };
        this.calls.set(r.method, (this.calls.get(r.method) ?? 0) + 1);
        if (this.failProbe && r.method === "eth_blockNumber") {
          res.writeHead(500).end("sick");
          return;
        }
        const finalizedRead =
          (r.method === "eth_getBlockByNumber" && r.params[0] === "finalized") ||
          r.method === "chain_getFinalizedHead";
        if (finalizedRead && this.finalized === "http500") {
          res.writeHead(500).end("method not supported");
          return;
        }
        const out = (result: unknown) => res.end(JSON.stringify({ jsonrpc: "2.0", id: r.id, result }));
        if (finalizedRead && this.finalized === "rpc-error") {
          res.end(
            JSON.stringify({ jsonrpc: "2.0", id: r.id, error: { code: -32602, message: "invalid tag" } }),
          );
          return;
        }
        if (finalizedRead && this.finalized === "null") return out(null);
        const hex = (n: number) => `0x${n.toString(16)}`;
        const fin = typeof this.finalized === "number" ? this.finalized : 0;
        switch (r.method) {
          case "eth_blockNumber":
            return out(hex(this.head));
          case "eth_getBlockByNumber": {
            const n = r.params[0] === "finalized" ? fin : Number.parseInt(String(r.params[0]).slice(2), 16);
            return out(n > this.head ? null : { number: hex(n), hash: this.hash(n) });
          }
          case "chain_getHeader": {
            if (r.params[0] === undefined) return out({ number: hex(this.head) });
            return out(r.params[0] === this.hash(fin) ? { number: hex(fin) } : null);
          }
          case "chain_getFinalizedHead":
            return out(this.hash(fin));
          case "chain_getBlockHash":
            return out(this.hash(r.params[0] as number));
          default:
            res.end(JSON.stringify({ jsonrpc: "2.0", id: r.id, error: { code: -32601, message: "no" } }));
        }
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

function record(nodes: ScriptedNode[], protocol: "EVM" | "SUBSTRATE" = "EVM"): NetworkRecord {
  return {
    slug: "net",
    name: "net",
    protocol,
    chainId: protocol === "EVM" ? 1 : null,
    allowDebug: false,
    upstreams: nodes.map((n, i) => ({ id: `n${i}`, httpUrl: n.url, wsUrl: null, weight: 1 })),
  } as NetworkRecord;
}

function pool(rec: NetworkRecord, finality = true) {
  const reorgs: number[] = [];
  const p = new NetworkPool(
    rec,
    {
      timeoutMs: 2000,
      connections: 2,
      breakerThreshold: 2,
      breakerCooldownMs: 60_000,
      maxAttempts: 2,
      maxLagBlocks: 1000,
      coalesceMax: 1,
      finality,
      onReorg: (slug, from) => {
        assert.equal(slug, "net");
        reorgs.push(from);
      },
    },
    new NoopMetrics(),
  );
  return { p, reorgs };
}

describe("data plane: chain watch (finalized head, reorgs)", () => {
  const nodes: ScriptedNode[] = [];
  const node = async () => {
    const n = await new ScriptedNode().start();
    nodes.push(n);
    return n;
  };
  const pools: NetworkPool[] = [];
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.close()));
    await Promise.all(nodes.splice(0).map((n) => n.stop()));
  });

  it("EVM: the network's finalized head is the lowest of its nodes', and never goes back", async () => {
    const a = await node();
    const b = await node();
    b.head = 101;
    b.finalized = 40;
    const { p } = pool(record([a, b]));
    pools.push(p);
    assert.equal(p.finalizedHead(), -1, "unknown before a health round");
    await p.healthCheck();
    assert.equal(p.finalizedHead(), 36);
    assert.deepEqual(
      p.describe().map((u) => u.finalized),
      [36, 40],
    );
    a.finalized = 50;
    b.finalized = 45;
    await p.healthCheck();
    assert.equal(p.finalizedHead(), 45);
    // Both nodes go back (anvil's evm_revert does this): kept.
    a.finalized = 10;
    b.finalized = 10;
    await p.healthCheck();
    assert.equal(p.finalizedHead(), 45);
    assert.deepEqual(
      p.describe().map((u) => u.finalized),
      [50, 45],
      "a node's own finalized head is not lowered either",
    );
  });

  it("a finalized head above the node's own head is not believed", async () => {
    const a = await node();
    a.finalized = 500;
    const { p } = pool(record([a]));
    pools.push(p);
    await p.healthCheck();
    assert.equal(p.finalizedHead(), -1);
    a.finalized = 90;
    await p.healthCheck();
    assert.equal(p.finalizedHead(), 90);
  });

  it("a node without the finalized tag (error, null or HTTP 500) keeps it unknown, and its breaker closed", async () => {
    for (const how of ["rpc-error", "null", "http500"] as const) {
      const a = await node();
      const b = await node();
      b.finalized = how;
      const { p } = pool(record([a, b]));
      pools.push(p);
      for (let i = 0; i < 4; i++) await p.healthCheck();
      assert.equal(p.finalizedHead(), -1, how);
      assert.equal(p.healthyCount(), 2, `${how}: no breaker opened (threshold 2, four rounds)`);
      assert.ok(b.calls.get("eth_getBlockByNumber")! >= 4, "asked again each round");
    }
  });

  it("the same nodes re-applied keep the finalized head; a node added makes the pool learn it afresh", async () => {
    const a = await node();
    const b = await node();
    b.finalized = 20;
    const rec = record([a]);
    const { p } = pool(rec);
    pools.push(p);
    await p.healthCheck();
    assert.equal(p.finalizedHead(), 36);
    p.update({ ...rec });
    assert.equal(p.finalizedHead(), 36);
    // b may be another chain: nothing is assumed of it, and the network's value is the lower one.
    p.update(record([a, b]));
    assert.equal(p.finalizedHead(), -1);
    await p.healthCheck();
    assert.equal(p.finalizedHead(), 20);
  });

  it("a node whose health probe fails is not polled that round", async () => {
    const a = await node();
    const { p } = pool(record([a]));
    pools.push(p);
    await p.healthCheck();
    const polls = a.calls.get("eth_getBlockByNumber")!;
    a.failProbe = true;
    await p.healthCheck();
    assert.equal(a.calls.get("eth_getBlockByNumber"), polls);
    a.failProbe = false;
    await p.healthCheck();
    assert.equal(a.calls.get("eth_getBlockByNumber"), polls + 2, "finalized and head-hash reads");
  });

  it("watch off: no finalized reads at all, finalizedHead() -1, no reorg reports", async () => {
    const a = await node();
    const { p, reorgs } = pool(record([a]), false);
    pools.push(p);
    await p.healthCheck();
    a.head = 90;
    await p.healthCheck();
    assert.equal(p.finalizedHead(), -1);
    assert.equal(a.calls.get("eth_getBlockByNumber"), undefined);
    assert.deepEqual(reorgs, []);
  });

  it("EVM reorgs: the head going back and a new hash at the same height are reported; a head moving up is not", async () => {
    const a = await node();
    const { p, reorgs } = pool(record([a]));
    pools.push(p);
    await p.healthCheck();
    await p.healthCheck();
    assert.deepEqual(reorgs, [], "same head, same hash");
    a.head = 105;
    a.fork = "b"; // a reorg onto a higher branch: old keys are out of reach anyway
    await p.healthCheck();
    assert.deepEqual(reorgs, []);
    a.fork = "c"; // same height, new hash
    await p.healthCheck();
    assert.deepEqual(reorgs, [105]);
    a.head = 103; // rollback
    await p.healthCheck();
    assert.deepEqual(reorgs, [105, 103]);
    await p.healthCheck();
    assert.deepEqual(reorgs, [105, 103], "reported once");
  });

  it("a reorg forgets a head seen in answers at or above it, so the cache head follows the node back", async () => {
    const a = await node();
    const { p } = pool(record([a]));
    pools.push(p);
    await p.healthCheck();
    p.observeHead(102);
    assert.equal(p.cacheHead(), 102);
    a.head = 98;
    await p.healthCheck();
    assert.equal(p.cacheHead(), 98);
  });

  it("Substrate: chain_getFinalizedHead + chain_getHeader(hash); reorgs by chain_getBlockHash(head)", async () => {
    const a = await node();
    a.finalized = 98;
    const { p, reorgs } = pool(record([a], "SUBSTRATE"));
    pools.push(p);
    await p.healthCheck();
    assert.equal(p.finalizedHead(), 98);
    assert.ok(a.calls.get("chain_getFinalizedHead")! >= 1);
    a.fork = "b";
    await p.healthCheck();
    assert.deepEqual(reorgs, [100]);
    a.finalized = 99;
    await p.healthCheck();
    assert.equal(p.finalizedHead(), 99);
  });
});
