import assert from "node:assert/strict";
import type { QuotaStore } from "../../../../data-plane/src/quota/quota-store";
import { ReconciledQuotaTracker } from "../../../../data-plane/src/quota/quota-tracker";
import {
  dayIndexOfKey,
  monthIndexOfKey,
  SharedMemoryQuotaStore,
  SharedQuotaCounts,
} from "../../../../data-plane/src/quota/shared-quota-counts";
import { raceThreads } from "../../../helpers/thread-race";
import { FakeClock } from "../ratelimit/fakes";
import { FlakyStore, MemoryQuotaStore, plan } from "./fakes";

describe("data-plane quota: SharedQuotaCounts (a quota exact for the process, whatever thread serves)", () => {
  const T = Date.UTC(2026, 10, 27, 12, 0, 0);

  /** Two trackers as two serving threads: one table pair, one store (Redis's part), own instance ids. */
  const twoThreads = (store: QuotaStore, clock = new FakeClock(T)) => {
    const tables = SharedQuotaCounts.allocate(1024);
    const a = new ReconciledQuotaTracker({
      store,
      clock,
      shared: new SharedQuotaCounts(tables),
      instanceId: "a",
    });
    const b = new ReconciledQuotaTracker({
      store,
      clock,
      shared: new SharedQuotaCounts(tables),
      instanceId: "b",
    });
    return { a, b, clock };
  };

  it("one thread's units, not yet flushed, count in the other thread's decision (alone, each allowed the whole limit)", async () => {
    const store = new MemoryQuotaStore();
    const { a, b } = twoThreads(store);
    a.record("ws1", 60);
    const r = b.check("ws1", plan(100), 50);
    assert.equal(r.allowed, false, "60 + 50 > 100");
    assert.equal(r.count, 60);
    // Without shared counts (the threads before): each thread saw only its own units until a flush.
    const alone = new ReconciledQuotaTracker({ store: new MemoryQuotaStore(), clock: new FakeClock(T) });
    const other = new ReconciledQuotaTracker({ store: new MemoryQuotaStore(), clock: new FakeClock(T) });
    alone.record("ws1", 60);
    assert.equal(other.check("ws1", plan(100), 50).allowed, true);
  });

  it("a flush moves units from unconfirmed to known: counted once, whatever order the threads flush in", async () => {
    const store = new MemoryQuotaStore();
    const { a, b } = twoThreads(store);
    a.record("ws1", 60);
    b.record("ws1", 10);
    assert.equal(a.check("ws1", plan(1000)).count, 70);
    await a.flushNow();
    assert.equal(b.check("ws1", plan(1000)).count, 70, "after a's flush");
    await b.flushNow();
    assert.equal(a.check("ws1", plan(1000)).count, 70, "after both");
    // An older total read back late (a's read-only round answered after b's) never lowers the count.
    await a.flushNow();
    b.record("ws1", 5);
    await b.flushNow();
    await a.flushNow();
    assert.equal(a.check("ws1", plan(1000)).count, 75);
    assert.equal(b.check("ws1", plan(1000)).count, 75);
  });

  it("a flush answered after its timeout and again on its re-send: its units are taken back once", async () => {
    const store = new FlakyStore();
    const tables = SharedQuotaCounts.allocate(1024);
    const clock = new FakeClock(T);
    const q = new ReconciledQuotaTracker({
      store,
      clock,
      shared: new SharedQuotaCounts(tables),
      flushTimeoutMs: 20,
    });
    q.record("ws1", 40);
    store.hold = true;
    assert.equal(await q.flushNow(), false, "the first send timed out");
    const resend = q.flushNow(); // the same batch, the same sequence
    store.hold = false;
    store.release(); // both answers arrive
    assert.equal(await resend, true);
    assert.equal(q.check("ws1", plan(1000)).count, 40);
    assert.equal(new SharedQuotaCounts(tables).dayCount("ws1", dayIndexOfKey("2026-11-27")), 40);
  });

  it("units recorded before midnight and confirmed after it leave yesterday; today starts from zero", async () => {
    const store = new MemoryQuotaStore();
    const { a, b, clock } = twoThreads(store, new FakeClock(Date.UTC(2026, 10, 30, 23, 59, 59)));
    a.record("ws1", 30);
    clock.t = Date.UTC(2026, 11, 1, 0, 0, 1); // a new day and a new month
    assert.equal(b.check("ws1", plan(100, 1000)).count, 0);
    assert.equal(b.check("ws1", plan(100, 1000)).monthCount, 0);
    b.record("ws1", 7);
    await a.flushNow();
    await b.flushNow();
    const view = new SharedQuotaCounts(SharedQuotaCounts.allocate(1024));
    assert.equal(view.dayCount("ws1", dayIndexOfKey("2026-12-01")), 0, "another table sees nothing");
    assert.equal(a.check("ws1", plan(100, 1000)).count, 7);
    assert.equal(b.check("ws1", plan(100, 1000)).monthCount, 7);
    assert.equal(store.counters.get("ws1\u0000d\u00002026-11-30"), 30);
  });

  it("day and month windows from the tracker's keys", () => {
    assert.equal(dayIndexOfKey("1970-01-02"), 1);
    assert.equal(dayIndexOfKey("2026-11-27"), Math.floor(Date.UTC(2026, 10, 27) / 86_400_000));
    assert.equal(monthIndexOfKey("2026-11"), 2026 * 12 + 10);
    assert.equal(monthIndexOfKey("2027-01") - monthIndexOfKey("2026-12"), 1);
  });

  it("QUOTA_MODE=local over 4 worker threads: the process serves its limit, not 4 times it, and counts every unit", async () => {
    const tables = SharedQuotaCounts.allocate(1024);
    const limit = 3000;
    const threads = 4;
    const served = await raceThreads<number>(
      threads,
      {
        t: T,
        limit,
        tables,
        tracker: require.resolve("../../../../data-plane/src/quota/quota-tracker"),
        shared: require.resolve("../../../../data-plane/src/quota/shared-quota-counts"),
      },
      `
      const { ReconciledQuotaTracker } = require(data.tracker);
      const { SharedQuotaCounts, SharedMemoryQuotaStore } = require(data.shared);
      const shared = new SharedQuotaCounts(data.tables);
      const clock = { now: () => data.t };
      const q = new ReconciledQuotaTracker({ store: new SharedMemoryQuotaStore(shared), shared, clock, instanceId: "t" + index });
      const limits = { name: "t", requestsPerSecond: 1, dailyRequestLimit: data.limit, monthlyRequestLimit: null };
      let served = 0;
      // Rounds of 100 requests per thread, a flush every other round: units unconfirmed and confirmed.
      for (let round = 0; round < 20; round++) {
        for (let i = 0; i < 100; i++) {
          if (q.check("ws1", limits, 1).allowed) { q.record("ws1", 1); served++; }
        }
        if (round % 2 === 1) await q.flushNow();
        barrier(round);
      }
      await q.close();
      return served;
    `,
    );
    const total = served.reduce((n, s) => n + s, 0);
    // 8,000 asked for. A check and its record are one step per thread, so threads racing between them can
    // each pass on the last unit: at most threads - 1 over.
    assert.ok(total >= limit && total <= limit + threads - 1, `served ${total} of ${limit}: ${served}`);
    for (const s of served) assert.ok(s >= 100, `every thread served in the first round: ${served}`);
    const view = new SharedQuotaCounts(tables);
    const store = new SharedMemoryQuotaStore(view);
    const totals = await store.apply("ws1", "reader", 0, [], "2026-11-27", "2026-11");
    assert.deepEqual(totals, { dayCount: total, monthCount: total }, "every unit counted once, all flushed");
    assert.equal(
      view.dayCount("ws1", dayIndexOfKey("2026-11-27")),
      total,
      "known + unconfirmed = what was served",
    );
  });
});
