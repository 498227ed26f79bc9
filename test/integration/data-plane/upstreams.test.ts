import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { freePort } from "../../helpers/ports";
import { evmNetwork } from "../../helpers/seed-redis";
import { type SubstrateTestNode, startSubstrateTestNode } from "../../substrate-node";
import { type Gateway, post, sleep, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";

const chainId = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };

/** The loaded network's upstream ids, comma-separated ("" while it is not loaded). */
const upstreamIds = (gw: Gateway, slug: string) =>
  (gw.plane.context.upstreams.get(slug)?.describe() ?? []).map((u) => u.id).join(",");

describe("data plane upstreams: failover, health, live changes", function () {
  this.timeout(60_000);
  let a: StubUpstream;
  let b: StubUpstream;
  let gw: Gateway;
  let key: string;
  let url: string;
  /** How far upstream `id` of eth is behind the best head, as the health checks saw it. */
  const lagOf = (id: string) => {
    const pool = gw.plane.context.upstreams.get("eth")!;
    return pool.bestHead() - pool.describe().find((u) => u.id === id)!.head;
  };
  beforeEach(async () => {
    a = await new StubUpstream().start();
    b = await new StubUpstream().start();
    gw = await startGateway(
      {
        CACHE_MAX_BYTES: "0",
        UPSTREAM_COALESCE_MAX: "1",
        BREAKER_FAILURE_THRESHOLD: "2",
        BREAKER_COOLDOWN_MS: "300",
        UPSTREAM_TIMEOUT_MS: "500",
      },
      async (s) => {
        await s.putNetwork(
          evmNetwork("eth", [
            { id: "a", httpUrl: a.url },
            { id: "b", httpUrl: b.url },
          ]),
        );
        key = await s.putKey();
      },
    );
    url = `${gw.base}/eth/rpc?apikey=${key}`;
  });

  afterEach(async () => {
    await gw.stop();
    await a.stop();
    await b.stop();
  });

  it("spreads load over healthy upstreams and never forwards the apikey", async () => {
    let sawKey = false;
    const server = createServer((req, res) => {
      if ((req.url ?? "").includes(key) || req.headers.apikey !== undefined) sawKey = true;
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString();
      });
      req.on("end", () => {
        if (body.includes(key)) sawKey = true;
        const r = JSON.parse(body) as { id: number };
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: r.id, result: "0x1" }));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const spy = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await gw.seeder.putNetwork(evmNetwork("spy", [{ id: "spy", httpUrl: spy }]));
    await gw.seeder.publish({ type: "networks.update" });
    await eventually(() => gw.plane.context.upstreams.get("spy") !== undefined, "the spy network is loaded");
    assert.equal((await post(`${gw.base}/spy/rpc?apikey=${key}`, chainId)).status, 200);
    assert.equal((await post(`${gw.base}/spy/rpc`, chainId, { apikey: key })).status, 200);
    assert.ok(!sawKey, "apikey reached the upstream");
    server.close();

    a.reset();
    b.reset();
    await Promise.all(Array.from({ length: 60 }, () => post(url, { ...chainId, method: "eth_gasPrice" })));
    assert.ok(a.count("eth_gasPrice") > 5, `a served ${a.count("eth_gasPrice")}`);
    assert.ok(b.count("eth_gasPrice") > 5, `b served ${b.count("eth_gasPrice")}`);
  });

  it("keeps answering when one upstream is killed mid-run (failover), then opens its breaker", async () => {
    let failures = 0;
    const run = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const r = await post(url, { ...chainId, id: i });
        if (r.status !== 200) failures++;
      }
    };
    await run(20);
    await a.stop();
    await run(50);
    // Selection avoids a after its first failure, so its breaker may be opened by the health probes
    // (every 200 ms here) rather than by calls: calls go on until it is, and none fails meanwhile.
    const pool = gw.plane.context.upstreams.get("eth")!;
    const open = () => pool.describe().find((u) => u.id === "a")!.breakerOpen;
    for (let i = 0; i < 200 && !open(); i++) await run(5);
    assert.equal(failures, 0);
    assert.ok(open());
  });

  it("fails over on 5xx, garbage and timeouts", async () => {
    for (const mode of ["error500", "garbage", "hang"] as const) {
      a.mode = mode;
      for (let i = 0; i < 6; i++) {
        const r = await post(url, { ...chainId, id: i });
        assert.equal(r.status, 200, `${mode}: ${r.text}`);
        assert.equal(r.json.result, "0x7a69");
      }
      a.mode = "ok";
      await sleep(400);
    }
  });

  it("all upstreams down: 502 unreachable, then 503 once breakers are open; 504 on timeout", async () => {
    await a.stop();
    await b.stop();
    const first = await post(url, chainId);
    assert.equal(first.status, 502, first.text);
    assert.equal(first.json.error.code, -32603);
    assert.equal(first.json.error.data.category, "Node Error");
    assert.equal(first.json.error.data.reason, GatewayError.UpstreamUnreachable.reason);
    assert.equal(first.json.id, 1);
    await post(url, chainId);
    const later = await post(url, chainId);
    assert.equal(later.status, 503, later.text);
    assert.equal(later.json.error.code, -32603);
    assert.equal(later.json.error.data.reason, GatewayError.NoUpstream.reason);
    const batch = await post(url, [chainId, { ...chainId, id: 2 }]);
    assert.equal(batch.status, 503);
    assert.equal(batch.json.error.code, -32603);
  });

  it("504 when every upstream times out", async () => {
    a.mode = "hang";
    b.mode = "hang";
    const r = await post(url, chainId);
    assert.equal(r.status, 504, r.text);
    assert.equal(r.json.error.code, -32603);
    assert.equal(r.json.error.data.reason, GatewayError.UpstreamTimeout.reason);
  });

  it("upstream JSON-RPC errors pass through with the node's code, per element in batches", async () => {
    const single = await post(url, { jsonrpc: "2.0", id: "e", method: "stub_error" });
    assert.equal(single.status, 200);
    assert.deepEqual(single.json, {
      jsonrpc: "2.0",
      id: "e",
      error: { code: -32000, message: "execution reverted" },
    });
    const batch = await post(url, [
      { jsonrpc: "2.0", id: 1, method: "stub_error" },
      { jsonrpc: "2.0", id: 2, method: "eth_chainId" },
      { jsonrpc: "2.0", id: 3, method: "stub_invalidParams" },
    ]);
    assert.equal(batch.status, 200);
    assert.equal(batch.json[0].error.code, -32000);
    assert.equal(batch.json[1].result, "0x7a69");
    assert.equal(batch.json[2].error.code, -32602);
    const metrics = await (await fetch(`${gw.metricsBase}/metrics`)).text();
    assert.match(metrics, /rpcgw_requests_total\{network="eth",category="Node Error"\} [1-9]/);
    assert.match(metrics, /rpcgw_requests_total\{network="eth",category="Client Error"\} [1-9]/);
  });

  it("spreads a batch of 100 over both upstreams and reassembles it in order", async () => {
    a.reset();
    b.reset();
    const batch = Array.from({ length: 100 }, (_, i) => ({
      jsonrpc: "2.0",
      id: i,
      method: "x_m",
      params: [i],
    }));
    const r = await post(url, batch);
    assert.equal(r.status, 200);
    r.json.forEach((el: { id: number; result: { params: number[] } }, i: number) => {
      assert.equal(el.id, i);
      assert.deepEqual(el.result.params, [i]);
    });
    assert.equal(a.count("x_m") + b.count("x_m"), 100);
    assert.ok(a.count("x_m") > 0 && b.count("x_m") > 0, `a=${a.count("x_m")} b=${b.count("x_m")}`);
  });

  it("applies networks.update live: new upstream set, new network, removed network", async () => {
    const c = await new StubUpstream().start();
    try {
      await gw.seeder.putNetwork(evmNetwork("eth", [{ id: "c", httpUrl: c.url }]));
      await gw.seeder.putNetwork(evmNetwork("other", [{ id: "c2", httpUrl: c.url }]));
      await gw.seeder.publish({ type: "networks.update" });
      await eventually(
        () => gw.plane.context.upstreams.get("other") !== undefined && upstreamIds(gw, "eth") === "c",
        "the new networks are loaded",
      );
      a.reset();
      b.reset();
      c.reset();
      for (let i = 0; i < 10; i++) assert.equal((await post(url, { ...chainId, method: "x_y" })).status, 200);
      assert.equal(c.count("x_y"), 10);
      assert.equal(a.count("x_y") + b.count("x_y"), 0);
      assert.equal((await post(`${gw.base}/other/rpc?apikey=${key}`, chainId)).status, 200);
      await gw.seeder.deleteNetwork("other");
      await gw.seeder.publish({ type: "networks.update" });
      await eventually(() => gw.plane.context.upstreams.get("other") === undefined, "the network is gone");
      assert.equal((await post(`${gw.base}/other/rpc?apikey=${key}`, chainId)).status, 404);
    } finally {
      await c.stop();
    }
  });

  it("skips an upstream lagging behind the best head", async () => {
    a.head = 1000;
    b.head = 10;
    // The health checks (every 200 ms here) learn both heads.
    const pool = gw.plane.context.upstreams.get("eth")!;
    await eventually(() => pool.bestHead() === 1000 && lagOf("b") === 990, "the heads are known");
    b.reset();
    for (let i = 0; i < 20; i++) await post(url, { ...chainId, method: "q_q" });
    assert.equal(b.count("q_q"), 0);
  });
});

