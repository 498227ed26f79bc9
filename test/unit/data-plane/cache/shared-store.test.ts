import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { allocateStore, SharedStore } from "../../../../data-plane/src/cache/shared-store";

const STORE_MODULE = require.resolve("../../../../data-plane/src/cache/shared-store");

/** The value every writer stores under `key`: a reader can tell a right answer from a wrong or torn one. */
function expectedValue(key: string, size: number): string {
  return `${key}|${"v".repeat(size)}|${key.length}`;
}

/**
 * Runs `threads` worker threads over one store, each executing `body` (JavaScript with `store`, `index`,
 * `expectedValue` and `args` in scope, returning what the thread reports) once all are started, so that their
 * loops overlap.
 */
function inThreads<T>(
  buffers: SharedArrayBuffer[],
  threads: number,
  body: string,
  args: unknown = {},
): Promise<T[]> {
  const gate = new SharedArrayBuffer(4);
  const source = `
    const { parentPort, workerData } = require("node:worker_threads");
    const { buffers, gate, module, threads, index, args } = workerData;
    const { SharedStore } = require(module);
    const store = new SharedStore(buffers);
    const expectedValue = ${expectedValue.toString()};
    const g = new Int32Array(gate);
    Atomics.add(g, 0, 1);
    while (Atomics.load(g, 0) < threads) {}
    parentPort.postMessage((() => { ${body} })());
  `;
  return Promise.all(
    Array.from(
      { length: threads },
      (_, index) =>
        new Promise<T>((resolve, reject) => {
          const w = new Worker(source, {
            eval: true,
            workerData: { buffers, gate, module: STORE_MODULE, threads, index, args },
          });
          w.once("message", resolve);
          w.once("error", reject);
        }),
    ),
  );
}

function bytesOf(buffers: SharedArrayBuffer[]): number {
  return buffers.reduce((n, b) => n + b.byteLength, 0);
}

