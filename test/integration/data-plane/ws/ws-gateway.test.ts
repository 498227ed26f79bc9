import assert from "node:assert/strict";
import WebSocket from "ws";
import { hashApiKey } from "../../../../shared/src/crypto/api-key";
import { eventually } from "../../../helpers/eventually";
import { type Gateway, startGateway } from "../harness";
import { type StubWsUpstream, startStubWsUpstream } from "./stub-ws-upstream";
import { TestWsClient, wsNetwork } from "./ws-client";

describe("WebSocket endpoint (stub upstreams)", function () {
  this.timeout(30_000);
  let a: StubWsUpstream;
  let gw: Gateway;
  let key = "";
  let originKey = "";
  let wsBase = "";
  const clients: TestWsClient[] = [];
  const open = async (path: string, headers: Record<string, string> = {}) => {
    const c = await TestWsClient.open(`${wsBase}${path}`, headers);
    clients.push(c);
    return c;
  };

  before(async () => {
    a = await startStubWsUpstream();
    gw = await startGateway(
      {
        WS_MAX_SUBSCRIPTIONS_PER_CONNECTION: "3",
        WS_MAX_IN_FLIGHT_PER_CONNECTION: "5",
        UPSTREAM_WS_CONNECTIONS: "1",
      },
      async (s) => {
        await s.putNetwork(wsNetwork("eth", "EVM", [{ id: "a", httpUrl: a.httpUrl, wsUrl: a.wsUrl }]));
        await s.putNetwork(wsNetwork("nows", "EVM", [{ id: "h", httpUrl: a.httpUrl, wsUrl: null }]));
        key = await s.putKey();
        originKey = await s.putKey({ allowlist: { origins: ["https://good.example"], ips: [] } });
      },
    );
    wsBase = `ws://127.0.0.1:${gw.port()}`;
  });

  afterEach(() => {
    for (const c of clients.splice(0)) c.terminate();
  });

  after(async () => {
    await gw?.stop();
    await a?.close();
  });

  const upstreamSubs = () => gw.plane.ws.upstreamSubscriptionCount("eth");

  describe("auth at upgrade", () => {
    it("keeps a socket upgraded after its key was looked up (not cached) open: each of 40 fresh keys answers at once", async () => {
      // A key seen for the first time is looked up before the upgrade, which then completes outside uWS's
      // handler (see ws/upgrade.ts on why that upgrade is not corked).
      for (let i = 0; i < 40; i++) {
        const fresh = await gw.seeder.putKey();
        const c = await open(`/eth/rpc?apikey=${fresh}`);
        const answer = await c.call("eth_chainId");
        assert.equal(answer.result, "0x7a69", `key ${i}: ${JSON.stringify(answer)}`);
        assert.equal(c.closeCode, undefined, `key ${i}: closed ${c.closeCode} right after the upgrade`);
      }
    });

    it("refuses a missing key with 401 and the contract error body", async () => {
      const err = await TestWsClient.open(`${wsBase}/eth/rpc`).then(
        () => assert.fail("upgraded"),
        (e) => e,
      );
      assert.equal(err.status, 401);
      assert.equal(err.body.error.code, -32016);
      assert.equal(err.body.error.data.reason, "missing_key");
    });

    it("refuses an unknown key with 401", async () => {
      const err = await TestWsClient.open(`${wsBase}/eth/rpc?apikey=nope`).catch((e) => e);
      assert.equal(err.status, 401);
      assert.equal(err.body.error.data.reason, "unknown_key");
    });

    it("refuses an origin not on the allowlist with 403, accepts a listed one", async () => {
      const err = await TestWsClient.open(`${wsBase}/eth/rpc?apikey=${originKey}`, {
        origin: "https://evil.example",
      }).catch((e) => e);
      assert.equal(err.status, 403);
      assert.equal(err.body.error.data.reason, "origin_not_allowed");
      const ok = await open(`/eth/rpc?apikey=${originKey}`, { origin: "https://good.example" });
      assert.equal((await ok.call("eth_chainId")).result, "0x7a69");
    });

    it("refuses an unknown network with 404; accepts the key in a header and on /jsonrpc; public needs none", async () => {
      const err = await TestWsClient.open(`${wsBase}/nope/rpc?apikey=${key}`).catch((e) => e);
      assert.equal(err.status, 404);
      assert.equal(err.body.error.code, -32601);
      const h = await open("/eth/jsonrpc", { apikey: key });
      assert.equal((await h.call("eth_blockNumber")).result.startsWith("0x"), true);
      const p = await open("/eth/public");
      assert.equal((await p.call("eth_chainId")).result, "0x7a69");
    });

    it("plain HTTP still works on the same paths", async () => {
      const res = await fetch(`${gw.base}/eth/rpc?apikey=${key}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" }),
      });
      assert.equal(res.status, 200);
      assert.equal((await res.json()).result, "0x7a69");
      const get = await fetch(`${gw.base}/eth/rpc?apikey=${key}`);
      assert.equal(get.status, 405);
    });
  });

  describe("requests over WS", () => {
    it("answers singles and batches; bad messages get error-table answers and the socket stays open", async () => {
      const c = await open(`/eth/rpc?apikey=${key}`);
      assert.equal((await c.call("eth_chainId")).result, "0x7a69");
      c.sendRaw(
        JSON.stringify([
          { jsonrpc: "2.0", id: "x", method: "eth_chainId" },
          { jsonrpc: "1.0", id: 2, method: "eth_chainId" },
          { jsonrpc: "2.0", id: 3, method: "personal_sign", params: [] },
          { jsonrpc: "2.0", method: "eth_chainId" },
        ]),
      );
      await c.until(() => c.messages.some(Array.isArray), 5000, "batch answer");
      const batch = c.messages.find(Array.isArray)!;
      assert.equal(batch.length, 3);
      assert.equal(batch[0].id, "x");
      assert.equal(batch[0].result, "0x7a69");
      assert.equal(batch[1].error.code, -32600);
      assert.equal(batch[2].error.code, -32601);
      assert.equal(batch[2].error.data.reason, "method_blocked");

      c.sendRaw("{not json");
      c.sendRaw(Buffer.from([1, 2, 3]), true);
      c.sendRaw("[]");
      c.sendRaw(
        JSON.stringify(
          Array.from({ length: 101 }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "eth_chainId" })),
        ),
      );
      await c.until(() => c.messages.filter((m) => !Array.isArray(m) && m.id === null).length >= 4);
      const errs = c.messages.filter((m) => !Array.isArray(m) && m.id === null).map((m) => m.error);
      assert.deepEqual(
        errs.map((e) => [e.code, e.data.reason]),
        [
          [-32700, "parse_error"],
          [-32700, "parse_error"],
          [-32600, "empty_batch"],
          [-32600, "batch_too_large"],
        ],
      );
      assert.equal(errs[3].data.limit, 100);
      assert.equal((await c.call("eth_blockNumber")).result.startsWith("0x"), true, "socket still open");
    });

    it("caps in-flight requests per connection with a clear -32005 answer", async () => {
      const c = await open(`/eth/rpc?apikey=${key}`);
      c.sendRaw(
        JSON.stringify(
          Array.from({ length: 6 }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "eth_chainId" })),
        ),
      );
      await c.until(() => c.messages.some(Array.isArray));
      const batch = c.messages.find(Array.isArray)!;
      assert.equal(batch.length, 6);
      for (const el of batch) {
        assert.equal(el.error.code, -32005);
        assert.equal(el.error.data.reason, "ws_in_flight_limit");
        assert.equal(el.error.data.limit, 5);
      }
      assert.equal((await c.call("eth_chainId")).result, "0x7a69");
    });
  });

  describe("subscriptions", () => {
    it("merges identical subscriptions into one upstream subscription and fans out under one shared id", async () => {
      const c1 = await open(`/eth/rpc?apikey=${key}`);
      const c2 = await open(`/eth/rpc?apikey=${key}`);
      const s1 = (await c1.call("eth_subscribe", ["newHeads"])).result;
      const s2 = (await c2.call("eth_subscribe", ["newHeads"])).result;
      assert.match(s1, /^0x[0-9a-f]{32}$/);
      assert.equal(s1, s2, "clients of one upstream subscription share its id");
      assert.equal(upstreamSubs(), 1);
      assert.equal(a.subscriptions(), 1);
      a.emitHead();
      a.emitHead();
      await c1.until(() => c1.notifications(s1).length === 2);
      await c2.until(() => c2.notifications(s2).length === 2);
      const n = c1.notifications(s1)[0];
      assert.equal(n.method, "eth_subscription");
      assert.equal(typeof n.params.result.number, "string");
      assert.equal(
        c2.notifications(s2)[1].params.result.number,
        c1.notifications(s1)[1].params.result.number,
      );

      // A different filter is a different upstream subscription.
      const s3 = (
        await c1.call("eth_subscribe", ["logs", { address: "0xAbC0000000000000000000000000000000000001" }])
      ).result;
      const s4 = (
        await c2.call("eth_subscribe", ["logs", { address: "0xabc0000000000000000000000000000000000001" }])
      ).result;
      assert.equal(s3, s4);
      assert.notEqual(s3, s1, "a different subscription has another id");
      assert.equal(upstreamSubs(), 2, "logs filters differing only in hex case merge");

      // Unsubscribe with the shared id ends only that client's: the other keeps receiving; the last one
      // out ends it upstream.
      assert.equal((await c1.call("eth_unsubscribe", [s1])).result, true);
      assert.equal((await c1.call("eth_unsubscribe", [s1])).result, false);
      assert.equal(upstreamSubs(), 2);
      a.emitHead();
      await c2.until(() => c2.notifications(s2).length === 3, 5000, "c2 still subscribed");
      // The fan-out is done: a notification for c1 would have been sent before this answer, on its socket.
      await c1.call("eth_chainId");
      assert.equal(c1.notifications(s1).length, 2, "c1 unsubscribed");
      assert.equal((await c2.call("eth_unsubscribe", [s2])).result, true);
      assert.equal(upstreamSubs(), 1);
      // Disconnecting cleans up the rest.
      c1.close();
      c2.close();
      await c1.until(() => upstreamSubs() === 0, 3000, "upstream subscriptions to drain");
      await c1.until(() => a.subscriptions() === 0, 3000, "node-side unsubscribe");
      assert.equal(gw.plane.ws.clientSubscriptionCount(), 0);
    });

    it("passes a node's error for a bad subscription through and caps subscriptions per connection", async () => {
      const c = await open(`/eth/rpc?apikey=${key}`);
      const bad = await c.call("eth_subscribe", ["bogus"]);
      assert.equal(bad.error.code, -32602);
      for (let i = 0; i < 3; i++)
        assert.ok((await c.call("eth_subscribe", ["newPendingTransactions"])).result);
      const over = await c.call("eth_subscribe", ["newHeads"]);
      assert.equal(over.error.code, -32005);
      assert.equal(over.error.data.reason, "ws_subscription_limit");
      assert.equal(over.error.data.limit, 3);
      assert.equal(upstreamSubs(), 1);
      c.close();
      await c.until(() => upstreamSubs() === 0, 3000);
    });

    it("answers a subscription on a network without upstream WebSockets with -32603", async () => {
      const c = await open(`/nows/rpc?apikey=${key}`);
      const r = await c.call("eth_subscribe", ["newHeads"]);
      assert.equal(r.error.code, -32603);
      assert.equal(r.error.data.reason, "no_upstream_websocket");
      assert.equal((await c.call("eth_chainId")).result, "0x7a69");
    });

    it("closes a slow consumer with 4008 while a fast client keeps receiving", async () => {
      const fast = await open(`/eth/rpc?apikey=${key}`);
      const slow = await open(`/eth/rpc?apikey=${key}`);
      const sf = (await fast.call("eth_subscribe", ["newHeads"])).result;
      await slow.call("eth_subscribe", ["newHeads"]);
      // The slow client stops reading: the kernel buffers fill, then the gateway's backlog.
      (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
      const before = gw.plane.ws.closedCount("slow consumer");
      // Heads are emitted until the gateway gives up on the slow client (however long a loaded machine takes).
      await eventually(
        () => {
          if (gw.plane.ws.closedCount("slow consumer") !== before) return true;
          a.emitHead(32 * 1024);
          return false;
        },
        "the slow consumer closed",
        20_000,
        5,
      );
      assert.equal(gw.plane.ws.closedCount("slow consumer"), before + 1, "slow consumer closed");
      const got = fast.notifications(sf).length;
      a.emitHead();
      await fast.until(() => fast.notifications(sf).length > got, 5000, "fast client notifications");
      (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
      await slow.waitClosed(10_000);
      assert.equal(slow.closeCode, 4008);
      assert.equal(slow.closeReason, "slow consumer");
    });

    it("closes sockets of a revoked key (4001)", async () => {
      const k = await gw.seeder.putKey();
      const c = await open(`/eth/rpc?apikey=${k}`);
      await c.call("eth_subscribe", ["newHeads"]);
      await gw.seeder.deleteKey(k);
      await gw.seeder.publish({ type: "key.revoke", keyHash: hashApiKey(k) });
      await c.waitClosed(10_000);
      assert.equal(c.closeCode, 4001);
      assert.equal(c.closeReason, "api key revoked");
    });

    it("exposes WS gauges on /metrics", async () => {
      const c = await open(`/eth/rpc?apikey=${key}`);
      await c.call("eth_subscribe", ["newHeads"]);
      const text = await (await fetch(`${gw.metricsBase}/metrics`)).text();
      assert.match(text, /^rpcgw_ws_connections [1-9]/m);
      assert.match(text, /^rpcgw_ws_upstream_subscriptions\{network="eth"\} 1$/m);
      assert.match(text, /^rpcgw_ws_client_subscriptions 1$/m);
    });

    it("closes sockets on a network that was removed (4004)", async () => {
      await gw.seeder.putNetwork(wsNetwork("gone", "EVM", [{ id: "a", httpUrl: a.httpUrl, wsUrl: a.wsUrl }]));
      await gw.seeder.publish({ type: "networks.update" });
      await eventually(() => gw.plane.context.upstreams.get("gone") !== undefined, "the network loaded");
      const c = await open(`/gone/rpc?apikey=${key}`);
      await c.call("eth_subscribe", ["newHeads"]);
      await gw.seeder.deleteNetwork("gone");
      await gw.seeder.publish({ type: "networks.update" });
      await c.waitClosed(3000);
      assert.equal(c.closeCode, 4004);
      await c.until(() => gw.plane.ws.upstreamSubscriptionCount("gone") === 0);
    });

    it("closes sockets whose key became invalid after a resync", async () => {
      const k = await gw.seeder.putKey();
      const keep = await open(`/eth/rpc?apikey=${key}`);
      const c = await open(`/eth/rpc?apikey=${k}`);
      await gw.seeder.deleteKey(k);
      await gw.seeder.publish({ type: "resync" });
      await c.waitClosed(1000);
      assert.equal(c.closeCode, 4001);
      assert.equal((await keep.call("eth_chainId")).result, "0x7a69");
    });
  });
});

describe("WebSocket subscriptions survive an upstream dying", function () {
  this.timeout(30_000);
  let a: StubWsUpstream;
  let b: StubWsUpstream;
  let gw: Gateway;
  let key = "";

  before(async () => {
    a = await startStubWsUpstream();
    b = await startStubWsUpstream();
    gw = await startGateway({ UPSTREAM_WS_CONNECTIONS: "1" }, async (s) => {
      await s.putNetwork(
        wsNetwork("eth", "EVM", [
          { id: "a", httpUrl: a.httpUrl, wsUrl: a.wsUrl },
          { id: "b", httpUrl: b.httpUrl, wsUrl: b.wsUrl },
        ]),
      );
      key = await s.putKey();
    });
  });

  after(async () => {
    await gw?.stop();
    await a?.close();
    await b?.close();
  });

  it("re-subscribes on the other upstream; clients keep their ids and keep receiving", async () => {
    const url = `ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`;
    const c1 = await TestWsClient.open(url);
    const c2 = await TestWsClient.open(url);
    try {
      const s1 = (await c1.call("eth_subscribe", ["newHeads"])).result;
      const s2 = (await c2.call("eth_subscribe", ["newHeads"])).result;
      assert.equal(a.subscriptions() + b.subscriptions(), 1);
      const [used, other] = a.subscriptions() === 1 ? [a, b] : [b, a];
      used.emitHead();
      await c1.until(() => c1.notifications(s1).length === 1);
      await used.kill();
      await c1.until(() => other.subscriptions() === 1, 5000, "re-subscription on the other upstream");
      assert.equal(gw.plane.ws.upstreamSubscriptionCount("eth"), 1);
      // The heads after the one the clients have (the same head again would not be sent: ws-heads.test.ts).
      other.emitHeadAt(0x102);
      other.emitHeadAt(0x103);
      await c1.until(() => c1.notifications(s1).length === 3, 5000, "c1 notifications after failover");
      await c2.until(() => c2.notifications(s2).length === 3, 5000, "c2 notifications after failover");
      // Requests keep working too (HTTP pool fails over).
      assert.equal((await c1.call("eth_chainId")).result, "0x7a69");
    } finally {
      c1.terminate();
      c2.terminate();
    }
  });
});

describe("WebSocket shutdown", function () {
  this.timeout(30_000);

  it("closes client sockets with 1001 going away after answering in-flight requests", async () => {
    const a = await startStubWsUpstream();
    let key = "";
    const gw = await startGateway({}, async (s) => {
      await s.putNetwork(wsNetwork("eth", "EVM", [{ id: "a", httpUrl: a.httpUrl, wsUrl: a.wsUrl }]));
      key = await s.putKey();
    });
    try {
      const c = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`);
      await c.call("eth_subscribe", ["newHeads"]);
      const pending = c.call("test_slow");
      // In flight once the node has it (it answers 300 ms later).
      await eventually(() => a.slowCalls() === 1, "the slow call at the node");
      const closing = gw.plane.close();
      assert.equal((await pending).result, "0x");
      await c.waitClosed(5000);
      assert.equal(c.closeCode, 1001);
      await closing;
      assert.equal(a.subscriptions(), 0);
    } finally {
      await gw.stop();
      await a.close();
    }
  });
});

describe("WebSocket keep-alive", function () {
  this.timeout(40_000);

  it("pings idle clients: one that answers stays, one that does not is closed after WS_IDLE_TIMEOUT_S", async () => {
    const a = await startStubWsUpstream();
    let key = "";
    const gw = await startGateway({ WS_IDLE_TIMEOUT_S: "8" }, async (s) => {
      await s.putNetwork(wsNetwork("eth", "EVM", [{ id: "a", httpUrl: a.httpUrl, wsUrl: a.wsUrl }]));
      key = await s.putKey();
    });
    const url = `ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`;
    const live = await TestWsClient.open(url);
    const dead = new TestWsClient(new WebSocket(url, { autoPong: false }));
    try {
      await new Promise((r) => dead.ws.once("open", r));
      let pings = 0;
      live.ws.on("ping", () => pings++);
      await dead.waitClosed(20_000);
      assert.ok(pings >= 1, "the gateway pinged the idle client");
      assert.equal(live.ws.readyState, WebSocket.OPEN);
      assert.equal((await live.call("eth_chainId")).result, "0x7a69");
    } finally {
      live.terminate();
      dead.terminate();
      await gw.stop();
      await a.close();
    }
  });
});
