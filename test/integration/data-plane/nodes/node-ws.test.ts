import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { nodeUsageNetwork } from "../../../../data-plane/src/nodes/node-gateway";
import type { UsageContext, UsageRecorder } from "../../../../data-plane/src/usage/recorder";
import { hashApiKey } from "../../../../shared/src/crypto/api-key";
import type { KeyRecord, NodeRecord } from "../../../../shared/src/redis/records";
import { eventually } from "../../../helpers/eventually";
import { TEST_REDIS_URL } from "../../../helpers/redis";
import { type SubstrateTestNode, startSubstrateTestNode } from "../../../substrate-node";
import { type Gateway, post, startGateway } from "../harness";
import { FakeClock, inSecond, LIMITS_ENV, refusalData, UsageReader } from "../limits/fixtures";
import { TestWsClient, wsNetwork } from "../ws/ws-client";

const NODE_ID = "0b7d4c1e-2f3a-4b5c-8d9e-0a1b2c3d4e5f";
const WS_ID = "ws-node-owner";

class CollectingUsage implements UsageRecorder {
  readonly rows: UsageContext[] = [];
  record(ctx: UsageContext): void {
    this.rows.push(ctx);
  }
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}

function nodeKey(rpcMethods: "SAFE" | "UNSAFE", over: Partial<KeyRecord> = {}): Partial<KeyRecord> {
  return { kind: "node", appId: null, nodeId: NODE_ID, workspaceId: WS_ID, rpcMethods, ...over };
}

/**
 * The dedicated-node endpoint over WebSocket, against the Substrate test node (a named stand-in for a
 * polkadot-sdk node), with the node and key records published into Redis as the control plane does.
 */
