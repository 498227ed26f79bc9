import assert from "node:assert/strict";
import type { NetworkRecord, UpstreamRecord } from "../../../shared/src/redis/records";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { freePort } from "../../helpers/ports";
import { type SubstrateTestNode, startSubstrateTestNode } from "../../substrate-node";
import { type Gateway, post, startGateway } from "./harness";
import { TestWsClient } from "./ws/ws-client";

/**
 * Routing by what each upstream can serve (issue 14 §2), against two real anvil nodes on the same chain
 * state: one archive (anvil's default keeps every state), one started with `--prune-history 10` (keeps
 * about ten). The gateway's state probe finds which is which; old-state reads must only ever reach the
 * archive one.
 */

const DEV = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"; // anvil's first dev account (unlocked)
const X = "0x00000000000000000000000000000000000000aa";
const ONE_ETH = "0xde0b6b3a7640000";
/** Blocks mined after the transfer in block 1. */
const MINED = 40;

async function rpc(url: string, method: string, params: unknown[] = []) {
  return post(url, { jsonrpc: "2.0", id: 1, method, params });
}

/** The same chain state on both nodes: 1 ETH to X in block 1, then MINED empty blocks. */
async function prepare(node: Anvil): Promise<void> {
  const tx = await rpc(node.httpUrl, "eth_sendTransaction", [{ from: DEV, to: X, value: ONE_ETH }]);
  assert.equal(typeof tx.json.result, "string", tx.text);
  const mined = await rpc(node.httpUrl, "anvil_mine", [`0x${MINED.toString(16)}`]);
  assert.equal(mined.json.error, undefined, mined.text);
}

function network(
  slug: string,
  upstreams: (Partial<UpstreamRecord> & { id: string; httpUrl: string })[],
  allowDebug = false,
): NetworkRecord {
  return {
    slug,
    name: slug,
    protocol: "EVM",
    chainId: 31337,
    allowDebug,
    upstreams: upstreams.map((u) => ({ wsUrl: null, weight: 100, ...u })),
  };
}

/** Upstream exchanges per upstream of a network so far (every outcome), from /metrics. */
async function exchanges(gw: Gateway, slug: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${gw.metricsBase}/metrics`)).text();
  const out: Record<string, number> = {};
  const re = new RegExp(
    `^rpcgw_upstream_requests_total\\{network="${slug}",upstream="([^"]+)",outcome="[a-z]+"\\} (\\d+)$`,
    "gm",
  );
  for (const m of text.matchAll(re)) out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
  return out;
}

async function metric(gw: Gateway, line: RegExp): Promise<number> {
  const text = await (await fetch(`${gw.metricsBase}/metrics`)).text();
  const m = text.match(line);
  return m === null ? 0 : Number(m[1]);
}

