import { UsageIngestor, UsageIngestorOptions } from "../../../../control-plane/src/usage/usage.ingestor";
import { RedisUsageRecorder } from "../../../../data-plane/src/usage";
import { createLogger } from "../../../../shared/src/log/logger";
import { Harness } from "../harness";

/** A data-plane recorder writing to the harness's Redis namespace (single or cluster), with a settable clock. */
export function recorderFor(h: Harness, instanceId = "dp-test") {
  const redis = h.ns.redis.client("dp-commands");
  const clock = { now: Date.now() };
  const rec = new RedisUsageRecorder({
    redis,
    names: h.names,
    instanceId,
    now: () => clock.now,
    config: { maxRowsPerEntry: 50 },
  });
  return {
    rec,
    clock,
    redis,
    async close() {
      await rec.close();
      redis.disconnect();
    },
  };
}

const silent = createLogger("usage-test", "silent");

/** An ingestor on the harness's database with its own Redis connection. */
export function ingestorFor(h: Harness, opts: Partial<UsageIngestorOptions> = {}) {
  const redis = h.ns.redis.client("blocking");
  const ing = new UsageIngestor(h.cp.dataSource, redis, h.names, silent, {
    consumerName: "c1",
    blockMs: 0,
    batch: 10,
    claimIdleMs: 60_000,
    ...opts,
  });
  return {
    ing,
    redis,
    /** Polls until a round handles nothing. */
    async drain(): Promise<number> {
      await ing.consumer.ensureGroup();
      let total = 0;
      for (;;) {
        const n = await ing.consumer.pollOnce(0);
        total += n;
        if (n === 0) return total;
      }
    },
    close() {
      redis.disconnect();
    },
  };
}
