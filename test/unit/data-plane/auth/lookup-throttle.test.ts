import assert from "node:assert/strict";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { CachingKeyVerifier } from "../../../../data-plane/src/auth/key-verifier";
import { KeyLookupThrottle } from "../../../../data-plane/src/auth/lookup-throttle";
import type { PlaneState } from "../../../../data-plane/src/state/redis-state";
import { generateApiKey, hashApiKey } from "../../../../shared/src/crypto/api-key";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { createLogger } from "../../../../shared/src/log/logger";
import type { KeyRecord } from "../../../../shared/src/redis/records";

const record: KeyRecord = {
  kind: "app",
  workspaceId: "w1",
  appId: "app-w1",
  nodeId: null,
  plan: { name: "free", requestsPerSecond: 25, dailyRequestLimit: 500_000, monthlyRequestLimit: null },
  allowlist: { origins: [], ips: [] },
  expiresAtMs: null,
  rpcMethods: null,
};

/** Counts reads, as Redis would see them (PlaneState.getKey only). */
class FakeState {
  readonly records = new Map<string, KeyRecord>();
  reads = 0;
  async getKey(hash: string): Promise<KeyRecord | null> {
    this.reads++;
    return this.records.get(hash) ?? null;
  }
}

describe("data-plane: KeyLookupThrottle", () => {
  it("blocks an address past maxFailures in its window, until the window ends; others are not blocked", () => {
    let now = 1_000_000;
    const t = new KeyLookupThrottle(KeyLookupThrottle.allocate(), {
      maxFailures: 3,
      windowMs: 10_000,
      now: () => now,
    });
    for (let i = 0; i < 3; i++) {
      assert.equal(t.blockedForMs("203.0.113.7"), 0);
      t.failed("203.0.113.7");
    }
    now += 2_500;
    assert.equal(t.blockedForMs("203.0.113.7"), 7_500, "until the end of the window");
    assert.equal(t.blockedForMs("203.0.113.8"), 0);
    assert.equal(t.blockedForMs("2001:db8:1:2::/64"), 0);
    now += 7_500;
    assert.equal(t.blockedForMs("203.0.113.7"), 0, "a new window starts from zero");
    t.failed("203.0.113.7");
    assert.equal(t.blockedForMs("203.0.113.7"), 0);
  });

  it("maxFailures 0 is off", () => {
    const t = new KeyLookupThrottle(KeyLookupThrottle.allocate(), { maxFailures: 0, windowMs: 1_000 });
    for (let i = 0; i < 100; i++) t.failed("a");
    assert.equal(t.blockedForMs("a"), 0);
  });

  it("holds across threads: failures counted by another thread's view of the table block here", async () => {
    const shared = KeyLookupThrottle.allocate();
    const windowMs = 3_600_000;
    const mod = join(__dirname, "../../../../data-plane/src/auth/lookup-throttle.js");
    // Another thread (a worker_thread, as DATA_PLANE_THREADS > 1 runs them) counts 50 failures of one address
    // at once with this thread's 50 of another and both of one third address.
    const code = `
      const { workerData, parentPort } = require("node:worker_threads");
      const { KeyLookupThrottle } = require(${JSON.stringify(mod)});
      const t = new KeyLookupThrottle(workerData.shared, { maxFailures: 100, windowMs: ${windowMs} });
      for (let i = 0; i < 50; i++) { t.failed("198.51.100.1"); t.failed("198.51.100.3"); }
      parentPort.postMessage("done");`;
    const here = new KeyLookupThrottle(shared, { maxFailures: 100, windowMs });
    const worker = new Worker(code, { eval: true, workerData: { shared } });
    for (let i = 0; i < 50; i++) {
      here.failed("198.51.100.2");
      here.failed("198.51.100.3");
    }
    await new Promise((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    });
    await worker.terminate();
    assert.equal(here.blockedForMs("198.51.100.1"), 0, "50 of 100");
    assert.equal(here.blockedForMs("198.51.100.2"), 0);
    assert.ok(here.blockedForMs("198.51.100.3") > 0, "50 + 50 from two threads reach 100");
  });

  it("in the verifier: past the limit an uncached key is refused without a Redis read; cached keys still pass", async () => {
    const state = new FakeState();
    const good = generateApiKey();
    state.records.set(hashApiKey(good), record);
    let now = 5_000_000;
    const verifier = new CachingKeyVerifier({
      state: state as unknown as PlaneState,
      ttlMs: 60_000,
      negativeTtlMs: 60_000,
      maxEntries: 100,
      logger: createLogger("test", "silent"),
      throttle: new KeyLookupThrottle(KeyLookupThrottle.allocate(), {
        maxFailures: 5,
        windowMs: 60_000,
        now: () => now,
      }),
    });
    const client = () => "192.0.2.1";
    assert.ok((await verifier.verify(good, Date.now(), client)).ok, "cached from now on");
    for (let i = 0; i < 5; i++) {
      const r = await verifier.verify(generateApiKey(), Date.now(), client);
      assert.equal(!r.ok && r.error, GatewayError.UnknownKey);
    }
    assert.equal(state.reads, 6);
    for (let i = 0; i < 1_000; i++) {
      const r = await verifier.verify(generateApiKey(), Date.now(), client);
      assert.equal(!r.ok && r.error, GatewayError.KeyLookupThrottled);
      assert.ok(!r.ok && r.retryAfterMs! > 0 && r.retryAfterMs! <= 60_000);
    }
    assert.equal(state.reads, 6, "no Redis read while throttled");
    assert.ok((await verifier.verify(good, Date.now(), client)).ok, "a cached key is served");
    const other = await verifier.verify(generateApiKey(), Date.now(), () => "192.0.2.2");
    assert.equal(!other.ok && other.error, GatewayError.UnknownKey, "another address is looked up");
    now += 60_000;
    const later = await verifier.verify(generateApiKey(), Date.now(), client);
    assert.equal(!later.ok && later.error, GatewayError.UnknownKey, "the next window looks up again");
  });
});