describe("data plane: routing by what each upstream can serve (real anvil archive + pruned)", function () {
  this.timeout(120_000);
  let archive: Anvil;
  let pruned: Anvil;
  let gw: Gateway;
  let key: string;
  const url = (slug: string) => `${gw.base}/${slug}/rpc?apikey=${key}`;
  const pool = (slug: string) => gw.plane.context.upstreams.get(slug)!;
  const describeOf = (slug: string, id: string) =>
    pool(slug)
      .describe()
      .find((u) => u.id === id)!;

  before(async () => {
    [archive, pruned] = await Promise.all([startAnvil(), startAnvil({ args: ["--prune-history", "10"] })]);
    await prepare(archive);
    await prepare(pruned);
    gw = await startGateway(
      {
        CACHE_MAX_BYTES: "0",
        // Exchanges are counted exactly here: on a loaded machine a read slower than the hedge delay would
        // add a copy (hedging has its own suite, upstream-reads.test.ts).
        HEDGE_ENABLED: "false",
        // Re-probed during the suite too, so the steady-state probe (with a guess) runs.
        UPSTREAM_STATE_PROBE_INTERVAL_MS: "1000",
      },
      async (s) => {
        await s.putNetwork(
          network("eth", [
            { id: "archive", httpUrl: archive.httpUrl },
            { id: "pruned", httpUrl: pruned.httpUrl },
          ]),
        );
        await s.putNetwork(network("pruned-only", [{ id: "pruned", httpUrl: pruned.httpUrl }]));
        await s.putNetwork(
          network(
            "fam",
            [
              { id: "archive", httpUrl: archive.httpUrl, methodFamilies: ["debug"] },
              { id: "pruned", httpUrl: pruned.httpUrl },
            ],
            true,
          ),
        );
        await s.putNetwork(
          network("budget", [
            { id: "archive", httpUrl: archive.httpUrl, maxRequestsPerSecond: 5 },
            { id: "pruned", httpUrl: pruned.httpUrl },
          ]),
        );
        await s.putNetwork(
          network("budget-only", [{ id: "archive", httpUrl: archive.httpUrl, maxRequestsPerSecond: 1 }]),
        );
        key = await s.putKey();
      },
    );
    await eventually(
      () =>
        ["eth", "pruned-only", "fam", "budget"].every((slug) =>
          pool(slug)
            .describe()
            .every((u) => (u.id === "archive" ? u.oldestStateBlock === 0 : u.oldestStateBlock > 0)),
        ),
      "the state probes",
      15_000,
    );
  });

  after(async () => {
    await gw?.stop();
    await archive?.stop();
    await pruned?.stop();
  });

  it("the pruned anvil really refuses old state, the archive one serves it (same chain state)", async () => {
    const old = await rpc(pruned.httpUrl, "eth_getBalance", [X, "0x1"]);
    assert.ok(old.json.error, `pruned anvil answered ${old.text}`);
    assert.equal((await rpc(archive.httpUrl, "eth_getBalance", [X, "0x1"])).json.result, ONE_ETH);
    for (const node of [archive, pruned]) {
      assert.equal((await rpc(node.httpUrl, "eth_getBalance", [X, "latest"])).json.result, ONE_ETH);
      assert.equal((await rpc(node.httpUrl, "eth_blockNumber")).json.result, `0x${(MINED + 1).toString(16)}`);
    }
    // What the probe found: the pruned node keeps about ten states below its head (41), plus the margin.
    const p = describeOf("eth", "pruned");
    assert.ok(p.oldestStateBlock >= 30 && p.oldestStateBlock <= 41, `pruned oldest ${p.oldestStateBlock}`);
    assert.equal(describeOf("eth", "archive").oldestStateBlock, 0);
    const gauge = await metric(
      gw,
      /rpcgw_upstream_oldest_state_block\{network="eth",upstream="pruned"\} (\d+)/,
    );
    assert.equal(gauge, p.oldestStateBlock);
  });

  it("an eth_getBalance at an old block always succeeds through the gateway (HTTP, batches, WebSocket)", async () => {
    const before = await exchanges(gw, "eth");
    // Concurrent: coalesced into upstream batches, which must go to the archive node too.
    const singles = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        rpc(url("eth"), "eth_getBalance", [
          X,
          i % 3 === 0 ? "0x1" : i % 3 === 1 ? "earliest" : { blockNumber: "0x5" },
        ]),
      ),
    );
    for (const [i, r] of singles.entries()) {
      assert.equal(r.status, 200);
      assert.equal(r.json.result, i % 3 === 1 ? "0x0" : ONE_ETH, `call ${i}: ${r.text}`);
    }
    // Sequential too (each its own exchange): 40 coin flips, had selection ignored capabilities.
    for (let i = 0; i < 40; i++) {
      const r = await rpc(url("eth"), "eth_getBalance", [X, "0x2"]);
      assert.equal(r.json.result, ONE_ETH, r.text);
    }
    const ws = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`);
    try {
      for (let i = 0; i < 10; i++) {
        const r = await ws.call("eth_getBalance", [X, "0x3"]);
        assert.equal(r.result, ONE_ETH, JSON.stringify(r));
      }
    } finally {
      ws.close();
    }
    const after = await exchanges(gw, "eth");
    assert.equal(after.pruned ?? 0, before.pruned ?? 0, "nothing went to the pruned node");
    assert.ok((after.archive ?? 0) > (before.archive ?? 0));
    // A batch mixing old-state and latest elements: the old ones to the archive node (the others anywhere).
    const batch = await post(
      url("eth"),
      Array.from({ length: 30 }, (_, i) => ({
        jsonrpc: "2.0",
        id: i,
        method: "eth_getBalance",
        params: [X, i % 2 === 0 ? "0x1" : "latest"],
      })),
    );
    assert.equal(batch.status, 200);
    for (const el of batch.json) assert.equal(el.result, ONE_ETH, JSON.stringify(el));
    const routed = await metric(
      gw,
      /rpcgw_capability_routing_total\{network="eth",need="state",outcome="routed"\} (\d+)/,
    );
    // Every call above with a block below the head: 60 + 40 + 15 (the batch's 0x1 elements) + 10.
    assert.equal(routed, 125);
  });

  it("recent reads (latest, or the head's number) use both upstreams", async () => {
    // Both nodes serve these, so latency decides between them (selector.test.ts), and on a busy host the
    // probes can read one anvil slower than the other for a while: sequential calls then all go to the
    // other. So reads are sent, 20 at a time, until each node has served five; a recent read routed as an
    // old one (to the archive only) never would, and every exchange is one call.
    const before = await exchanges(gw, "eth");
    const head = `0x${(MINED + 1).toString(16)}`;
    let sent = 0;
    await eventually(
      async () => {
        for (let i = 0; i < 20; i++, sent++) {
          const r = await rpc(url("eth"), "eth_getBalance", [X, sent % 2 === 0 ? "latest" : head]);
          assert.equal(r.json.result, ONE_ETH, r.text);
        }
        const after = await exchanges(gw, "eth");
        const a = (after.archive ?? 0) - (before.archive ?? 0);
        const p = (after.pruned ?? 0) - (before.pruned ?? 0);
        assert.equal(a + p, sent);
        return a >= 5 && p >= 5;
      },
      "both upstreams serving recent reads",
      60_000,
      0,
    );
  });

  it("when no upstream keeps the state: a clear error, no breaker count, other calls still served", async () => {
    for (let i = 0; i < 10; i++) {
      const r = await rpc(url("pruned-only"), "eth_getBalance", [X, "0x1"]);
      assert.equal(r.status, 200);
      assert.equal(r.json.error.code, -32000);
      assert.equal(r.json.error.data.reason, "no_capable_upstream");
      assert.match(
        r.json.error.message,
        /^No upstream node of this network can serve this call: no upstream serves the state at block 0x1 \(oldest available 0x[0-9a-f]+\)$/,
      );
    }
    const p = describeOf("pruned-only", "pruned");
    assert.equal(p.breakerOpen, false);
    assert.equal(
      await metric(
        gw,
        /rpcgw_upstream_breaker_opens_total\{network="pruned-only",upstream="pruned",cause="[a-z_]+"\} (\d+)/,
      ),
      0,
    );
    const batch = await post(url("pruned-only"), [
      { jsonrpc: "2.0", id: 1, method: "eth_getBalance", params: [X, "0x1"] },
      { jsonrpc: "2.0", id: 2, method: "eth_getBalance", params: [X, "latest"] },
    ]);
    assert.equal(batch.json[0].error.data.reason, "no_capable_upstream");
    assert.equal(batch.json[1].result, ONE_ETH);
    assert.equal((await rpc(url("pruned-only"), "eth_getBalance", [X, "latest"])).json.result, ONE_ETH);
    assert.equal(
      await metric(
        gw,
        /rpcgw_capability_routing_total\{network="pruned-only",need="state",outcome="refused"\} (\d+)/,
      ),
      11,
    );
    // Counted as the node-error category on the dashboard's request counter.
    assert.ok(
      (await metric(gw, /rpcgw_requests_total\{network="pruned-only",category="Node Error"\} (\d+)/)) >= 10,
    );
  });

  it("method families: debug_* only to the upstream declaring it; trace_* refused until one does (live edit)", async () => {
    const before = await exchanges(gw, "fam");
    const call = { from: DEV, to: X, value: "0x1" };
    for (let i = 0; i < 30; i++) {
      const r = await rpc(url("fam"), "debug_traceCall", [call, "latest", {}]);
      assert.equal(r.json.result?.failed, false, r.text);
    }
    const after = await exchanges(gw, "fam");
    assert.equal((after.pruned ?? 0) - (before.pruned ?? 0), 0);
    assert.equal((after.archive ?? 0) - (before.archive ?? 0), 30);

    const refused = await rpc(url("fam"), "trace_block", ["latest"]);
    assert.equal(refused.json.error.data.reason, "no_capable_upstream");
    assert.match(refused.json.error.message, /it needs trace_\*, which no upstream serves/);

    await gw.seeder.putNetwork(
      network(
        "fam",
        [
          { id: "archive", httpUrl: archive.httpUrl, methodFamilies: ["debug"] },
          { id: "pruned", httpUrl: pruned.httpUrl, methodFamilies: ["trace"] },
        ],
        true,
      ),
    );
    await gw.seeder.publish({ type: "networks.update" });
    await eventually(() => describeOf("fam", "pruned").methodFamilies.includes("trace"), "the edit", 15_000);
    // The pool kept the upstream (and what was probed): an edit is no restart.
    assert.ok(describeOf("fam", "pruned").oldestStateBlock > 0);
    const mid = await exchanges(gw, "fam");
    for (let i = 0; i < 10; i++) {
      const r = await rpc(url("fam"), "trace_block", ["latest"]);
      assert.deepEqual(r.json.result, [], r.text);
    }
    const end = await exchanges(gw, "fam");
    assert.equal((end.pruned ?? 0) - (mid.pruned ?? 0), 10);
    // A trace of an old block needs the old state AND trace_*: the pruned node has one, not the other.
    const old = await rpc(url("fam"), "trace_block", ["0x2"]);
    assert.equal(old.json.error.data.reason, "no_capable_upstream", old.text);
    assert.match(old.json.error.message, /state at block 0x1/);
  });

  it("over its budget an upstream goes last, and still serves when nothing else can", async () => {
    const before = await exchanges(gw, "budget");
    const start = Date.now();
    for (let i = 0; i < 100; i++) {
      const r = await rpc(url("budget"), "eth_chainId");
      assert.equal(r.json.result, "0x7a69", r.text);
    }
    const seconds = (Date.now() - start) / 1000;
    const after = await exchanges(gw, "budget");
    const a = (after.archive ?? 0) - (before.archive ?? 0);
    const p = (after.pruned ?? 0) - (before.pruned ?? 0);
    assert.equal(a + p, 100);
    // 5 requests of burst, then 5 per second (plus one for rounding at the edges).
    assert.ok(
      a <= 5 + Math.ceil(5 * seconds) + 1,
      `archive (budget 5/s) got ${a} in ${seconds.toFixed(2)} s`,
    );
    assert.ok(a >= 1, "the budgeted upstream still gets its share");
    assert.equal(describeOf("budget", "archive").maxRequestsPerSecond, 5);

    for (let i = 0; i < 20; i++) {
      const r = await rpc(url("budget-only"), "eth_chainId");
      assert.equal(r.json.result, "0x7a69", r.text);
    }
    const over = await metric(
      gw,
      /rpcgw_upstream_over_budget_requests_total\{network="budget-only",upstream="archive"\} (\d+)/,
    );
    assert.ok(over >= 15, `sent past the budget: ${over}`);
  });
});

describe("data plane: the state probe on Substrate (substrate test node, --state-pruning)", function () {
  this.timeout(60_000);
  let full: SubstrateTestNode;
  let prunedNode: SubstrateTestNode;
  let gw: Gateway;

  before(async () => {
    const opts = { blockTimeMs: 0, rpcMethods: "Unsafe" as const, finalityLag: 2 };
    full = await startSubstrateTestNode({ ...opts, port: await freePort() });
    prunedNode = await startSubstrateTestNode({ ...opts, port: await freePort(), statePruning: 16 });
    full.produceBlocks(100);
    prunedNode.produceBlocks(100);
    gw = await startGateway({ UPSTREAM_STATE_PROBE_INTERVAL_MS: "1000" }, async (s) => {
      await s.putNetwork({
        slug: "dot",
        name: "dot",
        protocol: "SUBSTRATE",
        chainId: null,
        allowDebug: false,
        upstreams: [
          { id: "full", httpUrl: full.httpUrl, wsUrl: null, weight: 1 },
          { id: "pruned", httpUrl: prunedNode.httpUrl, wsUrl: null, weight: 1 },
        ],
      });
      await s.putKey();
    });
  });

  after(async () => {
    await gw?.stop();
    await full?.close();
    await prunedNode?.close();
  });

  it("finds the full node's history from block 0 and the pruned node's window", async () => {
    const storage = async (node: SubstrateTestNode, n: number) => {
      const hash = (await rpc(node.httpUrl, "chain_getBlockHash", [n])).json.result;
      const key = "0x26aa394eea5630e07c48ae0c9558cef702a5c1b19ab7a04f536c519aca4983ac";
      return rpc(node.httpUrl, "state_getStorage", [key, hash]);
    };
    // The stand-in refuses old state as a pruned node does; the full one serves it.
    assert.match((await storage(prunedNode, 5)).json.error.message, /State already discarded/);
    assert.equal((await storage(full, 5)).json.error, undefined);
    const pool = gw.plane.context.upstreams.get("dot")!;
    await eventually(() => pool.describe().every((u) => u.oldestStateBlock >= 0), "the state probe", 15_000);
    const d = Object.fromEntries(pool.describe().map((u) => [u.id, u.oldestStateBlock]));
    assert.equal(d.full, 0);
    // Finalized 98, 16 kept: state from block 83 on; plus the 2-block margin.
    assert.equal(d.pruned, 85);
  });
});
