import assert from "node:assert/strict";
import { type SubstrateTestNode, SYSTEM_NUMBER_KEY, startSubstrateTestNode } from "../../../substrate-node";
import { type Gateway, startGateway } from "../harness";
import { TestWsClient, wsNetwork } from "./ws-client";

/** Substrate subscriptions through the gateway, against the Substrate test node (a named stand-in). */
describe("WebSocket Substrate subscriptions (Substrate test node)", function () {
  this.timeout(30_000);
  let node: SubstrateTestNode;
  let gw: Gateway;
  let url = "";
  const clients: TestWsClient[] = [];
  const open = async () => {
    const c = await TestWsClient.open(url);
    clients.push(c);
    return c;
  };
  const upstreamSubs = () => gw.plane.ws.upstreamSubscriptionCount("dot");

  before(async () => {
    node = await startSubstrateTestNode({ blockTimeMs: 0, startBlock: 10 });
    let key = "";
    gw = await startGateway({}, async (s) => {
      await s.putNetwork(
        wsNetwork("dot", "SUBSTRATE", [{ id: "sub", httpUrl: node.httpUrl, wsUrl: node.wsUrl }]),
      );
      key = await s.putKey();
    });
    url = `ws://127.0.0.1:${gw.port()}/dot/rpc?apikey=${key}`;
  });

  afterEach(() => {
    for (const c of clients.splice(0)) c.terminate();
  });

  after(async () => {
    await gw?.stop();
    await node?.close();
  });

  it("chain_subscribeNewHeads: current head at once, merged, late joiner gets the current head replayed", async () => {
    const c1 = await open();
    const s1 = (await c1.call("chain_subscribeNewHeads", [])).result;
    assert.equal(typeof s1, "string");
    assert.ok(!s1.startsWith("0x"));
    await c1.until(() => c1.notifications(s1).length === 1, 5000, "initial head");
    const first = c1.notifications(s1)[0];
    assert.equal(first.method, "chain_newHead");
    assert.equal(Number.parseInt(first.params.result.number, 16), node.bestNumber());

    const c2 = await open();
    const s2 = (await c2.call("chain_subscribeNewHeads", [])).result;
    await c2.until(() => c2.notifications(s2).length === 1, 5000, "replayed head");
    assert.deepEqual(c2.notifications(s2)[0].params.result, first.params.result);
    assert.equal(upstreamSubs(), 1);

    node.produceBlocks(1);
    await c1.until(() => c1.notifications(s1).length === 2);
    await c2.until(() => c2.notifications(s2).length === 2);
    assert.equal(Number.parseInt(c2.notifications(s2)[1].params.result.number, 16), node.bestNumber());

    assert.equal((await c1.call("chain_unsubscribeNewHeads", [s1])).result, true);
    assert.equal(upstreamSubs(), 1);
    assert.equal((await c2.call("chain_unsubscribeFinalizedHeads", [s2])).result, false, "wrong family");
    assert.equal((await c2.call("chain_unsubscribeNewHead", [s2])).result, true, "alias");
    assert.equal(upstreamSubs(), 0);
  });

  it("chain_subscribeFinalizedHeads and state_subscribeRuntimeVersion deliver their initial values", async () => {
    const c = await open();
    const f = (await c.call("chain_subscribeFinalizedHeads", [])).result;
    const r = (await c.call("state_subscribeRuntimeVersion", [])).result;
    await c.until(() => c.notifications(f).length === 1 && c.notifications(r).length === 1);
    assert.equal(c.notifications(f)[0].method, "chain_finalizedHead");
    assert.equal(c.notifications(r)[0].method, "state_runtimeVersion");
    assert.equal(typeof c.notifications(r)[0].params.result.specVersion, "number");
  });

  it("state_subscribeStorage (keys): values now and on change; a late joiner sees every watched value", async () => {
    const c1 = await open();
    const s1 = (await c1.call("state_subscribeStorage", [[SYSTEM_NUMBER_KEY]])).result;
    await c1.until(() => c1.notifications(s1).length === 1, 5000, "initial storage");
    const initial = c1.notifications(s1)[0].params.result;
    assert.equal(initial.changes[0][0], SYSTEM_NUMBER_KEY);
    node.produceBlocks(1);
    await c1.until(() => c1.notifications(s1).length === 2, 5000, "storage change");
    const c2 = await open();
    const s2 = (await c2.call("state_subscribeStorage", [[SYSTEM_NUMBER_KEY]])).result;
    await c2.until(() => c2.notifications(s2).length === 1, 5000, "replayed storage");
    assert.deepEqual(c2.notifications(s2)[0].params.result, c1.notifications(s1)[1].params.result);
    assert.equal(upstreamSubs(), 1);
    c1.close();
    c2.close();
    await c1.until(() => upstreamSubs() === 0, 3000);
  });

  it("author_submitAndWatchExtrinsic: one watch per extrinsic, statuses through to finalized", async () => {
    const c = await open();
    const w1 = (await c.call("author_submitAndWatchExtrinsic", ["0x0401020304"])).result;
    const w2 = (await c.call("author_submitAndWatchExtrinsic", ["0x0405060708"])).result;
    assert.notEqual(w1, w2);
    assert.equal(upstreamSubs(), 2, "extrinsic watches are never merged");
    await c.until(() => c.notifications(w1).length === 1, 5000, "ready");
    assert.equal(c.notifications(w1)[0].method, "author_extrinsicUpdate");
    assert.equal(c.notifications(w1)[0].params.result, "ready");
    node.produceBlocks(3); // in block, then finalized (finality lag 2)
    await c.until(
      () => c.notifications(w1).some((n) => n.params.result?.finalized !== undefined),
      5000,
      "finalized",
    );
    assert.ok(c.notifications(w1).some((n) => n.params.result?.inBlock !== undefined));
    assert.equal(upstreamSubs(), 0, "a finished watch is released");
    assert.equal(gw.plane.ws.hubs.get("dot")?.tenantCount(), 0, "and the workspace's share of it");
    const dup = await c.call("author_submitAndWatchExtrinsic", ["0x0401020304"]);
    assert.ok(dup.error === undefined || typeof dup.error.code === "number");
  });

  it("author_unwatchExtrinsic ends a watch; blocked author_* methods stay blocked over WS", async () => {
    const c = await open();
    const w = (await c.call("author_submitAndWatchExtrinsic", ["0x0409090909"])).result;
    assert.equal(upstreamSubs(), 1);
    assert.equal((await c.call("author_unwatchExtrinsic", [w])).result, true);
    assert.equal(upstreamSubs(), 0);
    const blocked = await c.call("author_rotateKeys", []);
    assert.equal(blocked.error.code, -32601);
    assert.equal(blocked.error.data.reason, "method_blocked");
  });
});