describe("data plane upstream coalescing", function () {
  this.timeout(60_000);
  let stub: StubUpstream;
  let gw: Gateway;
  let url: string;

  before(async () => {
    stub = await new StubUpstream().start();
    let key = "";
    gw = await startGateway({ CACHE_MAX_BYTES: "0", UPSTREAM_COALESCE_MAX: "8" }, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
      key = await s.putKey();
    });
    url = `${gw.base}/eth/rpc?apikey=${key}`;
  });

  after(async () => {
    await gw?.stop();
    await stub?.stop();
  });

  const burst = async (n: number) => {
    const rs = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        post(url, { jsonrpc: "2.0", id: `c${i}`, method: "eth_call", params: [{ i }] }),
      ),
    );
    rs.forEach((r, i) => {
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.id, `c${i}`);
      assert.deepEqual(r.json.result, { method: "eth_call", params: [{ i }] });
    });
  };

  it("sends concurrent single calls upstream as batches of at most UPSTREAM_COALESCE_MAX, answers split back", async () => {
    stub.reset();
    await burst(64);
    assert.equal(stub.count("eth_call"), 64);
    assert.ok(stub.exchanges < 64, `expected coalesced exchanges, got ${stub.exchanges}`);
    assert.ok(stub.exchanges >= 8, `batches must hold at most 8 calls (${stub.exchanges} exchanges)`);
  });

  it("falls back to one exchange per call when the node refuses batches", async () => {
    stub.refuseBatches = true;
    try {
      await burst(32);
    } finally {
      stub.refuseBatches = false;
    }
  });

  it("never coalesces sends", async () => {
    stub.reset();
    await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        post(url, { jsonrpc: "2.0", id: i, method: "eth_sendRawTransaction", params: [`0x0${i}`] }),
      ),
    );
    // Counted by what the exchanges carry: the health probes run beside them.
    const sends = stub.bodies.filter((b) => b.includes("eth_sendRawTransaction"));
    assert.equal(sends.length, 16, "one exchange per send");
    assert.equal(stub.count("eth_sendRawTransaction"), 16);
  });
});

