import assert from "node:assert/strict";
import { RedisQuotaStore } from "../../../../data-plane/src/quota/quota-store";
import { ReconciledQuotaTracker } from "../../../../data-plane/src/quota/quota-tracker";
import { readWorkspaceUsage } from "../../../../data-plane/src/quota/read-usage";
import { createLimits, LimitsEnvSchema } from "../../../../data-plane/src/ratelimit/limits";
import { createLimitsRedis } from "../../../../data-plane/src/ratelimit/redis-client";
import { nextUtcMidnightMs, utcDayKey } from "../../../../shared/src/quota/day";
import type { RedisClient } from "../../../../shared/src/redis/connect";
import { RedisNames } from "../../../../shared/src/redis/keys";
import type { PlanLimits } from "../../../../shared/src/redis/records";
import { eventually } from "../../../helpers/eventually";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../../helpers/redis";
import { TcpProxy } from "../ratelimit/tcp-proxy";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function ready(r: RedisClient): Promise<void> {
  if (r.status === "ready") return;
  await new Promise<void>((resolve) => r.once("ready", () => resolve()));
}

const plan = (daily: number): PlanLimits => ({
  name: "free",
  requestsPerSecond: 50,
  dailyRequestLimit: daily,
  monthlyRequestLimit: null,
});

describe("data-plane quota: two instances through real Redis", function () {
  this.timeout(15_000);
  let ns: TestRedisNamespace;
  let names: RedisNames;
  const clients: RedisClient[] = [];

  function tracker(url = TEST_REDIS_URL) {
    const redis = createLimitsRedis(url, { commandTimeoutMs: 500 });
    redis.on("error", () => {});
    clients.push(redis);
    const q = new ReconciledQuotaTracker({
      store: new RedisQuotaStore({ redis, names }),
      flushIntervalMs: 50,
      flushTimeoutMs: 500,
    });
    q.start();
    return { redis, q };
  }

  beforeEach(() => {
    ns = createTestRedisNamespace();
    names = new RedisNames(ns.prefix);
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.disconnect();
    await ns.cleanup();
  });

  it("counts exactly the sum of what both instances recorded, readable by the control plane's key", async () => {
    const a = tracker();
    const b = tracker();
    await Promise.all([ready(a.redis), ready(b.redis)]);
    let expected = 0;
    for (let i = 0; i < 5000; i++) {
      const units = 1 + (i % 7);
      (i % 2 === 0 ? a : b).q.record("ws-sum", units);
      expected += units;
      if (i % 500 === 0) await sleep(5);
    }
    assert.equal(await a.q.close(), true);
    assert.equal(await b.q.close(), true);
    const usage = await readWorkspaceUsage(a.redis, names, "ws-sum");
    assert.equal(usage.count, expected);
    assert.equal(usage.monthCount, expected);
    assert.equal(usage.dayKey, utcDayKey(Date.now()));
    assert.equal(usage.resetsAtMs, nextUtcMidnightMs(Date.now()));
    // The key the control plane builds from shared/ holds the same number, with a TTL.
    const key = names.quotaDay("ws-sum", utcDayKey(Date.now()));
    assert.equal(Number(await a.redis.get(key)), expected);
    const ttl = await a.redis.pttl(key);
    assert.ok(ttl > 2 * 86_400_000 && ttl <= 3 * 86_400_000, `ttl ${ttl}`);
  });

  it("an instance sees the units another served and refuses once the daily limit is reached", async () => {
    const a = tracker();
    const b = tracker();
    await Promise.all([ready(a.redis), ready(b.redis)]);
    const limits = plan(100);
    assert.ok(b.q.check("ws-lim", limits).allowed);
    a.q.record("ws-lim", 100);
    // a flushes on its timer and b reads the total on its own: b refuses once it has seen it.
    await eventually(() => b.q.check("ws-lim", limits).count === 100, "b sees a's 100 units");
    const r = b.q.check("ws-lim", limits);
    assert.equal(r.allowed, false);
    assert.equal(r.reason, "daily_limit");
    assert.equal(r.count, 100);
    assert.ok(r.retryAfterMs > 0 && r.retryAfterMs <= 86_400_000);
    await a.q.close();
    await b.q.close();
  });

  it("keeps the units recorded during a Redis outage and flushes them, exactly, when it returns", async () => {
    const proxy = new TcpProxy("127.0.0.1", Number(new URL(TEST_REDIS_URL).port || 6379));
    await proxy.start();
    const a = tracker(proxy.url);
    const b = tracker();
    await Promise.all([ready(a.redis), ready(b.redis)]);
    a.q.record("ws-out", 10);
    b.q.record("ws-out", 1);
    // Both flushes must have landed and been read back by `a` before the cut: each instance flushes on its
    // own timer, so wait for `a` to see the global 11 rather than sleeping a fixed time.
    await eventually(() => a.q.check("ws-out", plan(1e9)).count >= 11, "a sees both instances' units");
    assert.equal(a.q.check("ws-out", plan(1e9)).count, 11, "a never saw both instances' units");
    await proxy.cut();
    for (let i = 0; i < 1000; i++) a.q.record("ws-out", 1);
    for (let i = 0; i < 50; i++) b.q.record("ws-out", 1);
    await eventually(() => !a.q.storeHealthy, "a's flush fails");
    assert.equal(a.q.unflushedUnits(), 1000);
    // Decisions keep counting meanwhile (last known total + local units).
    assert.ok(a.q.check("ws-out", plan(1e9)).count >= 1011);
    await proxy.start();
    await ready(a.redis);
    await eventually(() => a.q.storeHealthy && a.q.unflushedUnits() === 0, "a's units flushed after the cut");
    assert.equal(await a.q.close(), true);
    assert.equal(await b.q.close(), true);
    assert.equal((await readWorkspaceUsage(b.redis, names, "ws-out")).count, 10 + 1 + 1000 + 50);
    await proxy.cut();
  });

  it("createLimits (redis mode) wires a limiter and a tracker on one connection, and close() flushes", async () => {
    const limits = createLimits({
      ...LimitsEnvSchema.parse({}),
      REDIS_URL: TEST_REDIS_URL,
      REDIS_KEY_PREFIX: ns.prefix,
    });
    limits.start();
    const p = plan(1000);
    assert.ok(limits.rateLimiter.check("app:smoke", 1, p.requestsPerSecond).allowed);
    assert.ok(limits.quota.check("ws-smoke", p).allowed);
    limits.quota.record("ws-smoke", 3);
    await limits.close();
    const reader = createLimitsRedis(TEST_REDIS_URL);
    clients.push(reader);
    await ready(reader);
    assert.equal((await readWorkspaceUsage(reader, names, "ws-smoke")).count, 3);
  });
});
