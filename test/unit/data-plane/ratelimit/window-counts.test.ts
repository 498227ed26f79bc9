import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { LocalRateLimiter } from "../../../../data-plane/src/ratelimit/rate-limiter";
import { WindowCounts } from "../../../../data-plane/src/ratelimit/window-counts";
import { eventually } from "../../../helpers/eventually";
import { raceThreads } from "../../../helpers/thread-race";
import { FakeClock } from "./fakes";

const T0 = Date.UTC(2026, 0, 10, 12, 0, 0, 200);
const W0 = Math.floor(T0 / 1000);

interface Raced {
  admitted: number;
  /** Request objects admitted per identifier, as the thread saw its own admissions. */
  byId: Record<string, number>;
}

/**
 * `raceThreads` over one shared table: `body` has `table`, `clock`, `T0`, `modules`, `index` and
 * `barrier` in scope, and returns a Raced.
 */
async function race(shared: SharedArrayBuffer, threads: number, body: string): Promise<Raced[]> {
  const modules = {
    rateLimiter: require.resolve("../../../../data-plane/src/ratelimit/rate-limiter"),
    windowCounts: require.resolve("../../../../data-plane/src/ratelimit/window-counts"),
    admission: require.resolve("../../../../data-plane/src/limits/admission"),
    access: require.resolve("../../../../data-plane/src/access/access-rules"),
    metrics: require.resolve("../../../../data-plane/src/metrics/metrics"),
    quota: require.resolve("../../../../data-plane/src/quota/quota-tracker"),
  };
  return raceThreads<Raced>(
    threads,
    { shared, modules, T0 },
    `
    const { shared, modules, T0 } = data;
    const { WindowCounts } = require(modules.windowCounts);
    const table = new WindowCounts(shared);
    const clock = { now: () => T0 };
    ${body}
  `,
  );
}

