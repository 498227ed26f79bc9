import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { CachingKeyVerifier, type VerifyResult } from "../../../../data-plane/src/auth/key-verifier";
import type { PlaneState } from "../../../../data-plane/src/state/redis-state";
import { generateApiKey, hashApiKey } from "../../../../shared/src/crypto/api-key";
import { createLogger } from "../../../../shared/src/log/logger";
import type { KeyRecord } from "../../../../shared/src/redis/records";

const record = (workspaceId: string, expiresAtMs: number | null = null): KeyRecord => ({
  kind: "app",
  workspaceId,
  appId: `app-${workspaceId}`,
  nodeId: null,
  plan: { name: "free", requestsPerSecond: 25, dailyRequestLimit: 500_000, monthlyRequestLimit: null },
  allowlist: { origins: [], ips: [] },
  expiresAtMs,
  rpcMethods: null,
});

/** A key store in memory that counts reads, standing in for Redis (PlaneState.getKey only). */
class FakeState {
  readonly records = new Map<string, KeyRecord>();
  reads = 0;
  failing = false;

  async getKey(hash: string): Promise<KeyRecord | null> {
    this.reads++;
    if (this.failing) throw new Error("store down");
    return this.records.get(hash) ?? null;
  }

  add(rec: KeyRecord): string {
    const key = generateApiKey();
    this.records.set(hashApiKey(key), rec);
    return key;
  }
}

function setup(maxEntries = 100) {
  const state = new FakeState();
  const verifier = new CachingKeyVerifier({
    state: state as unknown as PlaneState,
    ttlMs: 60_000,
    negativeTtlMs: 60_000,
    maxEntries,
    logger: createLogger("test", "silent"),
  });
  return { state, verifier };
}

async function verify(v: CachingKeyVerifier, key: string, nowMs = Date.now()): Promise<VerifyResult> {
  return v.verify(key, nowMs);
}

