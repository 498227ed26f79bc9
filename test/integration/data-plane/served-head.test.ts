import assert from "node:assert/strict";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { createTestRedisNamespace, type TestRedisNamespace } from "../../helpers/redis";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "./harness";
import { TestWsClient } from "./ws/ws-client";

/** The number of a JSON-RPC answer's result: a hex quantity, or a block's `number`. */
function heightOf(result: unknown): number {
  const hex = typeof result === "string" ? result : (result as { number?: string } | null)?.number;
  assert.equal(typeof hex, "string", `no height in ${JSON.stringify(result)}`);
  return Number.parseInt(hex!, 16);
}

/** The eth_blockNumber a gateway endpoint answers. */
async function blockNumberAt(url: string): Promise<number> {
  return heightOf((await post(url, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })).json.result);
}

/**
 * A head that never goes back (data-plane/src/forward/served-head.ts): two real anvil nodes behind one
 * network, one kept two blocks behind the other; eth_blockNumber and eth_getBlockByNumber("latest")
 * answers never decrease, over HTTP (single and batch) and WebSocket, and across two data-plane instances
 * on one Redis (upstream/served-head-share.ts).
 */
describe("data plane: a served head that never goes back (two anvils, one lagging)", function () {
  this.timeout(120_000);
  let ahead: Anvil;
  let behind: Anvil;
  let ns: TestRedisNamespace;
  let gw: Gateway;
  let key: string;

  const mine = (a: Anvil, blocks: number) =>
    post(a.httpUrl, { jsonrpc: "2.0", id: 1, method: "anvil_mine", params: [`0x${blocks.toString(16)}`] });

  before(async () => {
    [ahead, behind] = await Promise.all([startAnvil(), startAnvil()]);
    await mine(ahead, 12);
    await mine(behind, 10);
    ns = createTestRedisNamespace();
    gw = await startGateway(
      { CACHE_MAX_BYTES: "0", SERVED_HEAD_SHARE_INTERVAL_MS: "50" },
      async (s) => {
        await s.putNetwork(
          evmNetwork("eth", [
            { id: "ahead", httpUrl: ahead.httpUrl },
            { id: "behind", httpUrl: behind.httpUrl },
          ]),
        );
        key = await s.putKey();
      },
      {},
      ns,
    );
  });

  after(async () => {
    await gw?.stop();
    await ns?.cleanup();
    await Promise.all([ahead?.stop(), behind?.stop()]);
  });

  const url = () => `${gw.base}/eth/rpc?apikey=${key}`;

  /** One round: both nodes mine a block now and then (the lagging one stays two behind). */
  async function maybeMine(i: number): Promise<void> {
    if (i % 10 !== 9) return;
    await mine(ahead, 1);
    await mine(behind, 1);
  }

  it("HTTP: 60 eth_blockNumber and 60 eth_getBlockByNumber(latest) answers in turn never go back", async () => {
    let last = -1;
    for (let i = 0; i < 60; i++) {
      for (const body of [
        { jsonrpc: "2.0", id: i, method: "eth_blockNumber" },
        { jsonrpc: "2.0", id: i, method: "eth_getBlockByNumber", params: ["latest", false] },
      ]) {
        const r = await post(url(), body);
        assert.equal(r.status, 200, r.text);
        const h = heightOf(r.json.result);
        assert.ok(h >= last, `${body.method} answered ${h} after ${last} (round ${i})`);
        last = h;
      }
      await maybeMine(i);
    }
    // The answers follow the chain, not a frozen value: within a health check they reach the node ahead.
    const top = heightOf(
      (await post(ahead.httpUrl, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })).json.result,
    );
    assert.ok(last <= top, `served ${last} above the node ahead (${top})`);
    await eventually(async () => (await blockNumberAt(url())) >= top, `serving ${top}`);
    const latest = await post(url(), {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getBlockByNumber",
      params: ["latest", false],
    });
    assert.equal(heightOf(latest.json.result), top);
  });

  it("batches and WebSocket: the same, and a batch's two answers agree", async () => {
    const ws = await TestWsClient.open(`${gw.base.replace("http", "ws")}/eth/rpc?apikey=${key}`);
    try {
      let last = -1;
      for (let i = 0; i < 30; i++) {
        const batch = [
          { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" },
          { jsonrpc: "2.0", id: 2, method: "eth_getBlockByNumber", params: ["latest", false] },
        ];
        const r = await post(url(), batch);
        const [n, b] = [heightOf(r.json[0].result), heightOf(r.json[1].result)];
        assert.ok(n >= last && b >= n, `batch ${n} / ${b} after ${last}`);
        last = b;
        const w = heightOf((await ws.call("eth_blockNumber")).result);
        const wb = heightOf((await ws.call("eth_getBlockByNumber", ["latest", false])).result);
        assert.ok(w >= last && wb >= w, `WebSocket ${w} / ${wb} after ${last}`);
        last = wb;
        await maybeMine(i);
      }
    } finally {
      ws.close();
    }
  });

  it("a second instance that has not checked its nodes since serves the head another instance served", async () => {
    // Its health checks are rare: only the shared served head can tell it the chain moved on.
    const second = await startGateway(
      { CACHE_MAX_BYTES: "0", SERVED_HEAD_SHARE_INTERVAL_MS: "50", HEALTH_CHECK_INTERVAL_MS: "600000" },
      async () => {},
      {},
      ns,
    );
    try {
      const secondUrl = `${second.base}/eth/rpc?apikey=${key}`;
      const before = heightOf(
        (await post(secondUrl, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })).json.result,
      );
      await mine(ahead, 5);
      await mine(behind, 5);
      // The first instance learns it at its next health check and shares it.
      const served = await eventually(
        async () => {
          const n = await blockNumberAt(url());
          return n >= before + 5 ? n : undefined;
        },
        `the first instance serving ${before + 5}`,
      );
      await eventually(
        async () => (await blockNumberAt(secondUrl)) >= served,
        `the second instance serving ${served}`,
      );
      // And its latest block is that block, though its own view of the nodes' heads is old.
      const latest = await post(secondUrl, {
        jsonrpc: "2.0",
        id: 2,
        method: "eth_getBlockByNumber",
        params: ["latest", false],
      });
      assert.ok(heightOf(latest.json.result) >= served, latest.text);
    } finally {
      await second.stop();
    }
  });
});