describe("data-plane ratelimit: WindowCounts (per-second counts shared by the serving threads)", () => {
  it("one slot per identifier and window: stable, counted, refunded; windows and identifiers apart", () => {
    const c = new WindowCounts();
    const a = c.slot("ws:a", W0);
    assert.equal(c.slot("ws:a", W0), a, "stable within the window");
    assert.equal(c.compareExchange(a, 0, 5), 0);
    assert.equal(c.compareExchange(a, 0, 9), 5, "a stale expectation adds nothing");
    assert.equal(c.load(a), 5);
    assert.equal(c.count("ws:b", W0), 0);
    assert.equal(c.count("ws:a", W0 + 1), 0, "the next window starts at 0");
    c.refund("ws:a", W0, 2);
    assert.equal(c.count("ws:a", W0), 3);
    c.refund("ws:never", W0, 2);
    assert.equal(c.active(W0), 1, "a refund or a count claims no slot");
    // The next second has its own slot, starting at 0; the previous second's is kept for a second more.
    const next = c.slot("ws:a", W0 + 1);
    assert.notEqual(next, a);
    assert.equal(c.load(next), 0);
    assert.equal(c.active(W0 + 1), 1);
    assert.equal(c.count("ws:a", W0), 3);
    // Two seconds on, the old slot is reclaimed.
    assert.equal(c.slot("ws:a", W0 + 2), a);
    assert.equal(c.load(a), 0);
  });

  it("a handle of second W stays valid while another thread fills second W + 1 (a check under way at the boundary)", () => {
    const shared = WindowCounts.allocate(32);
    const late = new WindowCounts(shared);
    const early = new WindowCounts(shared);
    const h = late.slot("ws:a", W0);
    assert.equal(late.compareExchange(h, 0, 10), 0);
    // The other thread is in W0 + 1 already and claims every slot it may.
    for (let i = 0; i < 40; i++) early.slot(`ip:${i}`, W0 + 1);
    assert.equal(early.spilled, 9, "31 slots free for W0 + 1, ws:a's W0 slot kept");
    assert.equal(late.compareExchange(h, 10, 11), 10, "the late thread's handle still counts ws:a in W0");
    assert.equal(early.count("ws:a", W0), 11);
  });

  it("two views of one table (two threads) share the count", () => {
    const shared = WindowCounts.allocate();
    const t1 = new WindowCounts(shared);
    const t2 = new WindowCounts(shared);
    const s1 = t1.slot("ws:a", W0);
    t1.compareExchange(s1, 0, 30);
    const s2 = t2.slot("ws:a", W0);
    assert.equal(t2.load(s2), 30);
    assert.equal(t2.compareExchange(s2, 30, 60), 30);
    assert.equal(t1.count("ws:a", W0), 60);
  });

  it("a thread whose clock read is a moment behind never wipes the newer window's count", () => {
    const shared = WindowCounts.allocate(64);
    const ahead = new WindowCounts(shared);
    const behind = new WindowCounts(shared);
    ahead.compareExchange(ahead.slot("ws:a", W0 + 1), 0, 7);
    const old = behind.slot("ws:a", W0);
    assert.equal(behind.load(old), 0);
    assert.equal(ahead.count("ws:a", W0 + 1), 7, "the newer window kept its count");
  });

  it("a full neighbourhood spills to this thread's own counts, still exact for the thread", () => {
    const c = new WindowCounts(WindowCounts.allocate(32));
    const handles: number[] = [];
    for (let i = 0; i < 40; i++) {
      const h = c.slot(`ip:10.0.0.${i}`, W0);
      assert.equal(c.compareExchange(h, 0, i + 1), 0);
      handles.push(h);
    }
    assert.equal(c.spilled, 8, "32 shared slots, 8 spilled");
    for (let i = 0; i < 40; i++) assert.equal(c.count(`ip:10.0.0.${i}`, W0), i + 1);
    assert.equal(c.active(W0), 40);
    // The next second finds the table still held by this one's (kept a second more): spilled; the one
    // after fits again.
    c.slot("ip:10.0.0.0", W0 + 1);
    assert.equal(c.spilled, 9);
    assert.equal(c.load(c.slot("ip:10.0.0.39", W0 + 2)), 0);
    assert.equal(c.spilled, 9);
  });

  it("a flood of 200,000 identifiers in one second: every limit still holds (shared or spilled), and the table is whole again two seconds on", () => {
    const clock = new FakeClock(T0);
    const counts = new WindowCounts();
    const rl = new LocalRateLimiter({ clock, counts });
    assert.equal(rl.check("ws:victim", 30, 50).allowed, true);
    for (let i = 0; i < 200_000; i++) rl.check(`ip:2001:db8:${i.toString(16)}::/64`, 1, 50);
    assert.ok(counts.spilled > 0, "the flood overflowed the table");
    // Identifiers seen before the flood keep their shared slot; new ones are still limited (in the spill).
    assert.equal(rl.check("ws:victim", 30, 50).allowed, false);
    assert.equal(rl.check("ws:late", 30, 50).allowed, true);
    assert.equal(rl.check("ws:late", 30, 50).allowed, false);
    clock.advance(2000);
    const spilled = counts.spilled;
    assert.equal(rl.check("ws:after", 50, 50).allowed, true);
    assert.equal(rl.check("ws:after", 1, 50).allowed, false);
    assert.equal(counts.spilled, spilled, "two seconds on, a new identifier has a shared slot again");
  });

  it("LocalRateLimiter over one table: 4 threads x 10,000 checks of 1 against 5,000/s admit exactly 5,000", async () => {
    const shared = WindowCounts.allocate();
    const results = await race(
      shared,
      4,
      `
      const { LocalRateLimiter } = require(modules.rateLimiter);
      const rl = new LocalRateLimiter({ clock, counts: table });
      let admitted = 0;
      // 50 rounds of 200 checks, all threads in each round: the first rounds (800 checks) all fit.
      for (let round = 0; round < 50; round++) {
        for (let i = 0; i < 200; i++) if (rl.check("ws:hot", 1, 5000).allowed) admitted++;
        barrier(round);
      }
      return { admitted, byId: {} };
    `,
    );
    const total = results.reduce((n, r) => n + r.admitted, 0);
    assert.equal(total, 5000, JSON.stringify(results));
    // Every thread took part while the window had room (the rounds keep them in step).
    for (const r of results) assert.ok(r.admitted >= 200, JSON.stringify(results));
    const rl = new LocalRateLimiter({ clock: new FakeClock(T0), counts: new WindowCounts(shared) });
    assert.equal(rl.check("ws:hot", 1, 5000).allowed, false, "the process's window is full");
  });

  it("the seed's example raced: 4 threads x 2,000 batches of 30 against 50/s: exactly one batch admitted", async () => {
    const shared = WindowCounts.allocate();
    const results = await race(
      shared,
      4,
      `
      const { LocalRateLimiter } = require(modules.rateLimiter);
      const rl = new LocalRateLimiter({ clock, counts: table });
      let admitted = 0;
      for (let i = 0; i < 2000; i++) if (rl.check("ws:seed", 30, 50).allowed) admitted++;
      return { admitted, byId: {} };
    `,
    );
    assert.equal(
      results.reduce((n, r) => n + r.admitted, 0),
      1,
      JSON.stringify(results),
    );
    assert.equal(new WindowCounts(shared).count("ws:seed", W0), 30);
  });

  it("LimitsGate, app caps and the workspace raced by 4 threads: every window within its limit, refunds exact", async () => {
    // Threads 0 and 1 send for app A, 2 and 3 for app B, one workspace: caps 1,000 per app, 1,500 for the
    // workspace. Every admission commits the app's window, then the workspace's, and refunds the app's when
    // the workspace refuses (admission.ts): the workspace must end at exactly 1,500 (demand far exceeds
    // it), each app at most 1,000, and each app's count exactly what was admitted for it.
    const shared = WindowCounts.allocate();
    const results = await race(
      shared,
      4,
      `
      const { LocalRateLimiter } = require(modules.rateLimiter);
      const { LimitsGate } = require(modules.admission);
      const { CompiledAccess } = require(modules.access);
      const { NoopMetrics } = require(modules.metrics);
      const { NoopQuotaTracker } = require(modules.quota);
      const rateLimiter = new LocalRateLimiter({ clock, counts: table });
      const gate = new LimitsGate({
        limits: { rateLimiter, quota: new NoopQuotaTracker(), appQuota: new NoopQuotaTracker(),
          computeUnitQuota: new NoopQuotaTracker(),
        },
        metrics: new NoopMetrics(),
        publicPerSecond: 50,
      });
      const appId = index < 2 ? "A" : "B";
      const key = {
        hash: "h" + appId,
        record: {
          kind: "app", workspaceId: "ws-race", appId, nodeId: null,
          plan: { name: "p", requestsPerSecond: 1500, dailyRequestLimit: 1e9, monthlyRequestLimit: null },
          allowlist: { origins: [], ips: [] }, expiresAtMs: null, rpcMethods: null,
        },
        access: new CompiledAccess({
          methodMode: "DENY", methods: [], requestsPerSecond: 1000, requestsPerDay: null, userAgents: [], jwt: null,
        }),
      };
      let admitted = 0;
      for (let i = 0; i < 10000; i++) if (gate.admit(key, undefined, 1).ok) admitted++;
      return { admitted, byId: { [appId]: admitted } };
    `,
    );
    const byApp = { A: 0, B: 0 } as Record<string, number>;
    for (const r of results) for (const [id, n] of Object.entries(r.byId)) byApp[id]! += n;
    const view = new WindowCounts(shared);
    const detail = `${JSON.stringify(results)}; A ${view.count("app:A", W0)}, B ${view.count("app:B", W0)}`;
    assert.equal(byApp.A! + byApp.B!, 1500, detail);
    assert.equal(view.count("ws:ws-race", W0), 1500, detail);
    assert.ok(byApp.A! <= 1000 && byApp.B! <= 1000, detail);
    assert.equal(view.count("app:A", W0), byApp.A, `app A's count is what was admitted: ${detail}`);
    assert.equal(view.count("app:B", W0), byApp.B, `app B's count is what was admitted: ${detail}`);
  });

  it("4 threads claiming slots for 2,000 identifiers at once: each identifier ends with exactly one slot", async () => {
    // Every thread adds 1 to each of the same 2,000 identifiers, in a different order: a lost claim race
    // (two slots for one identifier) would show as a count below 4 in the slot that is found.
    const shared = WindowCounts.allocate(4096);
    await race(
      shared,
      4,
      `
      for (let k = 0; k < 2000; k++) {
        const i = index % 2 === 0 ? k : 1999 - k;
        const h = table.slot("ip:" + i, ${W0});
        for (;;) { const c = table.load(h); if (table.compareExchange(h, c, c + 1) === c) break; }
      }
      return { admitted: table.spilled, byId: {} };
    `,
    );
    const view = new WindowCounts(shared);
    for (let i = 0; i < 2000; i++) assert.equal(view.count(`ip:${i}`, W0), 4, `ip:${i}`);
    assert.equal(view.active(W0), 2000);
  });

  /**
   * A thread reading, in a worker, a slot that `claimer` left CLAIMING (the state between a claim and its
   * publication); resolves with the handle it got and whether it spilled. `started` once it is reading.
   */
  const readClaimed = (shared: SharedArrayBuffer) => {
    const source = `
      const { parentPort, workerData } = require("node:worker_threads");
      const { WindowCounts } = require(workerData.module);
      const view = new WindowCounts(workerData.shared);
      parentPort.postMessage("started");
      const handle = view.slot("ws:claimed", workerData.window);
      parentPort.postMessage({ handle, spilled: view.spilled });
    `;
    const w = new Worker(source, {
      eval: true,
      workerData: {
        shared,
        module: require.resolve("../../../../data-plane/src/ratelimit/window-counts"),
        window: W0,
      },
    });
    const started = new Promise<void>((resolve) => w.once("message", () => resolve()));
    const done = new Promise<{ handle: number; spilled: number }>((resolve, reject) => {
      w.on("message", (m) => {
        if (m !== "started") resolve(m);
      });
      w.once("error", reject);
    });
    return { started, done: done.finally(() => w.terminate()) };
  };

  it("a claimer descheduled between its claim and its publication: the reader waits for it, no spill", async () => {
    const shared = WindowCounts.allocate(1024);
    const handle = new WindowCounts(shared).slot("ws:claimed", W0);
    const t = new Int32Array(shared);
    const windowWord = handle - 3; // [window, tagA, tagB, count]
    const published = Atomics.load(t, windowWord);
    // Back to mid-claim: tags written, window not yet published.
    Atomics.store(t, windowWord, -1);
    const reader = readClaimed(shared);
    await reader.started;
    // The claimer runs again only once the reader is past its spins and asleep on the window word:
    // `Atomics.notify` wakes one sleeper and says so (the reader looks, finds the claim, sleeps again).
    // A reader that gave up instead (spilled, as it used to) ends first, and the assertion below fails.
    let ended = false;
    const done = reader.done.finally(() => {
      ended = true;
    });
    await eventually(
      () => ended || Atomics.notify(t, windowWord, 1) === 1,
      "the reader asleep on the claim",
      10_000,
      1,
    );
    Atomics.store(t, windowWord, published);
    Atomics.notify(t, windowWord);
    const got = await done;
    assert.deepEqual(got, { handle, spilled: 0 }, "the reader found the published slot");
  });

  it("a claim never published (its thread gone between two stores): the reader spills after its wait, never hangs", async () => {
    const shared = WindowCounts.allocate(1024);
    const handle = new WindowCounts(shared).slot("ws:claimed", W0);
    Atomics.store(new Int32Array(shared), handle - 3, -1);
    const reader = readClaimed(shared);
    const got = await reader.done;
    assert.ok(got.handle >= new Int32Array(shared).length, `a spill handle, got ${got.handle}`);
    assert.equal(got.spilled, 1);
  });
});