describe("data plane: dedicated node endpoint over WebSocket (Substrate test node)", function () {
  this.timeout(30_000);
  let node: SubstrateTestNode;
  let gw: Gateway;
  let redis: Redis;
  let unsafeKey = "";
  let safeKey = "";
  let appKey = "";
  const usage = new CollectingUsage();
  const clients: TestWsClient[] = [];
  const wsBase = () => `ws://127.0.0.1:${gw.port()}`;
  const open = async (path: string, headers: Record<string, string> = {}) => {
    const c = await TestWsClient.open(`${wsBase()}${path}`, headers);
    clients.push(c);
    return c;
  };
  const keyPath = (key: string, id = NODE_ID) => `/nodes/${id}/${encodeURIComponent(key)}`;
  const keyHttp = (key: string) => `${gw.base}${keyPath(key)}`;
  const putNode = async (over: Partial<NodeRecord> = {}) => {
    const rec: NodeRecord = {
      nodeId: NODE_ID,
      workspaceId: WS_ID,
      protocol: "SUBSTRATE",
      httpUrl: node.httpUrl,
      wsUrl: node.wsUrl,
      status: "SYNCED",
      ...over,
    };
    await redis.set(gw.seeder.names.node(NODE_ID), JSON.stringify(rec));
    await gw.publish({ type: "node.update", nodeId: NODE_ID });
  };

  before(async () => {
    node = await startSubstrateTestNode({ blockTimeMs: 0, startBlock: 5 });
    gw = await startGateway(
      {},
      async (s) => {
        await s.putNetwork(wsNetwork("dot", "SUBSTRATE", [{ id: "n", httpUrl: node.httpUrl, wsUrl: null }]));
      },
      { usage },
    );
    redis = new Redis(TEST_REDIS_URL);
    unsafeKey = await gw.seeder.putKey(nodeKey("UNSAFE"));
    safeKey = await gw.seeder.putKey(nodeKey("SAFE"));
    appKey = await gw.seeder.putKey();
    await putNode();
    // Served over HTTP before the WebSocket tests start (the first test resets the usage rows).
    await eventually(
      async () =>
        (await post(keyHttp(unsafeKey), { jsonrpc: "2.0", id: 1, method: "system_chain" })).status === 200,
      "the node served",
    );
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.terminate();
  });
  after(async () => {
    redis?.disconnect();
    await gw?.stop();
    await node?.close();
  });

  it("forwards requests and batches with the node's key (path, ?apikey= or header); records usage as node-{id}", async () => {
    usage.rows.length = 0;
    const c = await open(keyPath(unsafeKey));
    const chain = await c.call("system_chain");
    assert.equal(chain.result, "Development");
    const head = await c.call("chain_getHeader", []);
    assert.equal(Number.parseInt(head.result.number, 16), node.bestNumber());
    c.sendRaw(
      JSON.stringify([
        { jsonrpc: "2.0", id: "a", method: "system_name" },
        { jsonrpc: "2.0", id: "b", method: "chain_getBlockHash", params: [0] },
      ]),
    );
    await c.until(() => c.messages.some(Array.isArray));
    const batch = c.messages.find(Array.isArray)!;
    assert.deepEqual(
      batch.map((m: { id: string }) => m.id),
      ["a", "b"],
    );
    assert.equal(batch[1].result, node.blockHash(0));
    // UNSAFE: author_rotateKeys reaches the node.
    const keys = await c.call("author_rotateKeys", []);
    assert.match(keys.result, /^0x[0-9a-f]+$/);

    const q = await open(`/nodes/${NODE_ID}?apikey=${encodeURIComponent(unsafeKey)}`);
    assert.equal((await q.call("system_chain")).result, "Development");
    const h = await open(`/nodes/${NODE_ID}`, { apikey: unsafeKey });
    assert.equal((await h.call("system_chain")).result, "Development");

    const network = nodeUsageNetwork(NODE_ID);
    const mine = usage.rows.filter((r) => r.network === network);
    assert.deepEqual(
      mine.slice(0, 5).map((r) => [r.method, r.category, r.workspaceId, r.appId]),
      [
        ["system_chain", "Success", WS_ID, null],
        ["chain_getHeader", "Success", WS_ID, null],
        ["system_name", "Success", WS_ID, null],
        ["chain_getBlockHash", "Success", WS_ID, null],
        ["author_rotateKeys", "Success", WS_ID, null],
      ],
    );
  });

  it("SAFE refuses unsafe methods per element with -32601 (single and batch); safe methods pass", async () => {
    const c = await open(keyPath(safeKey));
    const before = node.requestCounts().author_rotateKeys ?? 0;
    const r = await c.call("author_rotateKeys", []);
    assert.equal(r.error.code, -32601);
    assert.match(r.error.message, /rpc-methods is Safe/);
    assert.equal(r.error.data.category, "Client Error");
    c.sendRaw(
      JSON.stringify([
        { jsonrpc: "2.0", id: 1, method: "author_insertKey", params: ["gran", "//Alice", "0x00"] },
        { jsonrpc: "2.0", id: 2, method: "system_chain" },
      ]),
    );
    await c.until(() => c.messages.some(Array.isArray));
    const batch = c.messages.find(Array.isArray)!;
    assert.equal(batch[0].error.code, -32601);
    assert.equal(batch[1].result, "Development");
    assert.equal(node.requestCounts().author_rotateKeys ?? 0, before, "nothing unsafe reached the node");
  });

  it("refuses the upgrade like HTTP: 401 for a missing / wrong / app key or another node's key, 503 when not serving", async () => {
    for (const path of [
      `/nodes/${NODE_ID}`,
      keyPath("nope"),
      keyPath(appKey),
      keyPath(unsafeKey, "00000000-0000-4000-8000-000000000000"),
    ]) {
      const e = await TestWsClient.open(`${wsBase()}${path}`).catch((err) => err);
      assert.equal(e.status, 401, path);
      assert.equal(e.body.error.code, -32016);
    }
    await putNode({ status: "SYNCING" });
    let e = await TestWsClient.open(`${wsBase()}${keyPath(unsafeKey)}`).catch((err) => err);
    assert.equal(e.status, 503);
    assert.equal(e.body.error.data.reason, "node_unavailable");
    await redis.del(gw.seeder.names.node(NODE_ID));
    await gw.publish({ type: "node.update", nodeId: NODE_ID });
    e = await TestWsClient.open(`${wsBase()}${keyPath(unsafeKey)}`).catch((err) => err);
    assert.equal(e.status, 503);
    await putNode();
    const c = await open(keyPath(unsafeKey));
    assert.equal((await c.call("system_chain")).result, "Development");
  });

  it("chain_subscribeNewHeads goes to the node's own WebSocket: current head, then new heads; unsubscribe", async () => {
    const c = await open(keyPath(safeKey));
    const sub = (await c.call("chain_subscribeNewHeads", [])).result;
    assert.equal(typeof sub, "string");
    await c.until(() => c.notifications(sub).length === 1, 5000, "initial head");
    assert.equal(gw.plane.ws.upstreamSubscriptionCount(`node:${NODE_ID}`), 1);
    node.produceBlocks(1);
    await c.until(() => c.notifications(sub).length === 2, 5000, "new head");
    const last = c.notifications(sub)[1];
    assert.equal(last.method, "chain_newHead");
    assert.equal(Number.parseInt(last.params.result.number, 16), node.bestNumber());
    assert.equal((await c.call("chain_unsubscribeNewHeads", [sub])).result, true);
    assert.equal(gw.plane.ws.upstreamSubscriptionCount(`node:${NODE_ID}`), 0);
  });

  it("a node switched to SAFE applies to open sockets at once", async () => {
    const flip = await gw.seeder.putKey(nodeKey("UNSAFE"));
    const c = await open(keyPath(flip));
    assert.match((await c.call("author_rotateKeys", [])).result, /^0x/);
    await gw.seeder.putKey(nodeKey("SAFE"), flip);
    await gw.publish({ type: "key.upsert", keyHash: hashApiKey(flip) });
    const r = await c.call("author_rotateKeys", []);
    assert.equal(r.error.code, -32601);
    assert.equal(c.closeCode, undefined, "the socket stays open");
  });

  it("key regenerated while connected (old key revoked): the socket closes with 4001 within 1 s; the new key opens", async () => {
    const old = await gw.seeder.putKey(nodeKey("UNSAFE"));
    const c = await open(keyPath(old));
    const sub = (await c.call("chain_subscribeNewHeads", [])).result;
    await c.until(() => c.notifications(sub).length === 1);
    // What the control plane publishes on regenerateDedicatedNodeApiKey: new key record, old one deleted
    // and announced as key.revoke.
    const fresh = await gw.seeder.putKey(nodeKey("UNSAFE"));
    await gw.seeder.deleteKey(old);
    const t0 = Date.now();
    await gw.seeder.publish({ type: "key.revoke", keyHash: hashApiKey(old) });
    await c.waitClosed(1000);
    assert.ok(Date.now() - t0 < 1000);
    assert.equal(c.closeCode, 4001);
    const e = await TestWsClient.open(`${wsBase()}${keyPath(old)}`).catch((err) => err);
    assert.equal(e.status, 401);
    const n = await open(keyPath(fresh));
    assert.equal((await n.call("system_chain")).result, "Development");
  });
});