describe("data plane response cache", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let proxy: StubUpstream;
  let gw: Gateway;
  let url: string;

  before(async () => {
    anvil = await startAnvil();
    proxy = await new StubUpstream(anvil.httpUrl).start();
    gw = await startGateway({ HEALTH_CHECK_INTERVAL_MS: "100000" }, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "p", httpUrl: proxy.url }]));
      url = `${gw?.base}`;
      const key = await s.putKey();
      url = key;
    });
    url = `${gw.base}/eth/rpc?apikey=${url}`;
  });

  after(async () => {
    await gw.stop();
    await proxy.stop();
    await anvil.stop();
  });

  it("answers a repeated cacheable request from cache (stored on its second request) with X-Cache HIT and the caller's id", async () => {
    proxy.reset();
    // Admission "second": the first answer is not stored (one-off requests take no cache memory), the
    // second is, the third is a hit.
    const first = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
    assert.equal(first.headers.get("x-cache"), "MISS");
    const second = await post(url, { jsonrpc: "2.0", id: 2, method: "eth_chainId" });
    assert.equal(second.headers.get("x-cache"), "MISS");
    const third = await post(url, { jsonrpc: "2.0", id: "three", method: "eth_chainId" });
    assert.equal(third.headers.get("x-cache"), "HIT");
    assert.deepEqual(third.json, { jsonrpc: "2.0", id: "three", result: "0x7a69" });
    assert.equal(proxy.count("eth_chainId"), 2);
    const balance = {
      jsonrpc: "2.0",
      id: 3,
      method: "eth_getBalance",
      params: [`0x${"1".repeat(40)}`, "latest"],
    };
    await post(url, balance);
    await post(url, balance);
    const hit = await post(url, balance);
    assert.equal(hit.headers.get("x-cache"), "HIT");
    assert.equal(proxy.count("eth_getBalance"), 2);
    const metrics = await (await fetch(`${gw.metricsBase}/metrics`)).text();
    assert.match(metrics, /rpcgw_cache_lookups_total\{network="eth",result="hit"\} [1-9]/);
    assert.match(metrics, /rpcgw_cache_lookups_total\{network="eth",result="miss"\} [1-9]/);
  });

  it("never caches batches, sends, pending state, errors or nulls", async () => {
    proxy.reset();
    for (let i = 0; i < 3; i++) {
      const r = await post(url, [{ jsonrpc: "2.0", id: 1, method: "eth_chainId" }]);
      assert.equal(r.headers.get("x-cache"), null);
    }
    assert.equal(proxy.count("eth_chainId"), 3);
    const pending = {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getTransactionCount",
      params: [`0x${"2".repeat(40)}`, "pending"],
    };
    await post(url, pending);
    await post(url, pending);
    assert.equal(proxy.count("eth_getTransactionCount"), 2);
    const nullTx = {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getTransactionReceipt",
      params: [`0x${"3".repeat(64)}`],
    };
    const n1 = await post(url, nullTx);
    assert.equal(n1.json.result, null);
    await post(url, nullTx);
    assert.equal(proxy.count("eth_getTransactionReceipt"), 2);
    const err = { jsonrpc: "2.0", id: 1, method: "eth_getBalance", params: ["bad", "latest"] };
    await post(url, err);
    await post(url, err);
    assert.equal(proxy.count("eth_getBalance"), 2);
    const send = { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: ["0x00"] };
    await post(url, send);
    await post(url, send);
    assert.equal(proxy.count("eth_sendRawTransaction"), 2);
  });

  it("shares one upstream call among identical in-flight requests", async () => {
    proxy.reset();
    proxy.delayMs = 200;
    try {
      const req = { jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: ["0x0", false] };
      const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => post(url, { ...req, id: i })));
      rs.forEach((r, i) => {
        assert.equal(r.status, 200);
        assert.equal(r.json.id, i);
        assert.equal(r.json.result.number, "0x0");
      });
      assert.equal(proxy.count("eth_getBlockByNumber"), 1);
    } finally {
      proxy.delayMs = 0;
    }
  });

  it("keys per-block entries to the head: a new head means a fresh answer", async () => {
    proxy.reset();
    // eth_gasPrice: per block (eth_blockNumber is answered from the served head, never fetched).
    const req = { jsonrpc: "2.0", id: 1, method: "eth_gasPrice" };
    await post(url, req);
    await post(url, req);
    await post(url, req);
    // Stored at its key's second request (CACHE_ADMISSION second), a hit at the third.
    assert.equal(proxy.count("eth_gasPrice"), 2);
    await fetch(anvil.httpUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "evm_mine", params: [] }),
    });
    await gw.plane.context.upstreams.get("eth")!.healthCheck();
    await post(url, req);
    assert.equal(proxy.count("eth_gasPrice"), 3, "fetched again at the new head");
  });

  it("drops cached answers when the network's definition changes (networks.update)", async () => {
    const first = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
    assert.equal(first.json.result, "0x7a69");
    const other = await new StubUpstream().start();
    other.chainIdHex = "0x1";
    try {
      await gw.seeder.putNetwork(evmNetwork("eth", [{ id: "other", httpUrl: other.url }]));
      await gw.seeder.publish({ type: "networks.update" });
      await eventually(() => upstreamIds(gw, "eth") === "other", "the network's new upstream is loaded");
      const after = await post(url, { jsonrpc: "2.0", id: 2, method: "eth_chainId" });
      assert.equal(after.json.result, "0x1");
      assert.equal(after.headers.get("x-cache"), "MISS");
    } finally {
      await gw.seeder.putNetwork(evmNetwork("eth", [{ id: "p", httpUrl: proxy.url }]));
      await gw.seeder.publish({ type: "networks.update" });
      await eventually(() => upstreamIds(gw, "eth") === "p", "the network's upstream is restored");
      await other.stop();
    }
  });
});

