import { randomBytes } from "node:crypto";
import type { Logger } from "../../../shared/src/log/logger";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import type { HealthRecord } from "../../../shared/src/redis/records";

export interface HealthPublisherOptions {
  redis: RedisClient;
  names: RedisNames;
  logger: Logger;
  /** HEALTH_PUBLISH_INTERVAL_MS; the record's TTL is 3 intervals (survives one missed write). */
  intervalMs: number;
  /** What to publish (UpstreamRegistry.healthSnapshot). */
  snapshot: () => HealthRecord["networks"];
  /** Defaults to 6 random bytes in hex, like the rate limiter's. */
  instanceId?: string;
}

/**
 * Publishes this instance's view of its upstream pools to Redis for the operator console: a per-instance
 * record with a TTL plus a field in the instances hash. Off the hot path (a timer); a failed write is
 * logged and retried at the next tick, never thrown.
 */
export class HealthPublisher {
  readonly instanceId: string;
  private timer: NodeJS.Timeout | undefined;
  private writing = false;

  constructor(private readonly opts: HealthPublisherOptions) {
    this.instanceId = opts.instanceId ?? randomBytes(6).toString("hex");
  }

  start(): void {
    if (this.timer) return;
    void this.publish();
    this.timer = setInterval(() => void this.publish(), this.opts.intervalMs);
    this.timer.unref();
  }

  /** One write now; resolves when it is done (or failed and was logged). */
  async publish(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    try {
      const atMs = Date.now();
      const record: HealthRecord = { instanceId: this.instanceId, atMs, networks: this.opts.snapshot() };
      const { redis, names, intervalMs } = this.opts;
      await redis.set(names.upstreamHealth(this.instanceId), JSON.stringify(record), "PX", intervalMs * 3);
      await redis.hset(names.upstreamHealthInstances(), this.instanceId, String(atMs));
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, "could not publish upstream health");
    } finally {
      this.writing = false;
    }
  }

  /** Stops publishing and removes this instance's record (readers would drop it at its TTL anyway). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    const { redis, names } = this.opts;
    await Promise.all([
      redis.del(names.upstreamHealth(this.instanceId)),
      redis.hdel(names.upstreamHealthInstances(), this.instanceId),
    ]).catch(() => undefined);
  }
}
