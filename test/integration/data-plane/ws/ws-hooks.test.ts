import assert from "node:assert/strict";
import { loadDataPlaneConfig } from "../../../../data-plane/src/config";
import { type DataPlane, startDataPlane } from "../../../../data-plane/src/data-plane";
import type { WsHooks } from "../../../../data-plane/src/ws/hooks";
import type { WsSession } from "../../../../data-plane/src/ws/session";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { createTestRedisNamespace } from "../../../helpers/redis";
import { RedisSeeder } from "../../../helpers/seed-redis";
import { type StubWsUpstream, startStubWsUpstream } from "./stub-ws-upstream";
import { TestWsClient, wsNetwork } from "./ws-client";

/** The seams the lead plugs limits, quota and usage into (DataPlaneOverrides.wsHooks). */
describe("WebSocket hooks (limits / usage seams)", function () {
  this.timeout(30_000);
  const ns = createTestRedisNamespace();
  const seeder = new RedisSeeder(ns.prefix);
  let stub: StubWsUpstream;
  let plane: DataPlane;
  let key = "";
  let refuse = false;
  const admitted: number[] = [];
  const answered: string[] = [];
  const notified: { session: WsSession; method: string; count: number }[] = [];
  const hooks: WsHooks = {
    admit(_s, n) {
      admitted.push(n);
      return refuse ? { row: GatewayError.RateLimited, retryAfterMs: 250 } : undefined;
    },
    answered(_s, method) {
      answered.push(method);
    },
    notified(session, method, count) {
      notified.push({ session, method, count });
    },
  };

  before(async () => {
    stub = await startStubWsUpstream();
    await seeder.putNetwork(wsNetwork("eth", "EVM", [{ id: "a", httpUrl: stub.httpUrl, wsUrl: stub.wsUrl }]));
    key = await seeder.putKey({ appId: "app-hooks" });
    const config = loadDataPlaneConfig({
      REDIS_KEY_PREFIX: ns.prefix,
      DATA_PLANE_PORT: "0",
      DATA_PLANE_HOST: "127.0.0.1",
      LOG_LEVEL: "silent",
      ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL } : {}),
    });
    plane = await startDataPlane(config, { wsHooks: hooks });
  });

  after(async () => {
    await plane?.close();
    await stub?.close();
    await seeder.close();
    await ns.cleanup();
  });

  it("admit() sees each message's element count; a refusal answers every element with -32005 and keeps the socket", async () => {
    const c = await TestWsClient.open(`ws://127.0.0.1:${plane.port}/eth/rpc?apikey=${key}`);
    try {
      assert.equal((await c.call("eth_chainId")).result, "0x7a69");
      assert.deepEqual(answered, ["eth_chainId"]);
      refuse = true;
      c.sendRaw(JSON.stringify([1, 2, 3].map((id) => ({ jsonrpc: "2.0", id, method: "eth_chainId" }))));
      await c.until(() => c.messages.some(Array.isArray));
      const batch = c.messages.find(Array.isArray)!;
      assert.deepEqual(
        batch.map(
          (m: { id: number; error: { code: number; data: { reason: string; retryAfterMs: number } } }) => [
            m.id,
            m.error.code,
            m.error.data.reason,
            m.error.data.retryAfterMs,
          ],
        ),
        [
          [1, -32005, "rate_limit", 250],
          [2, -32005, "rate_limit", 250],
          [3, -32005, "rate_limit", 250],
        ],
      );
      assert.deepEqual(admitted, [1, 3]);
      refuse = false;
      const sub = (await c.call("eth_subscribe", ["newHeads"])).result;
      stub.emitHead();
      stub.emitHead();
      await c.until(() => c.notifications(sub).length === 2);
      assert.equal(
        notified.reduce((n, x) => n + x.count, 0),
        2,
      );
      assert.equal(notified[0]!.method, "eth_subscription");
      assert.equal(notified[0]!.session.key?.record.appId, "app-hooks");
    } finally {
      c.terminate();
    }
  });

  it("notified() counts a published notification once per key with its number of clients", async () => {
    const other = await seeder.putKey({ workspaceId: "ws-other", appId: "app-other" });
    const url = `ws://127.0.0.1:${plane.port}/eth/rpc?apikey=`;
    const cs = await Promise.all([key, key, key, other].map((k) => TestWsClient.open(`${url}${k}`)));
    try {
      const ids: string[] = [];
      for (const c of cs) ids.push((await c.call("eth_subscribe", ["newHeads"])).result);
      assert.equal(new Set(ids.slice(0, 3)).size, 1, "one shared id for the key's three clients");
      assert.notEqual(ids[3], ids[0], "the other key's own id");
      notified.length = 0;
      stub.emitHead();
      for (const [i, c] of cs.entries()) await c.until(() => c.notifications(ids[i]!).length === 1);
      const byApp = new Map(notified.map((n) => [n.session.key?.record.appId, n.count]));
      assert.equal(notified.length, 2, "one call per key");
      assert.equal(byApp.get("app-hooks"), 3);
      assert.equal(byApp.get("app-other"), 1);
    } finally {
      for (const c of cs) c.terminate();
    }
  });

  it("route() serves a custom endpoint (how the dedicated-node endpoint plugs in): own handler + subscriptions", async () => {
    const seen: string[] = [];
    plane.ws.route("/custom-nodes/:nodeId/:key", (info) => {
      if (info.params[1] !== "secret") return GatewayError.UnknownKey;
      const nodeId = info.params[0]!;
      return {
        slug: `node:${nodeId}`,
        key: undefined,
        async handle(text) {
          seen.push(text);
          const req = JSON.parse(text) as { id: number };
          return JSON.stringify({ jsonrpc: "2.0", id: req.id, result: `answered by ${nodeId}` });
        },
        subscriptions: {
          slug: `node:${nodeId}`,
          record: { upstreams: [{ id: nodeId, wsUrl: stub.wsUrl, weight: 1 }] },
          describe: () => [],
        },
      };
    });
    const refused = await TestWsClient.open(`ws://127.0.0.1:${plane.port}/custom-nodes/n1/wrong`).catch(
      (e) => e,
    );
    assert.equal(refused.status, 401);
    const c = await TestWsClient.open(`ws://127.0.0.1:${plane.port}/custom-nodes/n1/secret`);
    try {
      assert.equal((await c.call("eth_chainId")).result, "answered by n1");
      assert.equal(seen.length, 1);
      const sub = (await c.call("eth_subscribe", ["newHeads"])).result;
      assert.equal(plane.ws.upstreamSubscriptionCount("node:n1"), 1);
      stub.emitHead();
      await c.until(() => c.notifications(sub).length === 1);
      assert.equal((await c.call("eth_unsubscribe", [sub])).result, true);
      assert.equal(plane.ws.upstreamSubscriptionCount("node:n1"), 0);
      assert.equal(seen.length, 1, "subscription calls did not go to the handler");
    } finally {
      c.terminate();
    }
  });
});