describe("data plane with a Substrate network (substrate test node stand-in)", function () {
  this.timeout(60_000);
  let node: SubstrateTestNode;
  let gw: Gateway;
  let url: string;

  before(async () => {
    node = await startSubstrateTestNode({
      port: await freePort(),
      blockTimeMs: 0,
      rpcMethods: "Unsafe",
      startBlock: 5,
    });
    let key = "";
    gw = await startGateway({}, async (s) => {
      await s.putNetwork({
        slug: "dot",
        name: "Polkadot dev",
        protocol: "SUBSTRATE",
        chainId: null,
        allowDebug: false,
        upstreams: [{ id: "sub-1", httpUrl: node.httpUrl, wsUrl: node.wsUrl, weight: 1 }],
      });
      key = await s.putKey();
    });
    url = `${gw.base}/dot/rpc?apikey=${key}`;
  });

  after(async () => {
    await gw?.stop();
    await node?.close();
  });

  it("health-checks with chain_getHeader and tracks the head", async () => {
    const pool = gw.plane.context.upstreams.get("dot")!;
    assert.equal(pool.bestHead(), node.bestNumber());
  });

  it("serves safe methods and refuses author_rotateKeys though the node would serve it", async () => {
    const chain = await post(url, { jsonrpc: "2.0", id: 1, method: "system_chain", params: [] });
    assert.equal(chain.status, 200);
    assert.equal(typeof chain.json.result, "string");
    const rotate = await post(url, { jsonrpc: "2.0", id: 2, method: "author_rotateKeys", params: [] });
    assert.equal(rotate.json.error.code, -32601);
    assert.match(rotate.json.error.message, /author_rotateKeys is not available on shared nodes/);
    assert.equal(node.keystore().length, 0);
    assert.equal(node.requestCounts().author_rotateKeys ?? 0, 0);
  });
});
