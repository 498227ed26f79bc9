import assert from "node:assert/strict";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { evmNetwork } from "../../helpers/seed-redis";
import { type SubstrateTestNode, startSubstrateTestNode } from "../../substrate-node";
import { type Gateway, post, sleep, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";
import { TestWsClient, wsNetwork } from "./ws/ws-client";

/** anvil's first dev account (unlocked: eth_sendTransaction signs for it). */
const DEV = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
/** An address given code that emits LOG1(topic = caller) on any call: CALLER PUSH1 0 PUSH1 0 LOG1 STOP. */
const LOGGER = "0x00000000000000000000000000000000000000b1";

async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const r = await post(url, { jsonrpc: "2.0", id: 1, method, params });
  if (r.json?.error) throw new Error(`${method}: ${JSON.stringify(r.json.error)}`);
  return r.json.result;
}

async function waitFor(what: string, pred: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

async function metric(gw: Gateway, re: RegExp): Promise<number> {
  const text = await (await fetch(`${gw.metricsBase}/metrics`)).text();
  const m = re.exec(text);
  return m === null ? 0 : Number(m[1]);
}

/**
 * The finality-aware cache against real anvil nodes (anvil reports `finalized` = head - 64: two epochs
 * of 32 slots) behind counting proxies, and against the Substrate test node (finalized = best - 2).
 * Per-block entries are given a 10-minute TTL here, so an entry that should be out of reach would be
 * served if it were not: what ends them is the head moving or a reorg drop, not time.
 */
describe("finality-aware cache (anvil, Substrate test node)", function () {
  this.timeout(120_000);
  let anvil: Anvil;
  let stubOn: StubUpstream;
  let stubOff: StubUpstream;
  let node: SubstrateTestNode;
  let gw: Gateway;
  let gwOff: Gateway;
  let key = "";
  let keyOff = "";
  const url = () => `${gw.base}/eth/rpc?apikey=${key}`;
  const dotUrl = () => `${gw.base}/dot/rpc?apikey=${key}`;
  const urlOff = () => `${gwOff.base}/eth/rpc?apikey=${keyOff}`;
  const pool = () => gw.plane.context.upstreams.get("eth")!;
  const call = (u: string, method: string, params: unknown[]) =>
    post(u, { jsonrpc: "2.0", id: 7, method, params });

  /** Mines `n` blocks on anvil and waits until the gateway's cache head has reached the new head. */
  const mine = async (n: number, g: Gateway = gw) => {
    await rpc(anvil.httpUrl, "anvil_mine", [`0x${n.toString(16)}`]);
    const head = Number.parseInt((await rpc(anvil.httpUrl, "eth_blockNumber")) as string, 16);
    await waitFor(`cache head ${head}`, () => g.plane.context.upstreams.get("eth")!.cacheHead() === head);
    return head;
  };

  /**
   * Waits until the chain watch has recorded the hash of the block at `height` (its head-hash read for that
   * height was answered): polls of one node never overlap, so a second read sent means the first is done.
   */
  const watched = (height: number) =>
    waitFor(
      `head hash at ${height} recorded`,
      () => stubOn.countExact("eth_getBlockByNumber", [`0x${height.toString(16)}`, false]) >= 2,
    );

  const env = {
    CACHE_ADMISSION: "first",
    CACHE_PER_BLOCK_TTL_MS: "600000",
    HEALTH_CHECK_INTERVAL_MS: "100",
  };

  before(async () => {
    anvil = await startAnvil();
    // Block 1: a value transfer; block 2: a call that emits a log; then up to head 100 (finalized 36).
    await rpc(anvil.httpUrl, "anvil_setCode", [LOGGER, "0x3360006000a100"]);
    await rpc(anvil.httpUrl, "eth_sendTransaction", [
      { from: DEV, to: `0x${"22".repeat(20)}`, value: "0x1" },
    ]);
    await rpc(anvil.httpUrl, "eth_sendTransaction", [{ from: DEV, to: LOGGER, data: "0x" }]);
    await rpc(anvil.httpUrl, "anvil_mine", ["0x62"]);
    stubOn = await new StubUpstream(anvil.httpUrl).start();
    stubOff = await new StubUpstream(anvil.httpUrl).start();
    node = await startSubstrateTestNode({ blockTimeMs: 0, startBlock: 50, finalityLag: 2 });
    gw = await startGateway(env, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "anvil", httpUrl: stubOn.url }]));
      await s.putNetwork(wsNetwork("dot", "SUBSTRATE", [{ id: "sub", httpUrl: node.httpUrl, wsUrl: null }]));
      key = await s.putKey();
    });
    gwOff = await startGateway({ ...env, CACHE_FINALITY_ENABLED: "false" }, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "anvil", httpUrl: stubOff.url }]));
      keyOff = await s.putKey();
    });
    await waitFor("finalized head 36", () => pool().finalizedHead() >= 36);
  });

  after(async () => {
    await gw?.stop();
    await gwOff?.stop();
    await stubOn?.stop();
    await stubOff?.stop();
    await node?.close();
    await anvil?.stop();
  });

  it("tracks anvil's finalized head (head - 64), never above the head, never going back", async () => {
    const head = pool().cacheHead();
    const finalized = Number.parseInt(
      ((await rpc(anvil.httpUrl, "eth_getBlockByNumber", ["finalized", false])) as { number: string }).number,
      16,
    );
    assert.equal(finalized, Math.max(0, head - 64));
    await waitFor("finalized head caught up", () => pool().finalizedHead() === finalized);
    assert.ok(pool().finalizedHead() <= pool().cacheHead());
    assert.match(
      await (await fetch(`${gw.metricsBase}/metrics`)).text(),
      new RegExp(`rpcgw_network_finalized_block\\{network="eth"\\} ${finalized}`),
    );
    // evm_revert past the finalized head (anvil allows it; a real chain does not): the gateway keeps its value.
    const snap = (await rpc(anvil.httpUrl, "evm_snapshot")) as string;
    const up = await mine(80);
    await waitFor("finalized head moved up", () => pool().finalizedHead() === up - 64);
    await rpc(anvil.httpUrl, "evm_revert", [snap]);
    await waitFor("head back", () => pool().describe()[0]!.head === head);
    for (let i = 0; i < 5; i++) await pool().healthCheck();
    assert.equal(pool().finalizedHead(), up - 64, "not lowered");
    // Back on top of the old finalized head again, for the tests below.
    await mine(80);
  });

  it("answers about a block at or below the finalized head stay cached whatever the head does", async () => {
    const calls: [string, unknown[]][] = [
      ["eth_getBlockByNumber", ["0x10", false]],
      ["eth_getBlockByNumber", ["0x1", true]],
      ["eth_getBlockTransactionCountByNumber", ["0x1"]],
      ["eth_getTransactionByBlockNumberAndIndex", ["0x1", "0x0"]],
      ["eth_getBlockReceipts", ["0x2"]],
      ["eth_getBalance", [DEV, "0x10"]],
      ["eth_getCode", [LOGGER, "0x10"]],
      ["eth_getTransactionCount", [DEV, "0x10"]],
      ["eth_getStorageAt", [LOGGER, "0x0", "0x10"]],
      ["eth_call", [{ to: LOGGER, data: "0x" }, "0x10"]],
      ["eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x20" }]],
    ];
    const first = new Map<string, string>();
    for (const [method, params] of calls) {
      const a = await call(url(), method, params);
      assert.equal(a.status, 200, a.text);
      assert.equal(a.json.error, undefined, `${method}: ${a.text}`);
      assert.notEqual(a.json.result, null, `${method} answered null`);
      assert.equal(a.headers.get("x-cache"), "MISS", method);
      first.set(method + JSON.stringify(params), a.text);
      const b = await call(url(), method, params);
      assert.equal(b.headers.get("x-cache"), "HIT", method);
      assert.equal(b.text, a.text);
    }
    const logs = JSON.parse(first.get(`eth_getLogs${JSON.stringify(calls.at(-1)![1])}`)!).result;
    assert.equal(logs.length, 1, "block 2's log");
    await mine(3);
    await mine(2);
    for (const [method, params] of calls) {
      const c = await call(url(), method, params);
      assert.equal(c.headers.get("x-cache"), "HIT", `${method} after the head moved`);
      assert.equal(c.text, first.get(method + JSON.stringify(params)));
      assert.equal(stubOn.countExact(method, params), 1, `${method}: one upstream call in all`);
    }
  });

  it("above the finalized head an answer is per block, as before", async () => {
    const head = pool().cacheHead();
    assert.ok(head - 2 > pool().finalizedHead());
    // `true` (full transactions): the chain watch reads blocks with `false`, and head - 2 was a head once.
    const params = [`0x${(head - 2).toString(16)}`, true];
    assert.equal((await call(url(), "eth_getBlockByNumber", params)).headers.get("x-cache"), "MISS");
    assert.equal((await call(url(), "eth_getBlockByNumber", params)).headers.get("x-cache"), "HIT");
    await mine(1);
    assert.equal((await call(url(), "eth_getBlockByNumber", params)).headers.get("x-cache"), "MISS");
    assert.equal(stubOn.countExact("eth_getBlockByNumber", params), 2);
  });

  it("CACHE_FINALITY_ENABLED=false: no finalized reads, and an old block misses once the head moves", async () => {
    const offPool = gwOff.plane.context.upstreams.get("eth")!;
    assert.equal(offPool.finalizedHead(), -1);
    assert.equal(stubOff.countExact("eth_getBlockByNumber", ["finalized", false]), 0);
    // Earlier tests mined through the other gateway: this one's head must have caught up first, or it can
    // move between the two identical calls below and change their per-block key.
    const chainHead = Number.parseInt((await rpc(anvil.httpUrl, "eth_blockNumber")) as string, 16);
    await waitFor(`off gateway's cache head ${chainHead}`, () => offPool.cacheHead() === chainHead);
    const params = ["0x10", false];
    assert.equal((await call(urlOff(), "eth_getBlockByNumber", params)).headers.get("x-cache"), "MISS");
    assert.equal((await call(urlOff(), "eth_getBlockByNumber", params)).headers.get("x-cache"), "HIT");
    await mine(1, gwOff);
    assert.equal((await call(urlOff(), "eth_getBlockByNumber", params)).headers.get("x-cache"), "MISS");
    assert.equal(stubOff.countExact("eth_getBlockByNumber", params), 2);
  });

  it("a same-height reorg (anvil_reorg) drops the per-block entries; finalized ones stay", async () => {
    await mine(1);
    const reorgs = () => metric(gw, /rpcgw_reorgs_total\{network="eth"\} (\d+)/);
    const before = await reorgs();
    const latest = ["latest", false];
    const a = await call(url(), "eth_getBlockByNumber", latest);
    assert.equal((await call(url(), "eth_getBlockByNumber", latest)).headers.get("x-cache"), "HIT");
    const fin = await call(url(), "eth_getBlockByNumber", ["0x10", false]);
    assert.equal(fin.headers.get("x-cache"), "HIT");
    const head = pool().cacheHead();
    await watched(head);
    // The last of the three new blocks carries a transfer: re-mined empty blocks in the same second would
    // hash the same as the old ones.
    await rpc(anvil.httpUrl, "anvil_reorg", [
      3,
      [[{ from: DEV, to: `0x${"33".repeat(20)}`, value: "0x1" }, 2]],
    ]);
    const fresh = (await rpc(anvil.httpUrl, "eth_getBlockByNumber", latest)) as {
      hash: string;
      number: string;
    };
    assert.equal(Number.parseInt(fresh.number, 16), head, "same height");
    assert.notEqual(fresh.hash, a.json.result.hash, "new hash");
    await waitFor("reorg seen", async () => (await reorgs()) > before);
    const b = await call(url(), "eth_getBlockByNumber", latest);
    assert.equal(b.headers.get("x-cache"), "MISS");
    assert.equal(b.json.result.hash, fresh.hash);
    assert.ok((await metric(gw, /rpcgw_cache_reorg_dropped_total\{network="eth"\} (\d+)/)) >= 1);
    const finAfter = await call(url(), "eth_getBlockByNumber", ["0x10", false]);
    assert.equal(finAfter.headers.get("x-cache"), "HIT");
    assert.equal(finAfter.text, fin.text);
  });

  it("the head going back (anvil_rollback) drops per-block entries keyed at or above it; the new branch is served", async () => {
    const reorgs = () => metric(gw, /rpcgw_reorgs_total\{network="eth"\} (\d+)/);
    const latest = ["latest", false];
    const head = pool().cacheHead();
    const old = await call(url(), "eth_getBlockByNumber", latest);
    assert.equal((await call(url(), "eth_getBlockByNumber", latest)).headers.get("x-cache"), "HIT");
    // The answer's block number is also a head hint (observeHead): the reorg must forget it too.
    await watched(head);
    const before = await reorgs();
    await rpc(anvil.httpUrl, "anvil_rollback", [1]);
    await waitFor("rollback seen", async () => (await reorgs()) > before && pool().cacheHead() === head - 1);
    // The new block carries a transfer (automine), so it differs from the old one at this height.
    await rpc(anvil.httpUrl, "eth_sendTransaction", [
      { from: DEV, to: `0x${"33".repeat(20)}`, value: "0x2" },
    ]);
    await waitFor("head again", () => pool().cacheHead() === head);
    const fresh = (await rpc(anvil.httpUrl, "eth_getBlockByNumber", latest)) as { hash: string };
    assert.notEqual(fresh.hash, old.json.result.hash);
    const again = await call(url(), "eth_getBlockByNumber", latest);
    assert.equal(again.headers.get("x-cache"), "MISS", "the old branch's entry for this head was dropped");
    assert.equal(again.json.result.hash, fresh.hash);
  });

  it("WebSocket calls share the finalized entries (the same forwarding core)", async () => {
    const params = ["0x11", false];
    const ws = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`);
    try {
      const viaWs = await ws.call("eth_getBlockByNumber", params);
      assert.equal(viaWs.result.number, "0x11");
      await mine(1);
      const viaHttp = await call(url(), "eth_getBlockByNumber", params);
      assert.equal(viaHttp.headers.get("x-cache"), "HIT");
      assert.deepEqual(viaHttp.json.result, viaWs.result);
      assert.deepEqual((await ws.call("eth_getBlockByNumber", params)).result, viaWs.result);
      assert.equal(stubOn.countExact("eth_getBlockByNumber", params), 1);
    } finally {
      ws.terminate();
    }
  });

  it("Substrate: chain_getBlockHash(n) at or below the finalized head stays cached as blocks arrive", async () => {
    const dot = gw.plane.context.upstreams.get("dot")!;
    await waitFor("Substrate finalized head", () => dot.finalizedHead() === node.finalizedNumber());
    const upstreamCalls = () =>
      metric(gw, /rpcgw_upstream_requests_total\{network="dot",upstream="sub",outcome="ok"\} (\d+)/);
    const final = await call(dotUrl(), "chain_getBlockHash", [10]);
    assert.equal(final.json.result, node.blockHash(10));
    const tip = node.bestNumber();
    const recent = await call(dotUrl(), "chain_getBlockHash", [tip]);
    assert.equal(recent.json.result, node.blockHash(tip));
    assert.ok(tip > dot.finalizedHead());
    const calls = await upstreamCalls();
    node.produceBlocks(1); // finalized = tip - 1: `tip` is still above it
    await waitFor("Substrate head moved", () => dot.cacheHead() === tip + 1);
    const again = await call(dotUrl(), "chain_getBlockHash", [10]);
    assert.equal(again.headers.get("x-cache"), "HIT");
    assert.equal(again.text, final.text);
    assert.equal(await upstreamCalls(), calls, "no upstream call for the finalized block");
    const recentAgain = await call(dotUrl(), "chain_getBlockHash", [tip]);
    assert.equal(recentAgain.headers.get("x-cache"), "MISS", "above the finalized head: per block");
    assert.equal(await upstreamCalls(), calls + 1);
    // Final once finalized = best - 2 reaches it: kept from then on.
    node.produceBlocks(2);
    await waitFor("finalized reached it", () => dot.finalizedHead() === tip + 1);
    await call(dotUrl(), "chain_getBlockHash", [tip]);
    node.produceBlocks(1);
    await waitFor("Substrate head moved", () => dot.cacheHead() === tip + 4);
    assert.equal((await call(dotUrl(), "chain_getBlockHash", [tip])).headers.get("x-cache"), "HIT");
  });
});