describe("data plane: dedicated node endpoint limits (per node per second, no daily quota)", function () {
  this.timeout(30_000);
  let node: SubstrateTestNode;
  let gw: Gateway;
  let redis: Redis;
  let key = "";
  const clock = new FakeClock(inSecond(200));
  const WS_LIMITS = "ws-node-limits";

  before(async () => {
    node = await startSubstrateTestNode({ blockTimeMs: 0, startBlock: 5 });
    gw = await startGateway(
      LIMITS_ENV,
      async (s) => {
        await s.putNetwork(wsNetwork("dot", "SUBSTRATE", [{ id: "n", httpUrl: node.httpUrl, wsUrl: null }]));
        key = await s.putKey(
          nodeKey("UNSAFE", {
            workspaceId: WS_LIMITS,
            plan: { name: "t", requestsPerSecond: 5, dailyRequestLimit: 3, monthlyRequestLimit: null },
          }),
        );
      },
      { clock },
    );
    redis = new Redis(TEST_REDIS_URL);
    const rec: NodeRecord = {
      nodeId: NODE_ID,
      workspaceId: WS_LIMITS,
      protocol: "SUBSTRATE",
      httpUrl: node.httpUrl,
      wsUrl: node.wsUrl,
      status: "SYNCED",
    };
    await redis.set(gw.seeder.names.node(NODE_ID), JSON.stringify(rec));
  });
  after(async () => {
    redis?.disconnect();
    await gw?.stop();
    await node?.close();
  });

  it("HTTP: 429 with Retry-After, X-RateLimit-*, data.retryAfterMs and data.limit; no workspace quota counted", async () => {
    clock.t = inSecond(200);
    const url = `${gw.base}/nodes/${NODE_ID}/${encodeURIComponent(key)}`;
    const call = (id: number) => ({ jsonrpc: "2.0", id, method: "system_chain" });
    const ok = await post(url, [call(1), call(2), call(3), call(4)]);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.headers.get("x-ratelimit-limit"), "5");
    assert.equal(ok.headers.get("x-ratelimit-remaining"), "1");
    const over = await post(url, [call(5), call(6)]);
    assert.equal(over.status, 429);
    assert.equal(over.headers.get("retry-after"), "1");
    const d = refusalData(over);
    assert.deepEqual([d.code, d.reason, d.limit, d.retryAfterMs, d.id], [-32005, "rate_limit", 5, 800, null]);
    assert.equal(over.json.error.data.category, "Too Many Requests");
    const single = await post(url, { ...call(7) });
    assert.equal(single.status, 200, "the refused batch consumed nothing");
    const again = await post(url, call(8));
    assert.equal(again.status, 429);
    assert.equal(refusalData(again).id, 8, "a refused single keeps its id");
    // Dedicated nodes have their own limits: the daily quota of the plan (3) does not apply to them.
    clock.advance(1000);
    const next = await post(url, [call(9), call(10), call(11), call(12)]);
    assert.equal(next.status, 200);
    // The barrier: one call with an app key of the same workspace is counted; once the count shows it,
    // the node calls before it would have been counted too.
    const appKey = await gw.seeder.putKey({
      workspaceId: WS_LIMITS,
      appId: "app-node-limits",
      plan: { name: "t", requestsPerSecond: 5, dailyRequestLimit: 3, monthlyRequestLimit: null },
    });
    assert.equal((await post(`${gw.base}/dot/rpc?apikey=${appKey}`, call(13))).status, 200);
    const usage = new UsageReader(gw.ns.prefix);
    try {
      assert.equal(await usage.waitFor(WS_LIMITS, 1, clock.t), 1, "only the app call counted");
    } finally {
      await usage.close();
    }
  });

  it("WebSocket: the same per-node budget; a refusal answers -32005 with retryAfterMs and keeps the socket", async () => {
    clock.t = inSecond(300) + 5000;
    const c = await TestWsClient.open(
      `ws://127.0.0.1:${gw.port()}/nodes/${NODE_ID}/${encodeURIComponent(key)}`,
    );
    try {
      for (let i = 0; i < 5; i++) assert.equal((await c.call("system_chain")).result, "Development");
      const r = await c.call("system_chain");
      assert.equal(r.error.code, -32005);
      assert.equal(r.error.data.reason, "rate_limit");
      assert.equal(r.error.data.limit, 5);
      assert.equal(r.error.data.retryAfterMs, 700);
      // Subscriptions are admitted by the WS hooks against the same node budget.
      const s = await c.call("chain_subscribeNewHeads", []);
      assert.equal(s.error.code, -32005);
      clock.advance(1000);
      const ok = await c.call("chain_subscribeNewHeads", []);
      assert.equal(typeof ok.result, "string");
      assert.equal(c.closeCode, undefined);
    } finally {
      c.terminate();
    }
  });
});
