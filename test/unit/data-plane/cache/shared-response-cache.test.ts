import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import {
  allocateSharedCache,
  type SharedCacheMemory,
  SharedResponseCache,
} from "../../../../data-plane/src/cache/shared-response-cache";
import { type CallResult, type Reply, ReplyKind } from "../../../../data-plane/src/upstream/reply";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";

const reply = (result: string): Reply => ({
  tail: `,"result":"${result}"}`,
  kind: ReplyKind.Result,
  category: "Success",
});

/** A load the test settles by hand, counting its calls. */
function controlledLoad() {
  const c = {
    calls: 0,
    settle: (_r: CallResult) => {},
    fail: (_e: Error) => {},
    load: (): Promise<CallResult> => {
      c.calls++;
      return new Promise((resolve, reject) => {
        c.settle = resolve;
        c.fail = reject;
      });
    },
  };
  return c;
}

/** Two views of one process's cache, as two serving threads have (same memory, own in-thread state). */
function twoThreads(admission: "first" | "second" = "second", mergeWaitMs = 60_000) {
  const memory = allocateSharedCache(1 << 20, admission);
  return [
    new SharedResponseCache(memory, { mergeWaitMs }),
    new SharedResponseCache(memory, { mergeWaitMs }),
  ] as const;
}

describe("data-plane: response cache shared by serving threads", () => {
  it("an answer stored by one thread is a hit on the other, as a Success result", () => {
    const [a, b] = twoThreads("first");
    a.set("k", reply("1"), undefined);
    assert.deepEqual(b.get("k"), reply("1"));
    b.clear();
    assert.equal(a.get("k"), undefined);
  });

  it("an answer a thread read before is not served again once another thread replaced, dropped or cleared it", () => {
    let now = 5_000;
    const memory = allocateSharedCache(1 << 20, "first");
    const a = new SharedResponseCache(memory, { mergeWaitMs: 1000, now: () => now });
    const b = new SharedResponseCache(memory, { mergeWaitMs: 1000, now: () => now });
    a.set("k", reply("1"), undefined);
    assert.deepEqual(b.get("k"), reply("1"));
    assert.equal(b.get("k"), b.get("k"), "kept: the same Reply, nothing copied out");
    a.set("k", reply("2"), undefined);
    assert.deepEqual(b.get("k"), reply("2"), "replaced on another thread");
    a.set("t", reply("3"), 1000);
    assert.deepEqual(b.get("t"), reply("3"));
    assert.equal(
      a.dropTimed((k) => k === "t"),
      1,
    );
    assert.equal(b.get("t"), undefined, "dropped on another thread (a reorg)");
    a.set("t", reply("4"), 1000);
    assert.deepEqual(b.get("t"), reply("4"));
    now += 1000;
    assert.equal(b.get("t"), undefined, "expired");
    assert.deepEqual(b.get("k"), reply("2"));
    a.clear();
    assert.equal(b.get("k"), undefined, "cleared on another thread (a network's definition changed)");
    // Evicted by others' writes: a small store, filled from one thread while the other keeps reading one key.
    const small = allocateSharedCache(64 * 1024, "first");
    const w = new SharedResponseCache(small, { mergeWaitMs: 1000 });
    const r = new SharedResponseCache(small, { mergeWaitMs: 1000 });
    w.set("old", reply("o"), undefined);
    assert.deepEqual(r.get("old"), reply("o"));
    for (let i = 0; i < 2000; i++) w.set(`n${i}`, reply("x".repeat(200)), undefined);
    assert.equal(r.get("old"), undefined, "evicted while not read");
  });

  it("admission second: the doorkeeper is shared, so a key's second answer is stored whichever thread has it", () => {
    const [a, b] = twoThreads();
    a.set("k", reply("1"), undefined);
    assert.equal(a.get("k"), undefined, "first answer: not stored");
    b.set("k", reply("2"), undefined);
    assert.deepEqual(a.get("k"), reply("2"));
  });

  it("errors and nulls are never stored", () => {
    const [a] = twoThreads("first");
    a.set("e", { tail: ',"error":{"code":-1}}', kind: ReplyKind.Error, category: "NodeError" }, undefined);
    a.set("n", { tail: ',"result":null}', kind: ReplyKind.NullResult, category: "Success" }, undefined);
    assert.equal(a.get("e"), undefined);
    assert.equal(a.get("n"), undefined);
  });

  it("a call in flight on one thread: the other waits for it and gets the stored answer, with no call of its own", async () => {
    const [a, b] = twoThreads();
    const lead = controlledLoad();
    const follow = controlledLoad();
    const pa = a.merge("k", lead.load);
    assert.equal(b.joining("k"), "", "merged, with no span of this thread's to link to");
    const pb = b.merge("k", follow.load);
    lead.settle({ ok: true, reply: reply("x") });
    const ra = await pa;
    // The caller stores the answer (forward.ts store) in the same turn: the follower reads it from there.
    a.set("k", (ra as { reply: Reply }).reply, undefined);
    assert.deepEqual(await pb, { ok: true, reply: reply("x") });
    assert.equal(follow.calls, 0);
    assert.equal(lead.calls, 1);
    // A call others waited for passed the doorkeeper although it was one answer.
    assert.deepEqual(b.get("k"), reply("x"));
    assert.equal(b.joining("k"), undefined);
  });

  it("an answer not kept (an error) releases the followers, who send their own call", async () => {
    const [a, b] = twoThreads();
    const lead = controlledLoad();
    const follow = controlledLoad();
    const pa = a.merge("k", lead.load);
    const pb = b.merge("k", follow.load);
    lead.settle({ ok: false, error: GatewayError.UpstreamTimeout });
    assert.equal((await pa).ok, false);
    // forward.ts does not store errors: the lead ends on the next turn, and the follower loads.
    await new Promise<void>((r) => {
      const check = () => (follow.calls === 1 ? r() : setImmediate(check));
      check();
    });
    follow.settle({ ok: true, reply: reply("own") });
    assert.deepEqual(await pb, { ok: true, reply: reply("own") });
  });

  it("a failed load releases the followers at once", async () => {
    const [a, b] = twoThreads();
    const lead = controlledLoad();
    const follow = controlledLoad();
    const pa = a.merge("k", lead.load);
    const pb = b.merge("k", follow.load);
    lead.fail(new Error("boom"));
    await assert.rejects(pa, /boom/);
    await new Promise<void>((r) => {
      const check = () => (follow.calls === 1 ? r() : setImmediate(check));
      check();
    });
    follow.settle({ ok: true, reply: reply("own") });
    assert.equal((await pb).ok, true);
  });

  it("a follower stops waiting after mergeWaitMs (a leader stuck or gone) and sends its own call", async () => {
    const [a, b] = twoThreads("second", 20);
    const lead = controlledLoad();
    const follow = controlledLoad();
    void a.merge("k", lead.load);
    const pb = b.merge("k", follow.load);
    await new Promise<void>((r) => {
      const check = () => (follow.calls === 1 ? r() : setTimeout(check, 5));
      check();
    });
    follow.settle({ ok: true, reply: reply("own") });
    assert.equal((await pb).ok, true);
    lead.settle({ ok: true, reply: reply("late") });
  });

  it("worker threads asking for one key at once: one load in the process, every thread gets the answer", async () => {
    const memory: SharedCacheMemory = allocateSharedCache(1 << 20, "second");
    const counter = new SharedArrayBuffer(8);
    const threads = 4;
    const source = `
      const { parentPort, workerData } = require("node:worker_threads");
      const { memory, counter, module, threads } = workerData;
      const { SharedResponseCache } = require(module);
      const cache = new SharedResponseCache(memory, { mergeWaitMs: 60000 });
      const c = new Int32Array(counter);
      // A serving thread's loop is kept alive by its server (a pending Atomics.waitAsync does not): a timer stands in.
      const alive = setInterval(() => {}, 1000);
      Atomics.add(c, 1, 1);
      while (Atomics.load(c, 1) < threads) {}
      const key = "eth\\u0000p\\u0000eth_getBlockByHash\\u0000[\\"0xab\\",false]";
      const hit = cache.get(key);
      if (hit !== undefined) { clearInterval(alive); parentPort.postMessage({ via: "hit", tail: hit.tail }); }
      else cache.merge(key, () => {
        Atomics.add(c, 0, 1);
        // Held while the other threads ask (they wait for it, or find it stored once it is).
        return new Promise((r) => setTimeout(() => r({ ok: true, reply: { tail: ',"result":"B"}', kind: 0, category: "Success" } }), 300));
      }).then((r) => {
        cache.set(key, r.reply, undefined);
        clearInterval(alive);
        parentPort.postMessage({ via: "merge", tail: r.reply.tail });
      });
    `;
    const module = require.resolve("../../../../data-plane/src/cache/shared-response-cache");
    const results = await Promise.all(
      Array.from(
        { length: threads },
        () =>
          new Promise<{ via: string; tail: string }>((resolve, reject) => {
            const w = new Worker(source, { eval: true, workerData: { memory, counter, module, threads } });
            w.once("message", (m) => {
              resolve(m);
              void w.terminate();
            });
            w.once("error", reject);
            w.once("exit", (code) => reject(new Error(`worker ended (${code}) without an answer`)));
          }),
      ),
    );
    assert.equal(Atomics.load(new Int32Array(counter), 0), 1, "loads in the process");
    for (const r of results) assert.equal(r.tail, ',"result":"B"}');
  });
});
