import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export interface TestRedisNamespace {
  prefix: string;
  /** Deletes every key under the prefix (BullMQ keys included when BullMQ uses the same prefix). */
  cleanup(): Promise<void>;
}

/** A key prefix unique to this test run, so runs sharing the machine's Redis never see each other. */
export function createTestRedisNamespace(): TestRedisNamespace {
  const prefix = `rgtest:${Date.now().toString(36)}${randomBytes(3).toString("hex")}:`;
  return {
    prefix,
    async cleanup() {
      const r = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
      await r.connect();
      try {
        let cursor = "0";
        do {
          const [next, keys] = await r.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
          cursor = next;
          if (keys.length > 0) await r.del(...keys);
        } while (cursor !== "0");
      } finally {
        r.disconnect();
      }
    },
  };
}
