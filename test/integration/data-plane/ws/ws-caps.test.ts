import assert from "node:assert/strict";
import { request } from "node:http";
import { ipBucket, parseIp } from "../../../../data-plane/src/allowlist/ip";
import { eventually } from "../../../helpers/eventually";
import { type Gateway, post, startGateway } from "../harness";
import { FakeClock, inSecond } from "../limits/fixtures";
import { type StubWsUpstream, startStubWsUpstream } from "./stub-ws-upstream";
import { TestWsClient, wsNetwork } from "./ws-client";

/** An upgrade attempt's outcome when refused: status, headers and the contract error body. */
interface Refused {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // biome-ignore lint/suspicious/noExplicitAny: test convenience
  body: any;
}

/** A raw WebSocket upgrade request, to read the refusal's headers (Retry-After) as well as its body. */
function upgradeRefusal(url: string, headers: Record<string, string>): Promise<Refused> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      headers: {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        ...headers,
      },
    });
    req.on("upgrade", (_res, socket) => {
      socket.destroy();
      reject(new Error("upgraded"));
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: JSON.parse(Buffer.concat(chunks).toString()),
        }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

const from = (ip: string) => ({ "x-forwarded-for": ip });

describe("WebSocket caps: connections per key and per address, upstream subscriptions per workspace; IPv6 per /64", function () {
  this.timeout(30_000);
  let up: StubWsUpstream;
  let gw: Gateway;
  let wsBase = "";
  let httpBase = "";
  let metricsBase = "";
  let keyA = "";
  let keyA2 = "";
  let keyB = "";
  const clock = new FakeClock(inSecond(100));
  const clients: TestWsClient[] = [];
  const open = async (path: string, headers: Record<string, string> = {}) => {
    const c = await TestWsClient.open(`${wsBase}${path}`, headers);
    clients.push(c);
    return c;
  };
  const refusedOpen = (path: string, headers: Record<string, string> = {}) =>
    TestWsClient.open(`${wsBase}${path}`, headers).then(
      (c) => {
        c.terminate();
        return assert.fail("upgraded");
      },
      (e: { status: number; body: { error: { code: number; data: Record<string, unknown> } } }) => e,
    );
  const plan = {
    name: "big",
    requestsPerSecond: 100_000,
    dailyRequestLimit: 10_000_000,
    monthlyRequestLimit: null,
  };

  before(async () => {
    up = await startStubWsUpstream();
    gw = await startGateway(
      {
        TRUSTED_PROXIES: "127.0.0.1/32",
        RATE_LIMIT_MODE: "local",
        PUBLIC_RATE_LIMIT_PER_SECOND: "3",
        CACHE_MAX_BYTES: "0",
        UPSTREAM_WS_CONNECTIONS: "1",
        WS_MAX_CONNECTIONS_PER_KEY: "3",
        WS_MAX_CONNECTIONS_PER_IP: "4",
        WS_MAX_UPSTREAM_SUBSCRIPTIONS_PER_WORKSPACE: "2",
      },
      async (s) => {
        await s.putNetwork(wsNetwork("eth", "EVM", [{ id: "a", httpUrl: up.httpUrl, wsUrl: up.wsUrl }]));
        keyA = await s.putKey({ workspaceId: "ws-a", appId: "app-a", plan });
        keyA2 = await s.putKey({ workspaceId: "ws-a", appId: "app-a2", plan });
        keyB = await s.putKey({ workspaceId: "ws-b", appId: "app-b", plan });
      },
      { clock },
    );
    wsBase = `ws://127.0.0.1:${gw.port()}`;
    httpBase = gw.base;
    metricsBase = gw.metricsBase;
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.terminate();
    // Every test starts from no open sockets (and checks the counters get back there).
    await eventually(() => gw.plane.ws.openConnections() === 0, "connection counters back to 0");
    clock.advance(1000);
  });

  after(async () => {
    await gw?.stop();
    await up?.close();
  });

  it("refuses the key's 4th socket before upgrading (429 ws_connection_limit, Retry-After) and counts exactly under a burst", async () => {
    // A burst of 8 upgrades with one key from 8 addresses (the first needs a Redis key lookup, so
    // several decisions are pending at once): exactly 3 open.
    const attempts = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => open(`/eth/rpc?apikey=${keyA}`, from(`198.51.100.${i + 1}`))),
    );
    const opened = attempts.filter((a) => a.status === "fulfilled").length;
    assert.equal(opened, 3, "exactly the cap opened");
    for (const a of attempts) {
      if (a.status === "rejected") {
        const e = a.reason as {
          status: number;
          body: { error: { code: number; data: Record<string, unknown> } };
        };
        assert.equal(e.status, 429);
        assert.equal(e.body.error.code, -32005);
        assert.equal(e.body.error.data.reason, "ws_connection_limit");
        assert.equal(e.body.error.data.category, "Too Many Requests");
        assert.equal(e.body.error.data.limit, 3);
      }
    }
    assert.equal(gw.plane.ws.openConnections({ key: "app:app-a" }), 3);
    const raw = await upgradeRefusal(`${httpBase}/eth/rpc?apikey=${keyA}`, from("198.51.100.50"));
    assert.equal(raw.status, 429);
    assert.equal(raw.headers["retry-after"], "1");
    assert.equal(raw.body.error.data.retryAfterMs, 1000);
    assert.equal(typeof raw.body.error.data.requestId, "string");
    // The app's other key and another workspace are not affected.
    await open(`/eth/rpc?apikey=${keyA2}`, from("198.51.100.60"));
    await open(`/eth/rpc?apikey=${keyB}`, from("198.51.100.61"));
    // The open sockets still work.
    assert.equal((await clients[0]!.call("eth_chainId")).result, "0x7a69");
    const metrics = await (await fetch(`${metricsBase}/metrics`)).text();
    assert.match(metrics, /rpcgw_ws_cap_refusals_total\{reason="ws_connection_limit"\} 6/);
  });

  it("releases each socket exactly once after abrupt closes, so the client can reconnect", async () => {
    for (let round = 0; round < 3; round++) {
      const cs = await Promise.all(
        Array.from({ length: 3 }, (_, i) => open(`/eth/rpc?apikey=${keyA}`, from(`203.0.113.${i + 1}`))),
      );
      assert.equal(gw.plane.ws.openConnections({ key: "app:app-a" }), 3);
      // Abrupt: TCP dropped without a close frame, one of them mid-request.
      cs[0]!.sendRaw('{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}');
      for (const c of cs) c.terminate();
      await eventually(() => gw.plane.ws.openConnections() === 0, "counters at 0");
      assert.equal(gw.plane.ws.openConnections({ key: "app:app-a" }), 0);
      assert.equal(gw.plane.ws.openConnections({ ip: "203.0.113.1" }), 0);
    }
    // A graceful close frees the slot the same way, and the gateway is still serving.
    const c = await open(`/eth/rpc?apikey=${keyA}`);
    c.close();
    await c.waitClosed();
    await eventually(() => gw.plane.ws.openConnections() === 0, "counters at 0");
    assert.equal(
      (await post(`${httpBase}/eth/rpc?apikey=${keyA}`, { jsonrpc: "2.0", id: 1, method: "eth_chainId" }))
        .status,
      200,
    );
  });

  it("caps sockets per address, IPv6 per /64, public and keyed together; checked before the key lookup", async () => {
    const net = "2001:db8:7:1";
    await open("/eth/public", from(`${net}::1`));
    await open("/eth/public", from(`${net}::2`));
    await open(`/eth/rpc?apikey=${keyA}`, from(`${net}:aaaa:bbbb:cccc:dddd`));
    await open(`/eth/rpc?apikey=${keyB}`, from(`${net}::ffff`));
    assert.equal(gw.plane.ws.openConnections({ ip: `${net}::/64` }), 4);
    // Another address of the same /64: refused, public or keyed.
    const e = await refusedOpen("/eth/public", from(`${net}::5`));
    assert.equal(e.status, 429);
    assert.equal(e.body.error.data.reason, "ws_ip_connection_limit");
    assert.equal(e.body.error.data.limit, 4);
    assert.equal(
      (await refusedOpen(`/eth/rpc?apikey=${keyB}`, from(`${net}::6`))).body.error.data.reason,
      "ws_ip_connection_limit",
    );
    // Refused before the key is looked up: an unknown key from a capped address gets the 429, not a 401.
    assert.equal((await refusedOpen("/eth/rpc?apikey=nope", from(`${net}::7`))).status, 429);
    // The next /64 and an IPv4 client are not affected.
    await open("/eth/public", from("2001:db8:7:2::1"));
    await open("/eth/public", from("198.51.100.9"));
    // IPv4-mapped IPv6 counts as the IPv4 address.
    await open("/eth/public", from("::ffff:198.51.100.9"));
    assert.equal(gw.plane.ws.openConnections({ ip: "198.51.100.9" }), 2);
  });

  it("public endpoint rate limit (HTTP and WS): two addresses of one /64 share a bucket, another /64 does not", async () => {
    const url = `${httpBase}/eth/public`;
    const call = (id: number) => ({ jsonrpc: "2.0", id, method: "eth_chainId" });
    for (let i = 0; i < 3; i++) {
      const r = await post(url, call(i), from(i % 2 === 0 ? "2001:db8:9:9::1" : "2001:db8:9:9:8000::2"));
      assert.equal(r.status, 200, r.text);
    }
    const over = await post(url, call(9), from("2001:db8:9:9::3"));
    assert.equal(over.status, 429);
    assert.equal(over.json.error.data.reason, "rate_limit");
    // Another /64 has its own budget.
    assert.equal((await post(url, call(10), from("2001:db8:9:a::1"))).status, 200);
    // A WebSocket on the public endpoint from the same /64 draws on the same (spent) bucket.
    const c = await open("/eth/public", from("2001:db8:9:9::77"));
    const w = await c.call("eth_chainId");
    assert.equal(w.error?.data?.reason, "rate_limit");
    // IPv4-mapped IPv6 and IPv4 share one bucket.
    for (let i = 0; i < 3; i++) assert.equal((await post(url, call(i), from("192.0.2.44"))).status, 200);
    assert.equal((await post(url, call(4), from("::ffff:192.0.2.44"))).status, 429);
    assert.equal(ipBucket(parseIp("2001:db8:9:9::77")), "2001:db8:9:9::/64");
  });

  it("budgets distinct upstream subscriptions per workspace: a new one past it is refused, a merged join is not", async () => {
    const a1 = await open(`/eth/rpc?apikey=${keyA}`);
    const a2 = await open(`/eth/rpc?apikey=${keyA2}`);
    const b = await open(`/eth/rpc?apikey=${keyB}`);
    const logs = (addr: string) => ["logs", { address: `0x${addr.repeat(40)}` }];
    // A subscribe the node refuses leaves no share behind.
    const bogus = await a1.call("eth_subscribe", ["bogus"]);
    assert.equal(bogus.error.code, -32602);
    assert.equal(gw.plane.ws.tenantUpstreamSubscriptions("eth", "w:ws-a"), 0);
    const upstreamBefore = up.subscribeCalls();
    assert.ok((await a1.call("eth_subscribe", ["newHeads"])).result);
    assert.ok((await a1.call("eth_subscribe", logs("1"))).result);
    assert.equal(gw.plane.ws.tenantUpstreamSubscriptions("eth", "w:ws-a"), 2);
    // A third distinct one, from another app of the same workspace: refused, never sent upstream.
    const over = await a2.call("eth_subscribe", logs("2"));
    assert.equal(over.error.code, -32005);
    assert.equal(over.error.data.reason, "ws_upstream_subscription_limit");
    assert.equal(over.error.data.category, "Too Many Requests");
    assert.equal(over.error.data.limit, 2);
    assert.equal(over.error.data.retryAfterMs, 1000);
    assert.equal(up.subscribeCalls(), upstreamBefore + 2);
    // Another workspace has its own budget.
    const bLogs = await b.call("eth_subscribe", logs("2"));
    assert.ok(bLogs.result);
    // Joining a subscription that already exists upstream costs the node nothing: allowed.
    const joined = await a2.call("eth_subscribe", logs("2"));
    assert.ok(joined.result, JSON.stringify(joined));
    assert.equal(up.subscribeCalls(), upstreamBefore + 3);
    assert.equal(gw.plane.ws.tenantUpstreamSubscriptions("eth", "w:ws-a"), 3);
    // Still refused for another new one until shares are released.
    assert.equal(
      (await a1.call("eth_subscribe", logs("3"))).error.data.reason,
      "ws_upstream_subscription_limit",
    );
    // Unsubscribing releases the share (the merged one stays: workspace b still holds it).
    assert.equal((await a2.call("eth_unsubscribe", [joined.result])).result, true);
    assert.equal(gw.plane.ws.tenantUpstreamSubscriptions("eth", "w:ws-a"), 2);
    // Closing abruptly releases the rest; the workspace can subscribe again.
    a1.terminate();
    await eventually(
      () => gw.plane.ws.tenantUpstreamSubscriptions("eth", "w:ws-a") === 0,
      "workspace a released",
    );
    assert.ok((await a2.call("eth_subscribe", logs("3"))).result);
    assert.ok((await a2.call("eth_subscribe", logs("4"))).result);
    assert.equal(gw.plane.ws.tenantUpstreamSubscriptions("eth", "w:ws-a"), 2);
    a2.terminate();
    b.terminate();
    await eventually(
      () =>
        gw.plane.ws.hubs.get("eth")?.tenantCount() === 0 &&
        gw.plane.ws.upstreamSubscriptionCount("eth") === 0,
      "every share released",
    );
  });

  it("public endpoint subscriptions draw on a per-address budget", async () => {
    const p = await open("/eth/public", from("2001:db8:5:5::1"));
    const q = await open("/eth/public", from("2001:db8:5:5::2"));
    clock.advance(1000);
    assert.ok((await p.call("eth_subscribe", ["newHeads"])).result);
    assert.ok((await p.call("eth_subscribe", ["newPendingTransactions"])).result);
    clock.advance(1000);
    const over = await q.call("eth_subscribe", ["logs", {}]);
    assert.equal(over.error?.data?.reason, "ws_upstream_subscription_limit");
    assert.equal(gw.plane.ws.tenantUpstreamSubscriptions("eth", "ip:2001:db8:5:5::/64"), 2);
  });

  it("refuses unknown and unsafe namespaces on shared nodes over HTTP and WS with the gateway's own message", async () => {
    const url = `${httpBase}/eth/rpc?apikey=${keyA}`;
    for (const m of [
      "foo_bar",
      "txpool_content",
      "les_peers",
      "system_peers",
      "eth_signTypedData_v4",
      "trace_block",
    ]) {
      const r = await post(url, { jsonrpc: "2.0", id: 1, method: m });
      assert.equal(r.status, 200);
      assert.equal(r.json.error.code, -32601, m);
      assert.equal(r.json.error.data.reason, "method_blocked");
      assert.match(r.json.error.message, new RegExp(`^${m} is not available on`));
    }
    const c = await open(`/eth/rpc?apikey=${keyA}`);
    const w = await c.call("parity_pendingTransactions");
    assert.equal(w.error.code, -32601);
    assert.match(w.error.message, /client-specific/);
    assert.equal((await c.call("eth_chainId")).result, "0x7a69");
  });
});
