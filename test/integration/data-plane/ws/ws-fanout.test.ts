import assert from "node:assert/strict";
import { eventually } from "../../../helpers/eventually";
import { type SubstrateTestNode, startSubstrateTestNode } from "../../../substrate-node";
import { type Gateway, startGateway } from "../harness";
import { type StubWsUpstream, startStubWsUpstream } from "./stub-ws-upstream";
import { sleep, TestWsClient, wsNetwork } from "./ws-client";

const headNumber = (n: { params: { result: { number: string } } }) =>
  Number.parseInt(n.params.result.number, 16);

/**
 * Fan-out through a shared subscription id: clients of one upstream subscription share its id and get
 * one message published to a uWS topic; the others (a second identical subscription on one socket,
 * other params) are framed apart. Small heads (under uWS's 16 KiB cork buffer) take the deferred
 * publish path, whose slow-consumer policing runs after uWS wrote them.
 */
/**
 * Waits until everything the gateway wrote to these sockets before now has arrived: one call each that the
 * gateway answers itself (unsubscribing an id that does not exist), whose answer follows on the socket.
 */
async function barrier(sockets: TestWsClient[], method = "eth_unsubscribe"): Promise<void> {
  for (const s of sockets) assert.equal((await s.call(method, ["0x00"])).result, false);
}

