import assert from "node:assert/strict";
import { loadDataPlaneConfig } from "../../../../data-plane/src/config";
import { type DataPlane, startDataPlane } from "../../../../data-plane/src/data-plane";
import type { UsageContext, UsageRecorder } from "../../../../data-plane/src/usage";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { createTestRedisNamespace } from "../../../helpers/redis";
import { RedisSeeder } from "../../../helpers/seed-redis";
import { type StubWsUpstream, startStubWsUpstream } from "./stub-ws-upstream";
import { TestWsClient, wsNetwork } from "./ws-client";

/** Usage records as the pipeline's accounting makes them. */
class CapturingUsage implements UsageRecorder {
  readonly seen: UsageContext[] = [];
  record(ctx: UsageContext): void {
    this.seen.push(ctx);
  }
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}

/** WebSocket messages and notifications through the request pipeline's admission and accounting. */
describe("WebSocket accounting (the request pipeline over WebSocket)", function () {
  this.timeout(30_000);
  const ns = createTestRedisNamespace();
  const seeder = new RedisSeeder(ns.prefix);
  let stub: StubWsUpstream;
  let plane: DataPlane;
  let key = "";
  const usage = new CapturingUsage();
  const units = (appId: string, method: string) =>
    usage.seen
      .filter((u) => u.appId === appId && u.method === method)
      .reduce((n, u) => n + (u.units ?? 1), 0);

  before(async () => {
    stub = await startStubWsUpstream();
    await seeder.putNetwork(wsNetwork("eth", "EVM", [{ id: "a", httpUrl: stub.httpUrl, wsUrl: stub.wsUrl }]));
    // The same node under method weights: each pushed event costs eth_subscription's 40 compute units.
    await seeder.putNetwork({
      ...wsNetwork("eth-cu", "EVM", [{ id: "a", httpUrl: stub.httpUrl, wsUrl: stub.wsUrl }]),
      methodCosts: {
        defaultUnits: 20,
        methods: { eth_subscribe: 10, eth_blockNumber: 10, eth_subscription: 40 },
      },
    });
    key = await seeder.putKey({
      appId: "app-hooks",
      workspaceId: "ws-hooks",
      plan: { name: "t", requestsPerSecond: 6, dailyRequestLimit: 1_000_000, monthlyRequestLimit: null },
    });
    const config = loadDataPlaneConfig({
      REDIS_KEY_PREFIX: ns.prefix,
      DATA_PLANE_PORT: "0",
      DATA_PLANE_HOST: "127.0.0.1",
      LOG_LEVEL: "silent",
      RATE_LIMIT_MODE: "local",
      ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL } : {}),
    });
    plane = await startDataPlane(config, { usage });
  });

  after(async () => {
    await plane?.close();
    await stub?.close();
    await seeder.close();
    await ns.cleanup();
  });

  it("a message over the per-second limit is refused per element with -32005 (socket kept); answers and notifications are counted", async () => {
    const c = await TestWsClient.open(`ws://127.0.0.1:${plane.port}/eth/rpc?apikey=${key}`);
    try {
      assert.equal((await c.call("eth_chainId")).result, "0x7a69");
      assert.equal(units("app-hooks", "eth_chainId"), 1);
      // 7 request objects against a limit of 6 per second: refused whole, whatever was used this second.
      c.sendRaw(
        JSON.stringify([1, 2, 3, 4, 5, 6, 7].map((id) => ({ jsonrpc: "2.0", id, method: "eth_chainId" }))),
      );
      await c.until(() => c.messages.some(Array.isArray));
      const batch = c.messages.find(Array.isArray)!;
      assert.deepEqual(
        batch.map((m: { id: number; error: { code: number; data: { reason: string } } }) => [
          m.id,
          m.error.code,
          m.error.data.reason,
        ]),
        [1, 2, 3, 4, 5, 6, 7].map((id) => [id, -32005, "rate_limit"]),
      );
      const refused = usage.seen.filter((u) => u.category === GatewayError.RateLimited.category);
      assert.equal(
        refused.reduce((n, u) => n + (u.units ?? 1), 0),
        7,
      );
      const sub = (await c.call("eth_subscribe", ["newHeads"])).result;
      stub.emitHead();
      stub.emitHead();
      await c.until(() => c.notifications(sub).length === 2);
      assert.equal(units("app-hooks", "eth_subscription"), 2);
    } finally {
      c.terminate();
    }
  });

  it("pushed events cost their notification method's weight: in the usage rows and against a daily compute-unit limit", async () => {
    // 130 compute units a day: the subscribe (10) and three events (3 x 40) use all of them.
    const cuKey = await seeder.putKey({
      appId: "app-cu",
      workspaceId: "ws-cu",
      plan: {
        name: "t",
        requestsPerSecond: 1000,
        dailyRequestLimit: 1_000_000,
        monthlyRequestLimit: null,
        dailyComputeUnitLimit: 130,
      },
    });
    const c = await TestWsClient.open(`ws://127.0.0.1:${plane.port}/eth-cu/rpc?apikey=${cuKey}`);
    try {
      const sub = (await c.call("eth_subscribe", ["newHeads"])).result;
      for (let i = 0; i < 3; i++) stub.emitHead();
      await c.until(() => c.notifications(sub).length === 3);
      const pushes = usage.seen.filter((u) => u.appId === "app-cu" && u.method === "eth_subscription");
      assert.equal(
        pushes.reduce((n, u) => n + (u.units ?? 1), 0),
        3,
      );
      assert.equal(
        pushes.reduce((n, u) => n + (u.computeUnits ?? 0), 0),
        120,
      );
      // 130 used: one more call of 10 is over the day's compute units.
      const refused = await c.call("eth_blockNumber");
      assert.equal(refused.error?.data?.reason, "daily_limit", JSON.stringify(refused));
      assert.match(refused.error.message, /compute unit/);
    } finally {
      c.terminate();
    }
  });

  it("a published notification is counted once per key with its number of clients as units", async () => {
    const other = await seeder.putKey({ workspaceId: "ws-other", appId: "app-other" });
    const url = `ws://127.0.0.1:${plane.port}/eth/rpc?apikey=`;
    const cs = await Promise.all([key, key, key, other].map((k) => TestWsClient.open(`${url}${k}`)));
    try {
      const ids: string[] = [];
      for (const c of cs) ids.push((await c.call("eth_subscribe", ["newHeads"])).result);
      assert.equal(new Set(ids.slice(0, 3)).size, 1, "one shared id for the key's three clients");
      assert.notEqual(ids[3], ids[0], "the other key's own id");
      usage.seen.length = 0;
      stub.emitHead();
      for (const [i, c] of cs.entries()) await c.until(() => c.notifications(ids[i]!).length === 1);
      const pushes = usage.seen.filter((u) => u.method === "eth_subscription");
      assert.equal(pushes.length, 2, "one record per key");
      const byApp = new Map(pushes.map((n) => [n.appId, n.units]));
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
