import assert from "node:assert/strict";
import { Doorkeeper, fingerprint } from "../../../../data-plane/src/cache/doorkeeper";
import { LruResponseCache } from "../../../../data-plane/src/cache/response-cache";
import { type CallResult, type Reply, ReplyKind } from "../../../../data-plane/src/upstream/reply";

const reply = (result: string): Reply => ({
  tail: `,"result":"${result}"}`,
  kind: ReplyKind.Result,
  category: "Success",
});

describe("data-plane: response cache", () => {
  describe("Doorkeeper", () => {
    it("answers false the first time a key is seen and true after", () => {
      const d = new Doorkeeper(1024);
      assert.equal(d.seen("eth\u0000p\u0000eth_chainId\u0000[]"), false);
      assert.equal(d.seen("eth\u0000p\u0000eth_chainId\u0000[]"), true);
      assert.equal(d.seen("eth\u0000p\u0000net_version\u0000[]"), false);
      d.clear();
      assert.equal(d.seen("eth\u0000p\u0000eth_chainId\u0000[]"), false);
    });

    it("forgets a key once later keys overwrite its slot (bounded memory)", () => {
      const d = new Doorkeeper(16);
      d.seen("old");
      for (let i = 0; i < 10_000; i++) d.seen(`k${i}`);
      assert.equal(d.seen("old"), false);
    });

    it("keys cycled in turn are all admitted, even those whose first slot another key shares", () => {
      // The default table; an indexer re-reading 3,000 (then 20,000) old blocks' answers in a cycle.
      for (const [n, maxUnseenOnSecond, maxUnseenOnFourth] of [
        [3000, 0, 0],
        [20_000, 100, 5],
      ] as const) {
        const d = new Doorkeeper(1 << 18);
        const keys = Array.from(
          { length: n },
          (_, i) => `eth\u0000f\u0000eth_getBlockByNumber\u0000["0x${i.toString(16)}",false]`,
        );
        const unseen: number[] = [];
        for (let pass = 0; pass < 4; pass++) {
          let u = 0;
          for (const k of keys) if (!d.seen(k)) u++;
          unseen.push(u);
        }
        assert.equal(unseen[0], n);
        assert.ok(unseen[1]! <= maxUnseenOnSecond, `${n} keys: ${unseen}`);
        assert.ok(unseen[3]! <= maxUnseenOnFourth, `${n} keys: ${unseen}`);
      }
    });

    it("fingerprints are never 0; distinct keys are new even when they share a slot", () => {
      const d = new Doorkeeper(1 << 12);
      let firstTime = 0;
      for (let i = 0; i < 1000; i++) {
        assert.notEqual(fingerprint(`key-${i}`), 0);
        if (!d.seen(`key-${i}`)) firstTime++;
      }
      // Keys sharing a slot are still told apart: the slot holds the whole 32-bit fingerprint.
      assert.equal(firstTime, 1000);
    });
  });

  describe("LruResponseCache", () => {
    it("admission second: stores an answer on its key's second set, not the first", () => {
      const c = new LruResponseCache(1 << 20);
      c.set("a", reply("1"), undefined);
      assert.equal(c.get("a"), undefined);
      c.set("a", reply("2"), undefined);
      assert.equal(c.get("a")?.tail, ',"result":"2"}');
      // A stored key is replaced at once.
      c.set("a", reply("3"), undefined);
      assert.equal(c.get("a")?.tail, ',"result":"3"}');
    });

    it("admission first: stores every answer at once", () => {
      const c = new LruResponseCache(1 << 20, "first");
      c.set("a", reply("1"), undefined);
      assert.equal(c.get("a")?.tail, ',"result":"1"}');
    });

    it("per-block entries expire after their TTL", async () => {
      const c = new LruResponseCache(1 << 20, "first");
      c.set("b", reply("1"), 20);
      assert.ok(c.get("b"));
      await new Promise((r) => setTimeout(r, 40));
      assert.equal(c.get("b"), undefined);
    });

    it("stays within its byte bound, evicting the least recently used", () => {
      const c = new LruResponseCache(64 * 1024, "first");
      const big = "x".repeat(1000);
      for (let i = 0; i < 500; i++) c.set(`k${i}`, reply(big), undefined);
      assert.ok(c.sizeBytes <= 64 * 1024, `${c.sizeBytes} bytes`);
      assert.equal(c.get("k0"), undefined);
      assert.ok(c.get("k499"));
    });

    it("dropTimed drops matching live entries set with a TTL, never those without", () => {
      const c = new LruResponseCache(1 << 20, "first");
      c.set("t1", reply("1"), 60_000);
      c.set("t2", reply("2"), 60_000);
      c.set("t1", reply("1b"), 60_000); // queued twice
      c.set("p1", reply("3"), undefined);
      assert.equal(
        c.dropTimed((k) => k.endsWith("1")),
        1,
      );
      assert.equal(c.get("t1"), undefined);
      assert.ok(c.get("t2"));
      assert.ok(c.get("p1"), "an entry without a TTL is not in the timed queue");
      assert.equal(
        c.dropTimed(() => true),
        1,
      );
      assert.equal(c.get("t2"), undefined);
    });

    it("merges identical in-flight loads into one", async () => {
      const c = new LruResponseCache(1 << 20);
      let loads = 0;
      const load = async (): Promise<CallResult> => {
        loads++;
        await new Promise((r) => setTimeout(r, 10));
        return { ok: true, reply: reply("m") };
      };
      const rs = await Promise.all([c.merge("m", load), c.merge("m", load), c.merge("m", load)]);
      assert.equal(loads, 1);
      for (const r of rs) assert.ok(r.ok);
      await c.merge("m", load);
      assert.equal(loads, 2);
    });

    it("joining: whether a call is in flight, and the traceparent a sampled one was merged with", async () => {
      const c = new LruResponseCache(1 << 20);
      let release: () => void = () => {};
      const load = (): Promise<CallResult> =>
        new Promise((r) => {
          release = () => r({ ok: true, reply: reply("m") });
        });
      assert.equal(c.joining("m"), undefined, "nothing in flight: the call leads");
      const unsampled = c.merge("m", load);
      assert.equal(c.joining("m"), "", "an unsampled call in flight");
      release();
      await unsampled;
      assert.equal(c.joining("m"), undefined);
      const tp = `00-${"a".repeat(32)}-${"b".repeat(16)}-01`;
      const sampled = c.merge("m", load, tp);
      assert.equal(c.joining("m"), tp);
      release();
      await sampled;
      assert.equal(c.joining("m"), undefined, "forgotten once settled");
    });
  });
});
