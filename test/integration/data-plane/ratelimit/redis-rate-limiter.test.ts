import assert from "node:assert/strict";
import type { Clock } from "../../../../data-plane/src/ratelimit/clock";
import { createLimitsRedis } from "../../../../data-plane/src/ratelimit/redis-client";
import { RedisReconciledRateLimiter } from "../../../../data-plane/src/ratelimit/redis-rate-limiter";
import type { RedisClient } from "../../../../shared/src/redis/connect";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { eventually } from "../../../helpers/eventually";
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
  await eventually(
    () => rls.every((rl) => rl.liveInstances >= rls.length),
    "the instances to see each other",
  );
}

describe("data-plane ratelimit: two instances through real Redis", function () {
  this.timeout(15_000);
  let ns: TestRedisNamespace;
  const clients: RedisClient[] = [];
  const limiters: RedisReconciledRateLimiter[] = [];

  function instance(url = TEST_REDIS_URL, failClosedAfterMs: number | null = null, clock?: Clock) {
    const redis = createLimitsRedis(url, { commandTimeoutMs: 500 });
    redis.on("error", () => {});
    clients.push(redis);
    const rl = new RedisReconciledRateLimiter({
      redis,
      names: new RedisNames(ns.prefix),
      // With a fake clock the test steps the rounds itself; the loop's timer is parked.
      syncIntervalMs: clock === undefined ? 25 : 3_600_000,
      failClosedAfterMs,
      clock,
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

  /**
   * A fake clock for the tests below: the windows are the clock's, and reconciliation rounds are stepped
   * by the test (`syncNow`), so what is checked does not depend on how fast this machine runs.
   */
  function fakeClock() {
    const clock = {
      ms: (Math.floor(Date.now() / 1000) + 1) * 1000 + 5,
      now: () => clock.ms,
      /** Into the next one-second window (5 ms past its start). */
      nextWindow() {
        clock.ms = (Math.floor(clock.ms / 1000) + 1) * 1000 + 5;
      },
    };
    return clock;
  }

  /** Rounds until every limiter has seen all the others' heartbeats (each round may heartbeat). */
  async function knowEachOtherBy(clock: { ms: number }, ...rls: RedisReconciledRateLimiter[]) {
    await eventually(async () => {
      clock.ms += 600; // past the heartbeat interval
      for (const rl of rls) await rl.syncNow();
      return rls.every((rl) => rl.liveInstances >= rls.length);
    }, "instances see each other");
  }

  it("the first second of a new identifier on two instances stays within 10% once peers are known", async () => {
    const clock = fakeClock();
    const a = instance(TEST_REDIS_URL, null, clock);
    const b = instance(TEST_REDIS_URL, null, clock);
    await Promise.all([ready(a.redis), ready(b.redis)]);
    await knowEachOtherBy(clock, a.rl, b.rl);
    const limit = 100;
    clock.nextWindow();
    // One request each and reconciliation rounds, so each learns the other serves this identifier.
    a.rl.check("app:burst", 1, limit);
    b.rl.check("app:burst", 1, limit);
    await a.rl.syncNow();
    await b.rl.syncNow();
    a.rl.check("app:burst", 1, limit);
    b.rl.check("app:burst", 1, limit);
    await a.rl.syncNow();
    await b.rl.syncNow();
    clock.nextWindow();
    // A burst at the very start of a window, before any reconciliation: each takes its share.
    let admitted = 0;
    for (let i = 0; i < 200; i++) {
      if (a.rl.check("app:burst", 1, limit).allowed) admitted++;
      if (b.rl.check("app:burst", 1, limit).allowed) admitted++;
    }
    await a.rl.syncNow();
    await b.rl.syncNow();
    for (let i = 0; i < 200; i++) {
      if (a.rl.check("app:burst", 1, limit).allowed) admitted++;
      if (b.rl.check("app:burst", 1, limit).allowed) admitted++;
    }
    console.log(`      burst at a window start: ${admitted} admitted of limit ${limit}`);
    assert.ok(Math.abs(admitted - limit) <= limit * 0.1, `admitted ${admitted}`);
  });

  /** Rounds until the limiter's view of Redis is `healthy`. */
  const healthAfterRounds = (rl: RedisReconciledRateLimiter, healthy: boolean, identifier: string) =>
    eventually(async () => {
      rl.check(identifier, 0, 1_000_000); // something to sync (a zero-cost check marks it)
      await rl.syncNow();
      return rl.redisHealthy === healthy;
    }, `redisHealthy = ${healthy}`);

  it("keeps limiting locally while Redis is unreachable, and reconciles again when it returns", async () => {
    const proxy = new TcpProxy("127.0.0.1", Number(new URL(TEST_REDIS_URL).port || 6379));
    await proxy.start();
    const clock = fakeClock();
    const a = instance(proxy.url, null, clock);
    await ready(a.redis);
    await healthAfterRounds(a.rl, true, "app:outage");
    await proxy.cut();
    clock.nextWindow();
    let admitted = 0;
    for (let i = 0; i < 80; i++) {
      const r = a.rl.check("app:outage", 1, 50);
      if (r.allowed) admitted++;
    }
    await healthAfterRounds(a.rl, false, "app:outage");
    for (let i = 0; i < 20; i++) if (a.rl.check("app:outage", 1, 50).allowed) admitted++;
    assert.equal(admitted, 50, "exactly the limit, on local counts");
    await proxy.start();
    await ready(a.redis);
    clock.nextWindow();
    await healthAfterRounds(a.rl, true, "app:outage");
    await proxy.cut();
  });

  it("fail-closed refuses with store_unavailable once Redis has been down longer than configured", async () => {
    const proxy = new TcpProxy("127.0.0.1", Number(new URL(TEST_REDIS_URL).port || 6379));
    await proxy.start();
    const clock = fakeClock();
    const a = instance(proxy.url, 200, clock);
    await ready(a.redis);
    assert.ok(a.rl.check("app:closed", 1, 50).allowed);
    await healthAfterRounds(a.rl, true, "app:closed");
    await proxy.cut();
    await healthAfterRounds(a.rl, false, "app:closed");
    clock.ms += 150;
    assert.ok(a.rl.check("app:closed", 1, 50).allowed, "still within the grace period");
    clock.ms += 100;
    const r = a.rl.check("app:closed", 1, 50);
    assert.equal(r.allowed, false);
    assert.equal(r.reason, "store_unavailable");
    await proxy.start();
    await ready(a.redis);
    await healthAfterRounds(a.rl, true, "app:closed");
    assert.ok(a.rl.check("app:closed", 1, 50).allowed);
    await proxy.cut();
  });
});
