import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import type { NodeRecord } from "../../../../shared/src/redis/records";
import { type Anvil, startAnvil } from "../../../helpers/anvil";
import { eventually } from "../../../helpers/eventually";
import { freePort } from "../../../helpers/ports";
import { TEST_REDIS_URL } from "../../../helpers/redis";
import { evmNetwork } from "../../../helpers/seed-redis";
import { type Gateway, post, sleep, startGateway } from "../harness";
import { StubUpstream } from "../stub-upstream";
import { TestWsClient } from "../ws/ws-client";

const NODE_ID = "6f1c2a4e-1b2c-4d5e-8f90-a1b2c3d4e5f6";

describe("data plane: dedicated node endpoint /nodes/{nodeId}/{KEY}", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let gw: Gateway;
  let redis: Redis;
  let unsafeKey: string;
  let safeKey: string;
  let appKey: string;

  const putNode = async (over: Partial<NodeRecord> = {}) => {
    const rec: NodeRecord = {
      nodeId: NODE_ID,
      workspaceId: "ws-test",
      protocol: "EVM",
      httpUrl: anvil.httpUrl,
      wsUrl: anvil.wsUrl,
      status: "SYNCED",
      ...over,
    };
    await redis.set(gw.seeder.names.node(NODE_ID), JSON.stringify(rec));
    await gw.publish({ type: "node.update", nodeId: NODE_ID });
  };
  const url = (key: string, id = NODE_ID) => `${gw.base}/nodes/${id}/${encodeURIComponent(key)}`;
  /**
   * The node's pool has seen anvil's head: an eth_blockNumber through the endpoint feeds its head
   * tracking, so asking until it answers anvil's head is waiting for that.
   */
  const headSeen = async () => {
    const direct = await post(anvil.httpUrl, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" });
    await eventually(async () => {
      const r = await post(url(unsafeKey), { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" });
      return r.json.result === direct.json.result;
    }, "the node's pool sees the new head");
  };

  before(async () => {
    anvil = await startAnvil();
    gw = await startGateway({}, async (s) => {
      await s.putNetwork(evmNetwork("eth-test", [{ id: "u1", httpUrl: anvil.httpUrl }]));
    });
    redis = new Redis(TEST_REDIS_URL);
    unsafeKey = await gw.seeder.putKey({ kind: "node", appId: null, nodeId: NODE_ID, rpcMethods: "UNSAFE" });
    safeKey = await gw.seeder.putKey({ kind: "node", appId: null, nodeId: NODE_ID, rpcMethods: "SAFE" });
    appKey = await gw.seeder.putKey();
    await putNode();
  });
  after(async () => {
    redis?.disconnect();
    await gw?.stop();
    await anvil?.stop();
  });

  it("forwards with the node's key (path or ?apikey=), echoing ids exactly", async () => {
    const r = await post(url(unsafeKey), { jsonrpc: "2.0", id: "x-1", method: "eth_chainId" });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { jsonrpc: "2.0", id: "x-1", result: "0x7a69" });
    const big = await post(
      url(unsafeKey),
      '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"eth_chainId"}',
    );
    assert.match(big.text, /"id":123456789012345678901234567890,/);
    const q = await post(`${gw.base}/nodes/${NODE_ID}?apikey=${encodeURIComponent(unsafeKey)}`, {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_blockNumber",
    });
    assert.equal(q.status, 200);
    const h = await post(
      `${gw.base}/nodes/${NODE_ID}`,
      { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
      { apikey: unsafeKey },
    );
    assert.equal(h.status, 200);
    const n = await post(url(unsafeKey), { jsonrpc: "2.0", method: "eth_chainId" });
    assert.equal(n.status, 204, "notification");
  });

  it("401 for a missing / unknown / app key or another node's key", async () => {
    for (const k of ["", "nope", appKey]) {
      const r = await post(k === "" ? `${gw.base}/nodes/${NODE_ID}` : url(k), {
        jsonrpc: "2.0",
        id: 1,
        method: "eth_chainId",
      });
      assert.equal(r.status, 401, k);
      assert.equal(r.json.error.code, -32016);
    }
    const r = await post(url(unsafeKey, "00000000-0000-4000-8000-000000000000"), {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_chainId",
    });
    assert.equal(r.status, 401);
  });

  it("UNSAFE passes everything; SAFE refuses unsafe methods per element with -32601", async () => {
    const u = await post(url(unsafeKey), { jsonrpc: "2.0", id: 1, method: "anvil_mine", params: [] });
    assert.equal(u.json.error, undefined, u.text);
    const s = await post(url(safeKey), [
      { jsonrpc: "2.0", id: 1, method: "anvil_mine", params: [] },
      { jsonrpc: "2.0", id: 2, method: "eth_chainId" },
      { jsonrpc: "2.0", id: 3 },
    ]);
    assert.equal(s.status, 200);
    assert.equal(s.json[0].error.code, -32601);
    assert.match(s.json[0].error.message, /rpc-methods is Safe/);
    assert.equal(s.json[1].result, "0x7a69");
    assert.equal(s.json[2].error.code, -32600);
  });

  it("503 -32603 while the node is not SYNCED or has no record; 502 when unreachable", async () => {
    await putNode({ status: "SYNCING" });
    let r = await post(url(unsafeKey), { jsonrpc: "2.0", id: 9, method: "eth_chainId" });
    assert.equal(r.status, 503);
    assert.equal(r.json.error.code, -32603);
    assert.equal(r.json.id, 9);
    assert.equal(r.json.error.data.reason, "node_unavailable");
    const port = await freePort();
    await putNode({ httpUrl: `http://127.0.0.1:${port}` });
    r = await post(url(unsafeKey), { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
    assert.equal(r.status, 502);
    await redis.del(gw.seeder.names.node(NODE_ID));
    await gw.publish({ type: "node.update", nodeId: NODE_ID });
    r = await post(url(unsafeKey), { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
    assert.equal(r.status, 503);
    await putNode();
    r = await post(url(unsafeKey), { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
    assert.equal(r.status, 200);
  });

  it("WebSocket on the same path: requests, SAFE refusal, eth_subscribe newHeads from the node (anvil)", async () => {
    const wsUrl = (key: string) => `ws://127.0.0.1:${gw.port()}/nodes/${NODE_ID}/${encodeURIComponent(key)}`;
    const c = await TestWsClient.open(wsUrl(unsafeKey));
    const s = await TestWsClient.open(wsUrl(safeKey));
    try {
      assert.equal((await c.call("eth_chainId")).result, "0x7a69");
      const sub = (await c.call("eth_subscribe", ["newHeads"])).result;
      assert.match(sub, /^0x[0-9a-f]+$/);
      assert.equal((await c.call("anvil_mine", [])).error, undefined, "UNSAFE passes anvil_mine");
      await c.until(() => c.notifications(sub).length >= 1, 5000, "newHeads");
      assert.equal(c.notifications(sub)[0].method, "eth_subscription");
      assert.equal((await c.call("eth_unsubscribe", [sub])).result, true);
      const refused = await s.call("anvil_mine", []);
      assert.equal(refused.error.code, -32601);
      assert.equal((await s.call("eth_chainId")).result, "0x7a69");
    } finally {
      c.terminate();
      s.terminate();
    }
  });

  it("node answers through the shared upstream client: a missing element, garbage and a node's 500 are rows, not crashes", async () => {
    // A node stub on loopback: eth_chainId answered, eth_blockNumber left out of a batch answer (a single
    // one, the pool's health probe, is answered), "garbage" answers HTML, "fail" answers 500.
    const seen: string[] = [];
    const stub = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString("utf8");
      });
      req.on("end", () => {
        const parsed = JSON.parse(body) as { id: number; method: string } | { id: number; method: string }[];
        if (!Array.isArray(parsed) && parsed.method === "eth_blockNumber") {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ jsonrpc: "2.0", id: parsed.id, result: "0x10" }));
          return;
        }
        seen.push(body);
        const calls = Array.isArray(parsed) ? parsed : [parsed];
        if (calls.some((c) => c.method === "garbage")) {
          res.writeHead(200, { "content-type": "text/html" }).end("<html>oops</html>");
          return;
        }
        if (calls.some((c) => c.method === "fail")) {
          res.writeHead(500, { "content-type": "application/json" }).end('{"error":"down"}');
          return;
        }
        const answers = calls
          .filter((c) => c.method !== "eth_blockNumber")
          .map((c) => ({ jsonrpc: "2.0", id: c.id, result: c.method === "eth_chainId" ? "0x1" : null }));
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
      });
    });
    await new Promise<void>((r) => stub.listen(0, "127.0.0.1", r));
    try {
      await putNode({ httpUrl: `http://127.0.0.1:${(stub.address() as AddressInfo).port}` });
      const b = await post(url(unsafeKey), [
        { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
        { jsonrpc: "2.0", id: 2, method: "eth_blockNumber" },
        { jsonrpc: "2.0", id: 3, method: "eth_getTransactionReceipt", params: ["0x01"] },
      ]);
      assert.equal(b.status, 200);
      assert.deepEqual(b.json[0], { jsonrpc: "2.0", id: 1, result: "0x1" });
      assert.equal(b.json[1].id, 2);
      assert.equal(b.json[1].error.data.reason, "upstream_bad_response");
      assert.deepEqual(b.json[2], { jsonrpc: "2.0", id: 3, result: null });
      // The node got one batch (the pool's own ids), methods and params as sent. (The pool's chain watch
      // polls it too, with single eth_getBlockByNumber calls, at any moment.)
      const batches = seen.filter((body) => body.startsWith("["));
      assert.equal(batches.length, 1);
      const sent = JSON.parse(batches[0]!) as { id: unknown; method: string; params?: unknown }[];
      assert.deepEqual(
        sent.map(({ method, params }) => ({ method, params })),
        [
          { method: "eth_chainId", params: undefined },
          { method: "eth_blockNumber", params: undefined },
          { method: "eth_getTransactionReceipt", params: ["0x01"] },
        ],
      );
      assert.equal(new Set(sent.map((c) => c.id)).size, 3, "distinct ids");
      for (const method of ["garbage", "fail"]) {
        const r = await post(url(unsafeKey), { jsonrpc: "2.0", id: 7, method });
        assert.equal(r.status, 502, method);
        assert.equal(r.json.id, 7);
        assert.equal(r.json.error.data.reason, "upstream_bad_response", method);
      }
      // The node's own answers keep flowing on the same client after those.
      const ok = await post(url(unsafeKey), { jsonrpc: "2.0", id: 8, method: "eth_chainId" });
      assert.deepEqual(ok.json, { jsonrpc: "2.0", id: 8, result: "0x1" });
      // The forwarding core's cache serves node endpoints too: once admitted (CACHE_ADMISSION=second: the
      // second sighting is stored), eth_chainId no longer reaches the node.
      await post(url(unsafeKey), { jsonrpc: "2.0", id: 9, method: "eth_chainId" });
      const chainIdCalls = () => seen.filter((body) => body.includes('"eth_chainId"')).length;
      const before = chainIdCalls();
      const again = await post(url(unsafeKey), { jsonrpc: "2.0", id: 10, method: "eth_chainId" });
      assert.deepEqual(again.json, { jsonrpc: "2.0", id: 10, result: "0x1" });
      assert.equal(chainIdCalls(), before, "answered from the cache");
    } finally {
      await putNode();
      await new Promise<void>((r) => stub.close(() => r()));
    }
    const back = await post(url(unsafeKey), { jsonrpc: "2.0", id: 9, method: "eth_chainId" });
    assert.equal(back.json.result, "0x7a69", "a changed node URL is followed");
  });

  it("HTTP method / content type / body checks; CORS preflight", async () => {
    const g = await fetch(url(unsafeKey));
    assert.equal(g.status, 405);
    const ct = await fetch(url(unsafeKey), {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: "{}",
    });
    assert.equal(ct.status, 415);
    const bad = await post(url(unsafeKey), "{nope");
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, -32700);
    const o = await fetch(url(unsafeKey), {
      method: "OPTIONS",
      headers: {
        origin: "https://x.example",
        "access-control-request-headers": "content-type, x-sdk-version",
      },
    });
    assert.equal(o.status, 204);
    assert.equal(o.headers.get("access-control-allow-origin"), "https://x.example");
    // The headers the preflight asks for are allowed (data-plane/src/server/cors.ts).
    assert.match(o.headers.get("access-control-allow-headers") ?? "", /, x-sdk-version$/);
    // A client's own well-formed X-Request-Id is the answer's id on node endpoints too.
    const mine = await post(url(unsafeKey), "{nope", { "x-request-id": "node-req-1" });
    assert.equal(mine.headers.get("x-request-id"), "node-req-1");
    assert.equal(mine.json.error.data.requestId, "node-req-1");
  });

  it("the forwarding core's finality-aware cache serves node endpoints too (blocks at or below finalized)", async () => {
    // A counting proxy in front of anvil as the node's URL; 100 blocks so anvil's finalized head (head - 64) is 36+.
    const proxy = await new StubUpstream(anvil.httpUrl).start();
    try {
      await fetch(anvil.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x64"] }),
      });
      await putNode({ httpUrl: proxy.url });
      const call = { jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: ["0x5", false] };
      // The pool learns the finalized head on its first health round (it starts with the pool).
      const deadline = Date.now() + 10_000;
      for (;;) {
        proxy.reset();
        for (let i = 0; i < 3; i++) {
          const r = await post(url(unsafeKey), call);
          assert.equal(r.json.result.number, "0x5");
        }
        // Admitted on the second sighting (CACHE_ADMISSION=second), then a hit: at most 2 reach the node.
        if (proxy.countExact("eth_getBlockByNumber", ["0x5", false]) <= 2) break;
        assert.ok(Date.now() < deadline, "block 5 was never cached as final on the node endpoint");
        await sleep(200);
      }
      // The head moves on (a per-block entry would be keyed to the old head now): still no upstream call.
      await fetch(anvil.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x3"] }),
      });
      await headSeen();
      proxy.reset();
      for (let i = 0; i < 3; i++) await post(url(unsafeKey), call);
      assert.equal(proxy.countExact("eth_getBlockByNumber", ["0x5", false]), 0, "answered from the cache");
      // A block above the finalized head is per head: after the head moves it reaches the node again.
      const recent = { jsonrpc: "2.0", id: 2, method: "eth_getBlockByNumber", params: ["0x64", false] };
      for (let i = 0; i < 3; i++) await post(url(unsafeKey), recent);
      await fetch(anvil.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x1"] }),
      });
      await headSeen();
      proxy.reset();
      await post(url(unsafeKey), recent);
      assert.equal(
        proxy.countExact("eth_getBlockByNumber", ["0x64", false]),
        1,
        "not final: keyed to the head",
      );
    } finally {
      await putNode();
      await proxy.stop();
    }
  });

  it("the forwarding core's eth_getLogs splitting serves node endpoints too (2,000-block chunks by default)", async () => {
    const proxy = await new StubUpstream(anvil.httpUrl).start();
    try {
      // 2,048 more blocks (the chain is past 100 already): the range 0..latest is over one 2,000-block chunk.
      await fetch(anvil.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x800"] }),
      });
      await putNode({ httpUrl: proxy.url });
      // The node's pool is made on its first call and must know the head, which resolves `latest` (with
      // the head unknown a tag range goes out whole).
      await headSeen();
      const filter = { fromBlock: "0x0", toBlock: "latest" };
      const direct = await fetch(anvil.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getLogs", params: [filter] }),
      }).then((r) => r.json() as Promise<{ result: unknown }>);
      proxy.reset();
      const r = await post(url(unsafeKey), {
        jsonrpc: "2.0",
        id: 3,
        method: "eth_getLogs",
        params: [filter],
      });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.result, direct.result);
      assert.ok(
        proxy.count("eth_getLogs") >= 2,
        `split into sub-ranges: ${proxy.count("eth_getLogs")} calls`,
      );
    } finally {
      await putNode();
      await proxy.stop();
    }
  });
});
