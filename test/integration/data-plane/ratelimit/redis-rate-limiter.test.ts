import assert from "node:assert/strict";
import { createLimitsRedis } from "../../../../data-plane/src/ratelimit/redis-client";
import { RedisReconciledRateLimiter } from "../../../../data-plane/src/ratelimit/redis-rate-limiter";
import type { RedisClient } from "../../../../shared/src/redis/connect";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../../helpers/redis";
import { TcpProxy } from "./tcp-proxy";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function ready(r: RedisClient): Promise<void> {
  if (r.status === "ready") return;
  await new Promise<void>((resolve) => r.once("ready", () => resolve()));
}

/** Waits for the start of the next epoch second (plus `offsetMs`). */
async function nextSecond(offsetMs = 0): Promise<void> {
  await sleep(1000 - (Date.now() % 1000) + offsetMs);
}

async function knowEachOther(...rls: RedisReconciledRateLimiter[]): Promise<void> {
  const deadline = Date.now() + 2_000;
  while (rls.some((rl) => rl.liveInstances < rls.length)) {
    assert.ok(Date.now() < deadline, "instances never saw each other");
    await sleep(20);
  }
}

describe("data-plane ratelimit: two instances through real Redis", function () {
  this.timeout(15_000);
  let ns: TestRedisNamespace;
  const clients: RedisClient[] = [];
  const limiters: RedisReconciledRateLimiter[] = [];

  function instance(url = TEST_REDIS_URL, failClosedAfterMs: number | null = null) {
    const redis = createLimitsRedis(url, { commandTimeoutMs: 500 });
    redis.on("error", () => {});
    clients.push(redis);
    const rl = new RedisReconciledRateLimiter({
      redis,
      names: new RedisNames(ns.prefix),
      syncIntervalMs: 25,
      failClosedAfterMs,
    });
    limiters.push(rl);
    rl.start();
    return { redis, rl };
  }

  beforeEach(() => {
    ns = createTestRedisNamespace();
  });

  afterEach(async () => {
    for (const rl of limiters.splice(0)) await rl.stop();
    for (const c of clients.splice(0)) c.disconnect();
    await ns.cleanup();
  });

  it("keeps the total admitted per second within 10% of the limit while both hammer one identifier", async () => {
    const a = instance();
    const b = instance();
    await Promise.all([ready(a.redis), ready(b.redis)]);
    // Let both announce themselves and see each other (heartbeats every 500 ms).
    await knowEachOther(a.rl, b.rl);
    const limit = 500;
    const perWindow = new Map<number, number>();
    const offered = new Map<number, number>();
    await nextSecond(5);
    const endMs = Date.now() + 2000;
    // Each instance sees a steady stream (as a load balancer spreads it): 20 checks per instance per
    // event-loop turn, ~6x the limit offered in all.
    while (Date.now() < endMs) {
      for (let i = 0; i < 20; i++) {
        for (const rl of [a.rl, b.rl]) {
          const w = Math.floor(Date.now() / 1000);
          offered.set(w, (offered.get(w) ?? 0) + 1);
          if (rl.check("app:hammer", 1, limit).allowed) perWindow.set(w, (perWindow.get(w) ?? 0) + 1);
        }
      }
      await sleep(1);
    }
    // Whole windows only (the run starts just after a boundary and ends just after another).
    const windows = [...perWindow.keys()].sort((x, y) => x - y).filter((w) => offered.get(w)! > 10 * limit);
    const totals = windows.map((w) => perWindow.get(w)!);
    console.log(
      `      admitted per 1 s window (limit ${limit}, 2 instances): ${totals.join(", ")}; offered ${windows
        .map((w) => offered.get(w))
        .join(", ")}`,
    );
    for (const t of totals) assert.ok(Math.abs(t - limit) <= limit * 0.1, `admitted ${t} of ${limit}`);
  });

  it("the first second of a new identifier on two instances stays within 10% once peers are known", async () => {
    const a = instance();
    const b = instance();
    await Promise.all([ready(a.redis), ready(b.redis)]);
    await knowEachOther(a.rl, b.rl);
    const limit = 100;
    await nextSecond(5);
    // One request each, so each learns the other serves this identifier.
    a.rl.check("app:burst", 1, limit);
    b.rl.check("app:burst", 1, limit);
    await sleep(100);
    a.rl.check("app:burst", 1, limit);
    b.rl.check("app:burst", 1, limit);
    await nextSecond(5);
    // A burst at the very start of a window, before any reconciliation: each takes its share.
    let admitted = 0;
    for (let i = 0; i < 200; i++) {
      if (a.rl.check("app:burst", 1, limit).allowed) admitted++;
      if (b.rl.check("app:burst", 1, limit).allowed) admitted++;
    }
    await sleep(100);
    for (let i = 0; i < 200; i++) {
      if (a.rl.check("app:burst", 1, limit).allowed) admitted++;
      if (b.rl.check("app:burst", 1, limit).allowed) admitted++;
    }
    console.log(`      burst at a window start: ${admitted} admitted of limit ${limit}`);
    assert.ok(Math.abs(admitted - limit) <= limit * 0.1, `admitted ${admitted}`);
  });

  it("keeps limiting locally while Redis is unreachable, and reconciles again when it returns", async () => {
    const proxy = new TcpProxy("127.0.0.1", Number(new URL(TEST_REDIS_URL).port || 6379));
    await proxy.start();
    const a = instance(proxy.url);
    await ready(a.redis);
    a.rl.check("app:outage", 1, 50);
    await sleep(60);
    assert.equal(a.rl.redisHealthy, true);
    await proxy.cut();
    await nextSecond(5);
    let admitted = 0;
    for (let i = 0; i < 80; i++) {
      const r = a.rl.check("app:outage", 1, 50);
      if (r.allowed) admitted++;
    }
    await sleep(100);
    assert.equal(a.rl.redisHealthy, false);
    for (let i = 0; i < 20; i++) if (a.rl.check("app:outage", 1, 50).allowed) admitted++;
    assert.equal(admitted, 50, "exactly the limit, on local counts");
    await proxy.start();
    await ready(a.redis);
    await nextSecond(5);
    a.rl.check("app:outage", 1, 50);
    await sleep(150);
    assert.equal(a.rl.redisHealthy, true);
    await proxy.cut();
  });

  it("fail-closed refuses with store_unavailable once Redis has been down longer than configured", async () => {
    const proxy = new TcpProxy("127.0.0.1", Number(new URL(TEST_REDIS_URL).port || 6379));
    await proxy.start();
    const a = instance(proxy.url, 200);
    await ready(a.redis);
    assert.ok(a.rl.check("app:closed", 1, 50).allowed);
    await proxy.cut();
    await sleep(50);
    assert.ok(a.rl.check("app:closed", 1, 50).allowed, "still within the grace period");
    await sleep(300);
    const r = a.rl.check("app:closed", 1, 50);
    assert.equal(r.allowed, false);
    assert.equal(r.reason, "store_unavailable");
    await proxy.start();
    await ready(a.redis);
    await sleep(60);
    assert.ok(a.rl.check("app:closed", 1, 50).allowed);
    await proxy.cut();
  });
});
