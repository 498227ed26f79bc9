import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import {
  allocateTenantTables,
  LocalTenantCounts,
  SharedTenantCounts,
  sharedTenantCounts,
  type TenantCounts,
} from "../../../../data-plane/src/limits/tenant-counts";

/** The same behaviour from both implementations, one thread. */
function behavesAsCounts(make: () => TenantCounts): void {
  it("tryAdd admits within the cap, per id; a refusal adds nothing; anyWhenIdle admits any size at 0", () => {
    const c = make();
    assert.equal(c.tryAdd("a", 3, 4), true);
    assert.equal(c.tryAdd("a", 2, 4), false);
    assert.equal(c.get("a"), 3);
    assert.equal(c.tryAdd("a", 1, 4), true);
    assert.equal(c.tryAdd("b", 4, 4), true, "another id has its own count");
    assert.equal(c.tryAdd("c", 9, 4), false);
    assert.equal(c.tryAdd("c", 9, 4, true), true, "idle: any size");
    assert.equal(c.tryAdd("c", 1, 4, true), false, "not idle any more");
    assert.deepEqual([c.get("a"), c.get("b"), c.get("c")], [4, 4, 9]);
    assert.equal(c.size, 3);
  });

  it("sub gives back what was added, never below 0; add counts whatever the cap", () => {
    const c = make();
    c.add("a", 2);
    c.sub("a", 1);
    assert.equal(c.get("a"), 1);
    c.sub("a", 5);
    assert.equal(c.get("a"), 0);
    c.sub("never", 1);
    assert.equal(c.get("never"), 0);
    assert.equal(c.size, 0);
  });
}

describe("TenantCounts", () => {
  describe("LocalTenantCounts", () => behavesAsCounts(() => new LocalTenantCounts()));
  describe("SharedTenantCounts (one view)", () =>
    behavesAsCounts(() => sharedTenantCounts(allocateTenantTables()).inFlight));

  describe("SharedTenantCounts across views of one table (threads)", () => {
    it("each view sees the others' counts and is capped by their sum; sub takes back only its own", () => {
      const shared = allocateTenantTables();
      const t1 = sharedTenantCounts(shared);
      const t2 = sharedTenantCounts(shared);
      assert.equal(t1.wsByKey.tryAdd("app:x", 2, 3), true);
      assert.equal(t2.wsByKey.get("app:x"), 2);
      assert.equal(t2.wsByKey.tryAdd("app:x", 2, 3), false, "2 + 2 > 3 across the two threads");
      assert.equal(t2.wsByKey.tryAdd("app:x", 1, 3), true);
      assert.equal(t1.wsByKey.get("app:x"), 3);
      t2.wsByKey.sub("app:x", 3); // holds 1: gives back 1, not thread 1's
      assert.equal(t1.wsByKey.get("app:x"), 2);
      assert.equal(t2.wsByKey.size, 0);
      assert.equal(t1.wsByKey.size, 1);
      assert.equal(t1.inFlight.get("app:x"), 0, "each cap has its own table");
    });

    it("a count is never below the true one, whatever shares its slots (10,000 ids in one table)", () => {
      const c = sharedTenantCounts(allocateTenantTables()).inFlight as SharedTenantCounts;
      const truth = new Map<string, number>();
      for (let i = 0; i < 10_000; i++) {
        const id = `ip:10.${(i >> 8) & 255}.${i & 255}.1`;
        const n = 1 + (i % 3);
        c.add(id, n);
        truth.set(id, n);
      }
      let exact = 0;
      for (const [id, n] of truth) {
        const got = c.get(id);
        assert.ok(got >= n, `${id}: ${got} < ${n}`);
        if (got === n) exact++;
      }
      // 10,000 ids in 32,768 slots per row: most still count exactly.
      assert.ok(exact > 9_000, `only ${exact} of 10,000 exact`);
    });

    it("threads racing for the one place of each of 100,000 new ids: never two holding one at once", async function () {
      this.timeout(120_000);
      const shared = allocateTenantTables();
      const ROUNDS = 100_000;
      /** Holders of each id right now, and the most seen at once, counted apart from the table. */
      const holders = new SharedArrayBuffer(ROUNDS * 4);
      const most = new SharedArrayBuffer(4);
      const modulePath = require.resolve("../../../../data-plane/src/limits/tenant-counts");
      const source = `
        const { parentPort, workerData } = require("node:worker_threads");
        const { sharedTenantCounts } = require(workerData.modulePath);
        const c = sharedTenantCounts(workerData.shared).wsByKey;
        const holders = new Int32Array(workerData.holders);
        const most = new Int32Array(workerData.most);
        let admitted = 0;
        for (let r = 0; r < workerData.rounds; r++) {
          const id = "app:" + r;
          if (!c.tryAdd(id, 1, 1)) continue;
          admitted++;
          const held = Atomics.add(holders, r, 1) + 1;
          if (held > Atomics.load(most, 0)) Atomics.store(most, 0, held);
          Atomics.sub(holders, r, 1);
          c.sub(id, 1);
        }
        parentPort.postMessage(admitted);
      `;
      const admitted = await Promise.all(
        Array.from(
          { length: 4 },
          () =>
            new Promise<number>((resolve, reject) => {
              const w = new Worker(source, {
                eval: true,
                workerData: { shared, holders, most, modulePath, rounds: ROUNDS },
              });
              w.once("message", resolve);
              w.once("error", reject);
            }),
        ),
      );
      assert.ok(
        admitted.every((n) => n > 0),
        JSON.stringify(admitted),
      );
      assert.equal(new Int32Array(most)[0], 1, "two threads held the one place of an id at once");
    });

    it("four threads racing for 8 slots of one id: never more than 8 held at once, every slot given back", async () => {
      const shared = allocateTenantTables();
      /** Admitted holders right now, counted apart from the table (whose count a racing refusal may lift for a moment). */
      const holders = new SharedArrayBuffer(4);
      const modulePath = require.resolve("../../../../data-plane/src/limits/tenant-counts");
      const source = `
        const { parentPort, workerData } = require("node:worker_threads");
        const { sharedTenantCounts } = require(workerData.modulePath);
        const c = sharedTenantCounts(workerData.shared).inFlight;
        const holders = new Int32Array(workerData.holders);
        let admitted = 0, maxSeen = 0;
        for (let i = 0; i < 20000; i++) {
          if (!c.tryAdd("app:hot", 1, 8)) continue;
          admitted++;
          const held = Atomics.add(holders, 0, 1) + 1;
          if (held > maxSeen) maxSeen = held;
          Atomics.sub(holders, 0, 1);
          c.sub("app:hot", 1);
        }
        parentPort.postMessage({ admitted, maxSeen });
      `;
      const results = await Promise.all(
        Array.from(
          { length: 4 },
          () =>
            new Promise<{ admitted: number; maxSeen: number }>((resolve, reject) => {
              const w = new Worker(source, { eval: true, workerData: { shared, holders, modulePath } });
              w.once("message", resolve);
              w.once("error", reject);
            }),
        ),
      );
      for (const r of results) {
        assert.ok(r.admitted > 0, JSON.stringify(results));
        assert.ok(r.maxSeen <= 8, `held ${r.maxSeen} > 8: ${JSON.stringify(results)}`);
      }
      assert.equal(sharedTenantCounts(shared).inFlight.get("app:hot"), 0, "every slot given back");
    });
  });
});
