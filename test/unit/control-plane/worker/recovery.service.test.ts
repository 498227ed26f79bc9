import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import { RedisRecoveryService } from "../../../../control-plane/src/worker/recovery.service";
import { createLogger } from "../../../../shared/src/log/logger";
import { RedisNames } from "../../../../shared/src/redis/keys";

/** A command connection whose marker is absent (Redis restarted empty) or present. */
class FakeRedis extends EventEmitter {
  marker = 0;
  async exists(): Promise<number> {
    return this.marker;
  }
}

describe("control-plane: RedisRecoveryService", () => {
  it("re-publishes before recreating the worker's own structures (serving does not wait for them), once per loss", async () => {
    const redis = new FakeRedis();
    const steps: string[] = [];
    const recovery = new RedisRecoveryService({
      redis: redis as unknown as Redis,
      names: new RedisNames("t:"),
      log: createLogger("test", "silent"),
      intervalMs: 60_000,
      async republish() {
        steps.push("republish");
        redis.marker = 1;
      },
      async recreate() {
        steps.push("recreate");
      },
    });
    recovery.start();
    try {
      redis.emit("ready");
      await recovery.check();
      assert.deepEqual(steps, ["republish", "recreate"]);
      assert.equal(recovery.recoveries, 1);
      redis.emit("ready"); // the marker is back: nothing to do
      await recovery.check();
      assert.deepEqual(steps, ["republish", "recreate"]);
    } finally {
      await recovery.stop();
    }
  });
});
