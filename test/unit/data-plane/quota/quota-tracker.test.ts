import assert from "node:assert/strict";
import { NoopQuotaTracker, ReconciledQuotaTracker } from "../../../../data-plane/src/quota/quota-tracker";
import { FakeClock } from "../ratelimit/fakes";
import { FlakyStore, MemoryQuotaStore, plan } from "./fakes";

describe("data-plane quota: ReconciledQuotaTracker (fake clock)", () => {
  it("refuses once the daily limit is reached, until 00:00 UTC, then starts from zero", async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 22, 23, 59, 0));
    const store = new FlakyStore();
    const q = new ReconciledQuotaTracker({ store, clock });
    const limits = plan(100);
    assert.ok(q.check("ws1", limits).allowed);
    q.record("ws1", 60);
    await q.flushNow();
    q.record("ws1", 40);
    const r = q.check("ws1", limits);
    assert.equal(r.allowed, false);
    assert.equal(r.reason, "daily_limit");
    assert.equal(r.count, 100);
    assert.equal(r.limit, 100);
    assert.equal(r.resetsAtMs, Date.UTC(2026, 10, 23));
    assert.equal(r.retryAfterMs, 60_000);
    // Midnight UTC: a new day, before any flush, while yesterday's 40 are still unflushed.
    clock.t = Date.UTC(2026, 10, 23, 0, 0, 0);
    const next = q.check("ws1", limits);
    assert.ok(next.allowed);
    assert.equal(next.count, 0);
    assert.equal(next.resetsAtMs, Date.UTC(2026, 10, 24));
    q.record("ws1", 5);
    await q.flushNow();
    assert.equal(store.day("ws1", "2026-11-22"), 100, "yesterday's late units land on yesterday");
    assert.equal(store.day("ws1", "2026-11-23"), 5);
    assert.equal(q.check("ws1", limits).count, 5);
  });

  it("refuses a batch that would cross the daily limit, whole", () => {
    const q = new ReconciledQuotaTracker({
      store: new MemoryQuotaStore(),
      clock: new FakeClock(Date.UTC(2026, 0, 1)),
    });
    q.record("ws1", 90);
    assert.equal(q.check("ws1", plan(100), 30).allowed, false);
    assert.ok(q.check("ws1", plan(100), 10).allowed);
  });

  it("enforces the monthly limit until the first day of the next UTC month", async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 12, 0, 0));
    const store = new FlakyStore();
    const q = new ReconciledQuotaTracker({ store, clock });
    const limits = plan(1000, 1500);
    q.record("ws1", 900);
    await q.flushNow();
    clock.t = Date.UTC(2026, 10, 30, 12, 0, 0); // same day: daily 900 of 1000
    assert.ok(q.check("ws1", limits).allowed);
    clock.t = Date.UTC(2026, 10, 29, 12, 0, 0) + 86_400_000; // still Nov 30
    q.record("ws1", 0);
    // Seed the month with earlier days' usage straight in the store.
    await store.inner.apply(
      "ws1",
      "other",
      1,
      [{ dayKey: "2026-11-02", monthKey: "2026-11", units: 600 }],
      "2026-11-30",
      "2026-11",
    );
    await q.flushNow();
    const r = q.check("ws1", limits);
    assert.equal(r.allowed, false);
    assert.equal(r.reason, "monthly_limit");
    assert.equal(r.monthCount, 1500);
    assert.equal(r.monthLimit, 1500);
    assert.equal(r.retryAfterMs, Date.UTC(2026, 11, 1) - clock.t);
    clock.t = Date.UTC(2026, 11, 1, 0, 0, 1);
    const dec = q.check("ws1", limits);
    assert.ok(dec.allowed);
    assert.equal(dec.monthCount, 0);
  });

  it("two instances sharing a store count exactly the sum and see each other's units", async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 22, 12));
    const store = new FlakyStore();
    const a = new ReconciledQuotaTracker({ store, clock, instanceId: "a" });
    const b = new ReconciledQuotaTracker({ store, clock, instanceId: "b" });
    for (let i = 0; i < 1000; i++) (i % 3 === 0 ? a : b).record("ws1", 1 + (i % 5));
    await Promise.all([a.flushNow(), b.flushNow()]);
    // A workspace checked since the last flush is refreshed by the next one (the others' units).
    a.check("ws1", plan(1e9));
    b.check("ws1", plan(1e9));
    await Promise.all([a.flushNow(), b.flushNow()]);
    let expected = 0;
    for (let i = 0; i < 1000; i++) expected += 1 + (i % 5);
    assert.equal(store.day("ws1", "2026-11-22"), expected);
    assert.equal(a.check("ws1", plan(1e9)).count, expected);
    assert.equal(b.check("ws1", plan(1e9)).count, expected);
  });

  it("loses nothing while the store is down and double-counts nothing on an ambiguous failure", async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 22, 12));
    const store = new FlakyStore();
    const q = new ReconciledQuotaTracker({ store, clock });
    store.down = true;
    for (let i = 0; i < 500; i++) q.record(`ws${i % 3}`, 2);
    assert.equal(await q.flushNow(), false);
    assert.equal(q.storeHealthy, false);
    // Decisions keep counting local units meanwhile.
    assert.equal(q.check("ws0", plan(1000)).count, 334);
    for (let i = 0; i < 10; i++) q.record("ws0", 1);
    store.down = false;
    store.failAfterApply = true; // applied, but the answer is lost: the batch will be re-sent
    assert.equal(await q.flushNow(), false);
    store.failAfterApply = false;
    assert.equal(await q.flushNow(), true);
    assert.equal(await q.flushNow(), true);
    assert.equal(store.day("ws0", "2026-11-22"), 344);
    assert.equal(store.day("ws1", "2026-11-22"), 334);
    assert.equal(store.day("ws2", "2026-11-22"), 332);
    assert.equal(store.month("ws0", "2026-11"), 344);
    assert.equal(q.unflushedUnits(), 0);
    assert.equal(q.check("ws0", plan(1000)).count, 344);
  });

  it("close() flushes what is left", async () => {
    const store = new FlakyStore();
    const clock = new FakeClock(Date.UTC(2026, 10, 22, 12));
    const q = new ReconciledQuotaTracker({ store, clock, flushIntervalMs: 10 });
    q.start();
    q.record("ws1", 7);
    store.down = true;
    setTimeout(() => {
      store.down = false;
    }, 50);
    assert.equal(await q.close(2_000), true);
    assert.equal(store.day("ws1", "2026-11-22"), 7);
  });

  it("forgets idle workspaces with nothing unflushed", async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 22, 12));
    const q = new ReconciledQuotaTracker({ store: new MemoryQuotaStore(), clock, idleEvictMs: 1000 });
    q.record("ws1", 1);
    await q.flushNow();
    await q.flushNow();
    clock.advance(1001);
    await q.flushNow();
    assert.equal(q.unflushedUnits(), 0);
    assert.equal((q as unknown as { workspaces: Map<string, unknown> }).workspaces.size, 0);
  });

  it("the noop tracker allows everything", () => {
    const r = new NoopQuotaTracker().check("ws", plan(1));
    assert.ok(r.allowed);
  });
});
