import assert from "node:assert/strict";
import { RedisReconciledRateLimiter } from "../../../../data-plane/src/ratelimit/redis-rate-limiter";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { FakeClock, FakeRateLimitRedis } from "./fakes";

const T0 = Date.UTC(2026, 10, 22, 10, 0, 0);
const names = new RedisNames("t:");

function pair(failClosedAfterMs: number | null = null) {
  const clock = new FakeClock(T0);
  const redis = new FakeRateLimitRedis();
  const mk = (id: string) =>
    new RedisReconciledRateLimiter({
      redis: redis.client(),
      names,
      clock,
      instanceId: id,
      failClosedAfterMs,
    });
  return { clock, redis, a: mk("a"), b: mk("b") };
}

function admitted(rl: RedisReconciledRateLimiter, n: number, id = "app:k", limit = 50): number {
  let ok = 0;
  for (let i = 0; i < n; i++) if (rl.check(id, 1, limit).allowed) ok++;
  return ok;
}

/** Both instances serve the identifier and each has seen the other in Redis. */
async function learnPeers(a: RedisReconciledRateLimiter, b: RedisReconciledRateLimiter, limit: number) {
  for (let i = 0; i < 2; i++) {
    a.check("app:k", 1, limit);
    b.check("app:k", 1, limit);
    await Promise.all([a.syncNow(), b.syncNow()]);
  }
}