describe("data-plane: CachingKeyVerifier", () => {
  it("refuses a prefixed key with a wrong checksum without reading the store; legacy keys are read", async () => {
    const { state, verifier } = setup();
    const good = state.add(record("w1"));
    const bad = good.slice(0, -1) + (good.endsWith("A") ? "B" : "A");
    const r = verifier.verify(bad, Date.now());
    assert.ok(!(r instanceof Promise), "answered synchronously");
    assert.equal((r as VerifyResult).ok, false);
    assert.equal(state.reads, 0);
    assert.ok((await verify(verifier, good)).ok);
    assert.equal(state.reads, 1);
    const legacy = randomBytes(32).toString("base64url");
    state.records.set(hashApiKey(legacy), record("w2"));
    assert.ok((await verify(verifier, legacy)).ok, "a legacy key still works");
    assert.equal(state.reads, 2);
  });

  describe("revalidate (after a lost Redis connection)", () => {
    it("reads every cached key again: a key revoked meanwhile is refused, a live one served", async () => {
      const { state, verifier } = setup();
      const live = state.add(record("w1"));
      const revoked = state.add(record("w1"));
      assert.ok((await verify(verifier, live)).ok);
      assert.ok((await verify(verifier, revoked)).ok);
      state.records.delete(hashApiKey(revoked)); // its key.revoke was published while we were away
      verifier.revalidate();
      const reads = state.reads;
      assert.ok((await verify(verifier, live)).ok);
      const r = await verify(verifier, revoked);
      assert.ok(!r.ok && r.error.reason === "unknown_key", r.ok ? "served" : r.error.reason);
      assert.equal(state.reads, reads + 2, "both read again");
    });

    it("a key whose record cannot be read yet is served as cached; after clear() it is a 500", async () => {
      const { state, verifier } = setup();
      const key = state.add(record("w1"));
      assert.ok((await verify(verifier, key)).ok);
      verifier.revalidate();
      state.failing = true;
      const reads = state.reads;
      const r = await verify(verifier, key);
      assert.ok(r.ok, r.ok ? "" : r.error.reason);
      assert.equal(r.key.record.workspaceId, "w1");
      assert.equal(state.reads, reads + 1, "it was tried");
      assert.ok((await verify(verifier, key)).ok, "and is tried again on the next use");
      assert.equal(state.reads, reads + 2);
      state.failing = false;
      assert.ok((await verify(verifier, key)).ok);
      state.failing = true;
      verifier.clear();
      const hard = await verify(verifier, key);
      assert.ok(!hard.ok && hard.error.reason === "internal", hard.ok ? "served" : hard.error.reason);
    });

    it("what was kept goes once read, by an invalidation, or when its cache entry would have lapsed", async () => {
      const { state, verifier } = setup();
      const a = state.add(record("w1"));
      const b = state.add(record("w2"));
      assert.ok((await verify(verifier, a)).ok);
      assert.ok((await verify(verifier, b)).ok);
      verifier.revalidate();
      verifier.onEvent({ type: "key.revoke", keyHash: hashApiKey(a) });
      verifier.onEvent({ type: "workspace.update", workspaceId: "w2" });
      state.failing = true;
      const ra = await verify(verifier, a);
      const rb = await verify(verifier, b);
      assert.ok(!ra.ok && ra.error.reason === "internal", "revoked while kept: not served");
      assert.ok(!rb.ok && rb.error.reason === "internal", "its workspace changed: not served");
      // A kept entry past its cache lifetime is not served either.
      state.failing = false;
      const c = state.add(record("w3"));
      const clock = { ms: Date.now(), now: () => clock.ms };
      /** A verifier whose entry for `c` was kept by `revalidate` `afterMs` ago, with Redis unreadable. */
      const keptFor = async (afterMs: number) => {
        state.failing = false;
        const v = new CachingKeyVerifier({
          state: state as unknown as PlaneState,
          ttlMs: 1_000,
          negativeTtlMs: 0,
          maxEntries: 10,
          logger: createLogger("test", "silent"),
          clock,
        });
        assert.ok((await verify(v, c)).ok);
        v.revalidate();
        state.failing = true;
        clock.ms += afterMs;
        return v;
      };
      // In the last millisecond of its lifetime, a kept entry is served...
      assert.ok((await verify(await keptFor(999), c)).ok, "within its lifetime");
      // ...at its end, it is not.
      const late = await verify(await keptFor(1_000), c);
      assert.ok(!late.ok && late.error.reason === "internal", late.ok ? "served" : late.error.reason);
    });
  });

  it("loads a key once, then answers synchronously from the cache by the presented key", async () => {
    const { state, verifier } = setup();
    const key = state.add(record("w1"));
    const first = verifier.verify(key, Date.now());
    assert.ok(first instanceof Promise, "a miss goes to the store");
    const r = await first;
    assert.ok(r.ok);
    assert.equal(r.key.hash, hashApiKey(key));
    assert.equal(r.key.record.workspaceId, "w1");
    const second = verifier.verify(key, Date.now());
    assert.ok(!(second instanceof Promise), "a hit is synchronous");
    assert.ok(second.ok);
    assert.equal(second.key, r.key);
    assert.equal(state.reads, 1);
  });

  it("concurrent misses for one key share one store read", async () => {
    const { state, verifier } = setup();
    const key = state.add(record("w1"));
    const results = await Promise.all([verify(verifier, key), verify(verifier, key), verify(verifier, key)]);
    assert.ok(results.every((r) => r.ok));
    assert.equal(state.reads, 1);
  });

  it("unknown keys are answered from the negative cache until key.upsert names their hash", async () => {
    const { state, verifier } = setup();
    const key = generateApiKey();
    assert.equal((await verify(verifier, key)).ok, false);
    assert.equal((await verify(verifier, key)).ok, false);
    assert.equal(state.reads, 1);
    state.records.set(hashApiKey(key), record("w1"));
    verifier.onEvent({ type: "key.upsert", keyHash: hashApiKey(key) });
    assert.equal((await verify(verifier, key)).ok, true);
    assert.equal(state.reads, 2);
  });

  it("key.revoke by hash drops the entry cached under the presented key", async () => {
    const { state, verifier } = setup();
    const key = state.add(record("w1"));
    assert.equal((await verify(verifier, key)).ok, true);
    state.records.delete(hashApiKey(key));
    verifier.onEvent({ type: "key.revoke", keyHash: hashApiKey(key) });
    assert.equal(verifier.size, 0);
    assert.equal((await verify(verifier, key)).ok, false);
  });

  it("a request after key.revoke does not join a store read that started before it", async () => {
    const { state, verifier } = setup();
    const key = state.add(record("w1"));
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const realGet = state.getKey.bind(state);
    state.getKey = async (hash: string) => {
      const rec = await realGet(hash); // read before the revoke lands
      await gate;
      return rec;
    };
    const before = verify(verifier, key);
    await new Promise((r) => setImmediate(r)); // the first read has fetched the old record
    state.records.delete(hashApiKey(key));
    verifier.onEvent({ type: "key.revoke", keyHash: hashApiKey(key) });
    const after = verify(verifier, key);
    release();
    assert.equal((await before).ok, true, "asked before the revoke: the old answer");
    assert.equal((await after).ok, false, "asked after the revoke: a fresh read");
    assert.equal(state.reads, 2);
    assert.equal(verifier.size, 0, "the stale read did not fill the cache");
  });

  it("the front never holds more keys than KEY_CACHE_MAX_ENTRIES", async () => {
    const { state, verifier } = setup(3);
    const keys = Array.from({ length: 5 }, () => state.add(record("w1")));
    for (const k of keys) assert.equal((await verify(verifier, k)).ok, true);
    // The first two left both the LRU (3 entries) and the front (3 entries): a store read each.
    const reads = state.reads;
    assert.ok(verifier.verify(keys[0]!, Date.now()) instanceof Promise);
    assert.ok(verifier.verify(keys[1]!, Date.now()) instanceof Promise);
    assert.ok(!(verifier.verify(keys[4]!, Date.now()) instanceof Promise));
    await Promise.resolve();
    assert.ok(state.reads >= reads + 2);
  });

  it("workspace.update drops that workspace's keys only; resync drops all", async () => {
    const { state, verifier } = setup();
    const a = state.add(record("w1"));
    const b = state.add(record("w2"));
    for (const k of [a, b]) assert.equal((await verify(verifier, k)).ok, true);
    verifier.onEvent({ type: "workspace.update", workspaceId: "w1" });
    assert.ok(verifier.verify(a, Date.now()) instanceof Promise);
    assert.ok(!(verifier.verify(b, Date.now()) instanceof Promise));
    verifier.onEvent({ type: "resync" });
    assert.ok(verifier.verify(b, Date.now()) instanceof Promise);
  });

  it("a key past its own expiry is refused even while cached", async () => {
    const { state, verifier } = setup();
    const key = state.add(record("w1", 1_000_000));
    assert.equal((await verify(verifier, key, 999_999)).ok, true);
    const r = verifier.verify(key, 1_000_000);
    assert.ok(!(r instanceof Promise));
    assert.equal(r.ok, false);
  });

  it("a store failure is an internal error and is not cached", async () => {
    const { state, verifier } = setup();
    const key = state.add(record("w1"));
    state.failing = true;
    const r = await verify(verifier, key);
    assert.ok(!r.ok);
    assert.equal(r.error.httpStatus, 500);
    state.failing = false;
    assert.equal((await verify(verifier, key)).ok, true);
  });
});