describe("data-plane: shared response cache store", () => {
  it("stores, replaces and finds values by the whole key, multi-byte text included", () => {
    const s = new SharedStore(allocateStore(1 << 20));
    assert.equal(s.get("a"), undefined);
    assert.equal(s.set("a", ',"result":"1"}', undefined), true);
    assert.equal(s.get("a"), ',"result":"1"}');
    s.set("a", ',"result":"2"}', undefined);
    assert.equal(s.get("a"), ',"result":"2"}');
    assert.equal(s.entries, 1, "a replaced entry leaves the index");
    const key = 'eth\u0000p\u0000eth_call\u0000[{"data":"ünï€😀"}]';
    s.set(key, ',"result":"ünï€😀"}', undefined);
    assert.equal(s.get(key), ',"result":"ünï€😀"}');
    assert.equal(s.get(key.slice(0, -1)), undefined, "a prefix is another key");
    s.set("", "", undefined);
    assert.equal(s.get(""), "");
    assert.equal(s.has("a"), true);
    assert.equal(s.has("b"), false);
  });

  it("keys whose hashes collide are told apart by their bytes", () => {
    // A one-slot-per-64-bytes index in a small store: thousands of keys share home slots and probe runs.
    const s = new SharedStore(allocateStore(512 * 1024));
    for (let i = 0; i < 3000; i++) s.set(`k${i}`, `v${i}`, undefined);
    let found = 0;
    for (let i = 0; i < 3000; i++) {
      const v = s.get(`k${i}`);
      if (v !== undefined) {
        assert.equal(v, `v${i}`);
        found++;
      }
    }
    assert.equal(found, 3000);
  });

  it("TTL entries expire by the clock; entries without one do not", () => {
    let now = 1_000_000;
    const s = new SharedStore(allocateStore(1 << 20), { now: () => now });
    s.set("timed", "t", 2000);
    s.set("final", "f", undefined);
    now += 1999;
    assert.equal(s.get("timed"), "t");
    assert.equal(s.has("timed"), true);
    now += 1;
    assert.equal(s.has("timed"), false);
    assert.equal(s.get("timed"), undefined);
    assert.equal(s.entries, 1, "an expired entry found by a read leaves the index");
    now += 1e9;
    assert.equal(s.get("final"), "f");
  });

  it("stays within CACHE_MAX_BYTES, evicting the oldest first", () => {
    const max = 256 * 1024;
    const buffers = allocateStore(max);
    assert.ok(bytesOf(buffers) <= max, `${bytesOf(buffers)} bytes of shared memory`);
    const s = new SharedStore(buffers);
    for (let i = 0; i < 2000; i++)
      assert.equal(s.set(`k${i}`, expectedValue(`k${i}`, 1000), undefined), true);
    assert.ok(s.usedBytes <= max);
    assert.equal(s.get("k0"), undefined, "the oldest went first");
    assert.equal(s.get("k1999"), expectedValue("k1999", 1000));
    // Everything newer than the oldest entry kept is kept (FIFO): no holes.
    let oldest = 1999;
    while (oldest > 0 && s.get(`k${oldest - 1}`) !== undefined) oldest--;
    assert.ok(oldest > 1500, `kept from k${oldest}`);
    for (let i = oldest; i < 2000; i++) assert.equal(s.get(`k${i}`), expectedValue(`k${i}`, 1000));
    assert.equal(s.entries, 2000 - oldest);
  });

  it("an entry read while it ages is kept through a scan of one-off keys (close to LRU)", () => {
    const s = new SharedStore(allocateStore(256 * 1024));
    s.set("hot", expectedValue("hot", 100), undefined);
    for (let i = 0; i < 5000; i++) {
      s.set(`scan${i}`, expectedValue(`scan${i}`, 500), undefined);
      if (i % 50 === 0) assert.equal(s.get("hot"), expectedValue("hot", 100), `after ${i} one-off keys`);
    }
    assert.equal(s.get("scan0"), undefined);
  });

  it("many small entries are bounded by the index as well (count), and it keeps working", () => {
    const s = new SharedStore(allocateStore(64 * 1024));
    for (let i = 0; i < 20_000; i++) s.set(`${i}`, "x", undefined);
    assert.ok(s.entries > 100 && s.entries < 20_000, `${s.entries} entries`);
    assert.equal(s.get("19999"), "x");
    assert.equal(s.get("0"), undefined);
  });

  it("hostile sizes: tiny stores keep nothing, oversized entries are refused, nothing throws", () => {
    for (const max of [1, 8, 63, 64, 100, 1000, 4096]) {
      const s = new SharedStore(allocateStore(max));
      const kept = s.set("k", "v", undefined);
      if (max < 100) assert.equal(kept, false, `max ${max}`);
      assert.equal(s.get("k"), kept ? "v" : undefined);
      s.clear();
      assert.equal(
        s.dropTimed(() => true),
        0,
      );
    }
    const s = new SharedStore(allocateStore(1 << 20));
    // An eighth of the arena at most per entry, key bytes included.
    assert.equal(s.set("big", "x".repeat(200 * 1024), undefined), false);
    assert.equal(s.set("x".repeat(200 * 1024), "v", undefined), false);
    assert.equal(s.get("big"), undefined);
    const longKey = `eth\u0000p\u0000eth_call\u0000${"a".repeat(50_000)}`;
    assert.equal(s.set(longKey, "v", undefined), true, "a long key within the bound is fine");
    assert.equal(s.get(longKey), "v");
    assert.equal(s.get("big"), undefined);
    // Entries exactly filling the arena to its end wrap around.
    for (let i = 0; i < 5000; i++) s.set(`w${i}`, "y".repeat(i % 300), undefined);
    assert.equal(s.get("w4999"), "y".repeat(4999 % 300));
  });

  it("dropTimed drops matching live entries set with a TTL, never those without", () => {
    const s = new SharedStore(allocateStore(1 << 20));
    s.set("t1", "1", 60_000);
    s.set("t2", "2", 60_000);
    s.set("t1", "1b", 60_000);
    s.set("p1", "3", undefined);
    assert.equal(
      s.dropTimed((k) => k.endsWith("1")),
      1,
    );
    assert.equal(s.get("t1"), undefined);
    assert.equal(s.get("t2"), "2");
    assert.equal(s.get("p1"), "3");
    assert.equal(
      s.dropTimed(() => true),
      1,
    );
    s.clear();
    assert.equal(s.get("p1"), undefined);
    assert.equal(s.entries, 0);
  });

  it("matches a plain map under random sets, replaces and drops (no eviction)", () => {
    const s = new SharedStore(allocateStore(8 << 20));
    const model = new Map<string, string>();
    let seed = 7;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    for (let i = 0; i < 20_000; i++) {
      const key = `k${rnd(2000)}`;
      const op = rnd(10);
      if (op < 6) {
        const v = `${key}:${i}:${"z".repeat(rnd(200))}`;
        s.set(key, v, op === 0 ? 60_000 : undefined);
        model.set(key, v);
      } else if (op === 6) {
        const dropped = s.dropTimed((k) => k === key);
        if (dropped === 1) model.delete(key);
      } else {
        assert.equal(s.get(key), model.get(key), key);
      }
    }
    for (const [k, v] of model) assert.equal(s.get(k), v);
    assert.equal(s.entries, model.size);
  });

  it("threads writing and reading at once: every hit is the right value, the bound holds", async () => {
    const max = 512 * 1024;
    const buffers = allocateStore(max);
    const reports = await inThreads<{ hits: number; wrong: number; writes: number }>(
      buffers,
      4,
      `
      let hits = 0, wrong = 0, writes = 0;
      for (let i = 0; i < 20000; i++) {
        const key = "k" + ((i * 7 + index * 13) % 3000);
        if (i % 3 === 0) { store.set(key, expectedValue(key, (i % 40) * 25), i % 2 ? 60000 : undefined); writes++; }
        else {
          const v = store.get(key);
          if (v !== undefined) { hits++; if (!v.startsWith(key + "|") || !v.endsWith("|" + key.length)) wrong++; }
        }
      }
      return { hits, wrong, writes };
    `,
    );
    const store = new SharedStore(buffers);
    for (const r of reports) {
      assert.equal(r.wrong, 0);
      assert.ok(r.hits > 0, "threads read each other's entries");
    }
    assert.ok(store.usedBytes <= max);
    // The index and the arena agree after the race: every indexed key reads back whole.
    let found = 0;
    for (let i = 0; i < 3000; i++) {
      const v = store.get(`k${i}`);
      if (v !== undefined) {
        assert.ok(v.startsWith(`k${i}|`) && v.endsWith(`|${`k${i}`.length}`), v.slice(0, 20));
        found++;
      }
    }
    assert.equal(found, store.entries);
  });

  it("an entry one thread stores is a hit on another", async () => {
    const buffers = allocateStore(1 << 20);
    new SharedStore(buffers).set(
      'eth\u0000f\u0000eth_getBlockByNumber\u0000["0x1",false]',
      "block",
      undefined,
    );
    const [seen] = await inThreads<string | undefined>(
      buffers,
      1,
      `return store.get('eth\\u0000f\\u0000eth_getBlockByNumber\\u0000["0x1",false]');`,
    );
    assert.equal(seen, "block");
  });
});