describe("data-plane ratelimit: RedisReconciledRateLimiter (fake Redis, fake clock)", () => {
  it("alone on an identifier it is exact: 50 pass, the 51st is refused, batches are all-or-nothing", async () => {
    const { a, clock } = pair();
    assert.equal(admitted(a, 25), 25);
    await a.syncNow();
    assert.equal(admitted(a, 26), 25);
    clock.advance(1000);
    assert.ok(a.check("app:k", 30, 50).allowed);
    assert.equal(a.check("app:k", 30, 50).allowed, false);
    assert.equal(a.check("app:k", 51, 50).reason, "batch_exceeds_limit");
    await a.syncNow();
    assert.ok(a.check("app:k", 20, 50).allowed);
  });

  it("counts what other instances admitted, once reconciled", async () => {
    const { a, b, clock } = pair();
    assert.equal(admitted(a, 40), 40);
    // b's first request for the identifier is decided blind; it is synced from then on.
    assert.ok(b.check("app:k", 1, 50).allowed);
    await a.syncNow();
    await b.syncNow();
    const r = b.check("app:k", 10, 50);
    assert.equal(r.allowed, false);
    assert.equal(r.remaining, 9);
    // a's 40 arrived at one sync: b keeps as much again in reserve for a (it may still be admitting) until
    // syncs show a's total standing still; the reserve halves at each, and the 9 left are b's.
    assert.equal(b.check("app:k", 9, 50).allowed, false);
    let syncs = 0;
    while (!b.check("app:k", 9, 50).allowed) {
      assert.ok(++syncs <= 6, "the reserve for a's burst outlasted six syncs");
      clock.advance(25);
      await Promise.all([a.syncNow(), b.syncNow()]);
    }
    assert.equal(b.check("app:k", 1, 50).allowed, false, "the window is full");
  });

  it("a busy peer syncing less often than this instance: its admissions are reserved for, not let through twice", async () => {
    // Uneven load (a takes 60 calls per 25 ms, b 10) and a's syncs three times as far apart as b's: b
    // used to read a's total late and size its share on its own light load (105-111 of 100, simulated).
    for (const [perA, perB, aEvery, bEvery] of [
      [60, 10, 3, 1],
      [60, 10, 1, 4],
      [80, 5, 1, 4],
      [5, 80, 1, 4],
    ] as const) {
      const { a, b, clock } = pair();
      await learnPeers(a, b, 100);
      clock.advance(1000);
      let total = 0;
      for (let round = 0; round < 40; round++) {
        total += admitted(a, perA, "app:k", 100) + admitted(b, perB, "app:k", 100);
        const syncs: Promise<void>[] = [];
        if (round % aEvery === 0) syncs.push(a.syncNow());
        if (round % bEvery === 0) syncs.push(b.syncNow());
        await Promise.all(syncs);
        clock.advance(25);
      }
      assert.ok(
        total <= 103 && total >= 95,
        `${perA}/${perB} per round, syncs every ${aEvery}/${bEvery}: ${total} of 100`,
      );
    }
  });

  it("splits what is left between instances while they are blind to each other", async () => {
    const { a, b, clock } = pair();
    // Window 1: both learn that two instances serve the identifier.
    await learnPeers(a, b, 50);
    clock.advance(1000);
    // Window 2: before any sync each may take its half of the 50.
    assert.equal(admitted(a, 50), 25);
    assert.equal(admitted(b, 50), 25);
    // Staggered syncs: a reconciles before b has pushed its 25, yet keeps b's likely share in reserve.
    await a.syncNow();
    await b.syncNow();
    const late = admitted(a, 10) + admitted(b, 10);
    assert.ok(late <= 2, `at most one request per instance past the limit, got ${late}`);
    await a.syncNow();
    await b.syncNow();
    assert.equal(admitted(a, 10) + admitted(b, 10), 0, "the window is full");
  });

  it("a peer that joins counts from its first sync answer, before this instance's next heartbeat", async () => {
    const { a, b, clock } = pair();
    a.check("app:k", 1, 50);
    await a.syncNow();
    assert.equal(a.liveInstances, 1, "a heartbeats alone");
    // b joins and serves the identifier; a's next heartbeat is 500 ms away.
    b.check("app:k", 1, 50);
    await b.syncNow();
    clock.advance(25);
    a.check("app:k", 1, 50);
    await a.syncNow();
    assert.equal(a.liveInstances, 2, "a's sync answer showed b writing the identifier");
    // So an identifier new to this window is shared from its first request: a takes its half of the 50.
    assert.equal(admitted(a, 50, "app:new"), 25);
  });

  it("converges on the limit when two instances hammer one identifier between syncs", async () => {
    const { a, b, clock } = pair();
    await learnPeers(a, b, 1000);
    clock.advance(1000);
    let total = 0;
    for (let round = 0; round < 40; round++) {
      total += admitted(a, 100, "app:k", 1000) + admitted(b, 100, "app:k", 1000);
      await Promise.all([a.syncNow(), b.syncNow()]);
      clock.advance(20);
    }
    assert.ok(total <= 1000 + 2 && total >= 990, `admitted ${total} of 1000`);
  });

  it("syncs only identifiers checked since the last round", async () => {
    const { a, redis } = pair();
    for (let i = 0; i < 100; i++) a.check(`app:${i}`, 1, 50);
    await a.syncNow();
    assert.equal(redis.calls, 100);
    a.check("app:1", 1, 50);
    await a.syncNow();
    assert.equal(redis.calls, 101);
    await a.syncNow();
    assert.equal(redis.calls, 101);
  });

  it("fail-open: with Redis down it keeps limiting on local counts and never throws", async () => {
    const { a, b, redis, clock } = pair();
    await learnPeers(a, b, 50);
    redis.down = true;
    clock.advance(1000);
    assert.ok(a.check("app:k", 1, 50).allowed);
    await a.syncNow();
    assert.equal(a.redisHealthy, false);
    // Blind to the peer, it enforces the whole limit by itself.
    assert.equal(admitted(a, 60), 49);
    clock.advance(5000);
    assert.equal(admitted(a, 60), 50);
    redis.down = false;
    await a.syncNow();
    assert.equal(a.redisHealthy, true);
  });

  it("fail-closed: refuses once Redis has been unreachable longer than failClosedAfterMs", async () => {
    const { a, redis, clock } = pair(100);
    redis.down = true;
    a.check("app:k", 1, 50);
    await a.syncNow();
    clock.advance(99);
    assert.ok(a.check("app:k", 1, 50).allowed);
    clock.advance(1);
    const r = a.check("app:k", 1, 50);
    assert.equal(r.allowed, false);
    assert.equal(r.reason, "store_unavailable");
    assert.ok(r.retryAfterMs > 0);
    redis.down = false;
    await a.syncNow();
    assert.ok(a.check("app:k", 1, 50).allowed);
  });
});
