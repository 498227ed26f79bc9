import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import { RedisRecoveryService } from "../../../../control-plane/src/worker/recovery.service";
import { createLogger } from "../../../../shared/src/log/logger";
import { RedisNames } from "../../../../shared/src/redis/keys";

const names = new RedisNames("t:");

/** A command connection holding the two markers: emptied as Redis restarted without its data. */
class FakeRedis extends EventEmitter {
  keys = new Set<string>();
  async exists(key: string): Promise<number> {
    return this.keys.has(key) ? 1 : 0;
  }
  async set(key: string): Promise<"OK"> {
    this.keys.add(key);
    return "OK";
  }
}

function setup() {
  const redis = new FakeRedis();
  redis.keys.add(names.publishedAt());
  const steps: string[] = [];
  const recovery = new RedisRecoveryService({
    redis: redis as unknown as Redis,
    names,
    log: createLogger("test", "silent"),
    intervalMs: 60_000,
    async republish() {
      steps.push("republish");
      redis.keys.add(names.publishedAt());
    },
    async recreate() {
      steps.push("recreate");
    },
  });
  return { redis, steps, recovery };
}

describe("control-plane: RedisRecoveryService", () => {
  it("starting marks the worker's structures present: no repair and no recovery counted while nothing is lost", async () => {
    const { redis, steps, recovery } = setup();
    recovery.start();
    try {
      await recovery.check();
      assert.ok(redis.keys.has(names.workerReady()));
      assert.deepEqual(steps, []);
      assert.equal(recovery.recoveries, 0);
    } finally {
      await recovery.stop();
    }
  });

  it("re-publishes before recreating the worker's own structures (serving does not wait for them), once per loss", async () => {
    const { redis, steps, recovery } = setup();
    recovery.start();
    try {
      await recovery.check();
      redis.keys.clear(); // restarted empty
      redis.emit("ready");
      await recovery.check();
      assert.deepEqual(steps, ["republish", "recreate"]);
      assert.equal(recovery.recoveries, 1);
      assert.ok(redis.keys.has(names.workerReady()), "its own marker written after the repair");
      redis.emit("ready"); // both markers back: nothing to do
      await recovery.check();
      assert.deepEqual(steps, ["republish", "recreate"]);
      assert.equal(recovery.recoveries, 1);
    } finally {
      await recovery.stop();
    }
  });

  it("when the control plane restored the publication marker first, still recreates its own structures (without re-publishing)", async () => {
    const { redis, steps, recovery } = setup();
    recovery.start();
    try {
      await recovery.check();
      redis.keys.clear();
      redis.keys.add(names.publishedAt()); // the control plane's reconnect repair won the race
      await recovery.check();
      assert.deepEqual(steps, ["recreate"]);
      assert.equal(recovery.recoveries, 1);
    } finally {
      await recovery.stop();
    }
  });

  it("a failed recreate leaves the worker's marker absent, so the next check tries again", async () => {
    const { redis, recovery } = setup();
    let fail = true;
    const calls: string[] = [];
    const r2 = new RedisRecoveryService({
      redis: redis as unknown as Redis,
      names,
      log: createLogger("test", "silent"),
      intervalMs: 60_000,
      async republish() {},
      async recreate() {
        calls.push("recreate");
        if (fail) throw new Error("redis went away again");
      },
    });
    await recovery.stop();
    redis.keys.add(names.publishedAt());
    await r2.check();
    assert.equal(r2.recoveries, 0);
    assert.ok(!redis.keys.has(names.workerReady()));
    fail = false;
    await r2.check();
    assert.equal(r2.recoveries, 1);
    assert.ok(redis.keys.has(names.workerReady()));
    assert.deepEqual(calls, ["recreate", "recreate"]);
    await r2.stop();
  });
});
