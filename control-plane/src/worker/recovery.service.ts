import type { Logger } from "../../../shared/src/log/logger";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";

export interface RedisRecoveryDeps {
  /** The worker's command connection (maxRetriesPerRequest bounded: a check fails fast while Redis is down). */
  redis: RedisClient;
  names: RedisNames;
  log: Logger;
  intervalMs: number;
  /** Re-publishes everything from Postgres; writes the marker last. */
  republish(): Promise<unknown>;
  /** Recreates what the worker itself keeps in Redis: consumer group, repeatable jobs. Idempotent. */
  recreate(): Promise<void>;
}

/**
 * Notices that Redis lost its data (restarted empty, or a failover to an empty replica) and repairs it
 * without a hand: every `intervalMs` and on each reconnect it checks the publication marker
 * (`RedisNames.publishedAt`, written by every full re-publish). When the marker is gone it re-publishes at
 * once (data planes, which kept their last known good state meanwhile, reload on the `resync` that
 * follows), then recreates the usage consumer group and the BullMQ job schedulers.
 *
 * Why the worker: it already owns the periodic re-publish, the consumer group and the schedulers, and it
 * runs as one process; the control plane's own failed publications are retried by PublicationService.
 */
export class RedisRecoveryService {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** Recoveries done (tests and diagnostics). */
  recoveries = 0;
  private readonly onReady = () => void this.check();

  constructor(private readonly deps: RedisRecoveryDeps) {}

  start(): void {
    this.deps.redis.on("ready", this.onReady);
    this.timer = setInterval(() => void this.check(), this.deps.intervalMs);
    this.timer.unref();
  }

  /** One check (and repair when needed); concurrent calls share the run in progress. */
  check(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.running ??= this.checkOnce().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async checkOnce(): Promise<void> {
    let present: boolean;
    try {
      present = (await this.deps.redis.exists(this.deps.names.publishedAt())) === 1;
    } catch {
      return; // Redis unreachable: the next tick or the reconnect checks again
    }
    if (present || this.stopped) return;
    const t0 = Date.now();
    this.deps.log.warn("redis holds no publication marker (restarted empty?): re-publishing and recreating");
    try {
      // Serving first: data planes wait for this re-publish (keys changed while Redis was away keep their
      // old cached state until it lands). The consumer group is created at the start of the stream, so the
      // usage flushed meanwhile is read in full whenever it comes back.
      await this.deps.republish();
      await this.deps.recreate();
      this.recoveries++;
      this.deps.log.info({ ms: Date.now() - t0 }, "redis repaired after losing its data");
    } catch (err) {
      this.deps.log.error({ err: (err as Error).message }, "redis repair failed; retrying at the next check");
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.deps.redis.off("ready", this.onReady);
    await this.running;
  }
}