describe("WebSocket fan-out with shared subscription ids", function () {
  this.timeout(60_000);
  let up: StubWsUpstream;
  let node: SubstrateTestNode;
  let gw: Gateway;
  let key = "";
  let otherKey = "";
  let base = "";
  const clients: TestWsClient[] = [];
  const open = async (path = `/eth/rpc?apikey=${key}`) => {
    const c = await TestWsClient.open(`${base}${path}`);
    clients.push(c);
    return c;
  };
  const upstreamSubs = (slug = "eth") => gw.plane.ws.upstreamSubscriptionCount(slug);

  before(async () => {
    up = await startStubWsUpstream();
    node = await startSubstrateTestNode({ blockTimeMs: 0, startBlock: 10 });
    gw = await startGateway(
      { WS_MAX_BUFFERED_BYTES: String(64 * 1024), UPSTREAM_WS_CONNECTIONS: "1" },
      async (s) => {
        await s.putNetwork(wsNetwork("eth", "EVM", [{ id: "a", httpUrl: up.httpUrl, wsUrl: up.wsUrl }]));
        await s.putNetwork(
          wsNetwork("dot", "SUBSTRATE", [{ id: "sub", httpUrl: node.httpUrl, wsUrl: node.wsUrl }]),
        );
        key = await s.putKey();
        otherKey = await s.putKey({ workspaceId: "ws-other", appId: "app-other" });
      },
    );
    base = `ws://127.0.0.1:${gw.port()}`;
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.terminate();
    const deadline = Date.now() + 3000;
    while (gw.plane.ws.clientSubscriptionCount() > 0 && Date.now() < deadline) await sleep(20);
  });

  after(async () => {
    await gw?.stop();
    await up?.close();
    await node?.close();
  });

  it("one key's clients share one id; another key gets its own (no tenant can see another's subscription); unsubscribing ends only that client's; other params get another id and none of these notifications", async () => {
    const c1 = await open();
    const c2 = await open();
    const other = await open(`/eth/rpc?apikey=${otherKey}`);
    const c3 = await open();
    const s1 = (await c1.call("eth_subscribe", ["newHeads"])).result;
    const s2 = (await c2.call("eth_subscribe", ["newHeads"])).result;
    const so = (await other.call("eth_subscribe", ["newHeads"])).result;
    const s3 = (await c3.call("eth_subscribe", ["newPendingTransactions"])).result;
    assert.match(s1, /^0x[0-9a-f]{32}$/);
    assert.equal(s2, s1, "one key's clients share the id");
    assert.match(so, /^0x[0-9a-f]{32}$/);
    assert.notEqual(so, s1, "another key's client gets another id for the same upstream subscription");
    assert.notEqual(s3, s1);
    assert.equal(upstreamSubs(), 2, "newHeads is still one upstream subscription for both keys");

    up.emitHead();
    up.emitHead();
    await c1.until(() => c1.notifications(s1).length === 2);
    await c2.until(() => c2.notifications(s1).length === 2);
    await other.until(() => other.notifications(so).length === 2);
    assert.deepEqual(c1.notifications(s1), c2.notifications(s1), "the same message to both");
    assert.deepEqual(
      other.notifications(so).map((n) => n.params.result),
      c1.notifications(s1).map((n) => n.params.result),
      "the other key's client gets the same heads under its own id",
    );
    assert.equal(other.notifications(s1).length, 0, "never a message carrying the first key's id");
    // Naming the first key's id from the other key ends nothing.
    assert.equal((await other.call("eth_unsubscribe", [s1])).result, false);

    // c2 cannot end c1's by naming the shared id: only its own goes.
    assert.equal((await c2.call("eth_unsubscribe", [s1])).result, true);
    assert.equal((await c2.call("eth_unsubscribe", [s1])).result, false);
    assert.equal(upstreamSubs(), 2, "c1 still holds the upstream subscription");
    up.emitHead();
    await c1.until(() => c1.notifications(s1).length === 3, 5000, "c1 keeps receiving");
    await other.until(() => other.notifications(so).length === 3, 5000, "the other key keeps receiving");
    // That head's fan-out is over; an answer on a socket comes after anything the fan-out wrote to it.
    await barrier([c2, c3]);
    assert.equal(c2.notifications(s1).length, 2, "c2 gets nothing after its unsubscribe");
    const heads = c3.messages.filter((m) => !Array.isArray(m) && m.method === "eth_subscription");
    assert.equal(heads.length, 0, "a different subscription never sees these notifications");

    // The last one out ends it upstream.
    assert.equal((await c1.call("eth_unsubscribe", [s1])).result, true);
    assert.equal(upstreamSubs(), 2, "the other key still holds it");
    assert.equal((await other.call("eth_unsubscribe", [so])).result, true);
    await c1.until(() => upstreamSubs() === 1, 3000, "newHeads ended upstream");
  });

  it("a key whose last client left gets a fresh id next time (its shared id is not kept)", async () => {
    const c1 = await open();
    const keep = await open(`/eth/rpc?apikey=${otherKey}`);
    const sk = (await keep.call("eth_subscribe", ["newHeads"])).result;
    const s1 = (await c1.call("eth_subscribe", ["newHeads"])).result;
    assert.equal((await c1.call("eth_unsubscribe", [s1])).result, true);
    const again = (await c1.call("eth_subscribe", ["newHeads"])).result;
    assert.notEqual(again, s1);
    assert.notEqual(again, sk);
    up.emitHead();
    await c1.until(() => c1.notifications(again).length === 1);
    await keep.until(() => keep.notifications(sk).length === 1);
    assert.equal(c1.notifications(s1).length, 0);
  });

  it("a second identical subscription on one socket gets its own id: each gets every head, and unsubscribing one leaves the other", async () => {
    const c = await open();
    const shared = (await c.call("eth_subscribe", ["newHeads"])).result;
    const own = (await c.call("eth_subscribe", ["newHeads"])).result;
    const other = await open();
    assert.equal((await other.call("eth_subscribe", ["newHeads"])).result, shared);
    assert.notEqual(own, shared);
    assert.equal(upstreamSubs(), 1);

    up.emitHead();
    await c.until(() => c.notifications(shared).length === 1 && c.notifications(own).length === 1);
    assert.deepEqual(c.notifications(own)[0].params.result, c.notifications(shared)[0].params.result);

    // Unsubscribing the shared one keeps the socket's own, and the other socket's shared one.
    assert.equal((await c.call("eth_unsubscribe", [shared])).result, true);
    up.emitHead();
    await c.until(() => c.notifications(own).length === 2, 5000, "own id still live");
    await other.until(() => other.notifications(shared).length === 2, 5000, "other socket still live");
    await barrier([c]);
    assert.equal(c.notifications(shared).length, 1);

    // Subscribing again gets the shared id again (the socket no longer holds it).
    assert.equal((await c.call("eth_subscribe", ["newHeads"])).result, shared);
    assert.equal((await c.call("eth_unsubscribe", [own])).result, true);
    up.emitHead();
    await c.until(() => c.notifications(shared).length === 2, 5000, "shared again");
  });

  it("a slow client on a published subscription is closed with 4008 after an unbroken run of heads; the others get every head", async () => {
    const fast = await open();
    const slow = await open();
    const sid = (await fast.call("eth_subscribe", ["newHeads"])).result;
    assert.equal((await slow.call("eth_subscribe", ["newHeads"])).result, sid);
    up.emitHead();
    await slow.until(() => slow.notifications(sid).length === 1, 5000, "slow client live");
    const firstHead = headNumber(slow.notifications(sid)[0]);
    // Heads of ~8 KiB: under uWS's 16 KiB cork buffer, so published after the turn (not sent at once).
    (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const before = gw.plane.ws.closedCount("slow consumer");
    let emitted = 1;
    for (let i = 0; i < 3000 && gw.plane.ws.closedCount("slow consumer") === before; i++) {
      up.emitHead(4 * 1024);
      emitted++;
      if (i % 10 === 9) await sleep(5);
    }
    assert.equal(gw.plane.ws.closedCount("slow consumer"), before + 1, "slow consumer closed");
    // The fast client shares the topic and keeps receiving: every head, in order.
    up.emitHead();
    emitted++;
    await fast.until(() => fast.notifications(sid).length === emitted, 20_000, "fast client gets every head");
    const fastHeads = fast.notifications(sid).map(headNumber);
    assert.deepEqual(
      fastHeads,
      fastHeads.map((_, i) => firstHead + i),
    );

    (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await slow.waitClosed(10_000);
    assert.equal(slow.closeCode, 4008);
    const slowHeads = slow.notifications(sid).map(headNumber);
    assert.ok(slowHeads.length >= 2 && slowHeads.length < emitted, `slow client got ${slowHeads.length}`);
    assert.deepEqual(
      slowHeads,
      slowHeads.map((_, i) => firstHead + i),
      "no gap before the close",
    );
  });

  it("Substrate: shared id with the current head replayed to a late joiner; unsubscribing ends only that client's", async () => {
    const path = `/dot/rpc?apikey=${key}`;
    const c1 = await open(path);
    const c2 = await open(path);
    const s1 = (await c1.call("chain_subscribeNewHeads", [])).result;
    await c1.until(() => c1.notifications(s1).length === 1, 5000, "initial head");
    const s2 = (await c2.call("chain_subscribeNewHeads", [])).result;
    assert.equal(s2, s1);
    assert.ok(!s1.startsWith("0x"));
    await c2.until(() => c2.notifications(s1).length === 1, 5000, "replayed head");
    assert.deepEqual(c2.notifications(s1)[0].params.result, c1.notifications(s1)[0].params.result);
    assert.equal(upstreamSubs("dot"), 1);

    node.produceBlocks(1);
    await c1.until(() => c1.notifications(s1).length === 2);
    await c2.until(() => c2.notifications(s1).length === 2);
    assert.equal((await c1.call("chain_unsubscribeNewHeads", [s1])).result, true);
    node.produceBlocks(1);
    await c2.until(() => c2.notifications(s1).length === 3, 5000, "c2 keeps receiving");
    await barrier([c1], "chain_unsubscribeNewHeads");
    assert.equal(c1.notifications(s1).length, 2);
    assert.equal(upstreamSubs("dot"), 1);
  });

  it("times the published fan-out (rpcgw_ws_fanouts_total, rpcgw_ws_fanout_seconds_total)", async () => {
    const metric = async (name: string) => {
      const text = await (await fetch(`${gw.metricsBase}/metrics`)).text();
      return Number(new RegExp(`^${name} ([0-9.e+-]+)$`, "m").exec(text)?.[1]);
    };
    const c = await open();
    const sid = (await c.call("eth_subscribe", ["newHeads"])).result;
    const n0 = await metric("rpcgw_ws_fanouts_total");
    const t0 = await metric("rpcgw_ws_fanout_seconds_total");
    up.emitHead();
    up.emitHead();
    await c.until(() => c.notifications(sid).length === 2);
    assert.equal(
      await eventually(
        async () => (await metric("rpcgw_ws_fanouts_total")) - n0 || undefined,
        "the fan-outs counted",
      ),
      2,
    );
    assert.ok((await metric("rpcgw_ws_fanout_seconds_total")) > t0);
  });
});
