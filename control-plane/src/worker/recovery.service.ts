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
 * without a hand: every `intervalMs` and on each reconnect it checks two markers, the publication marker
 * (`RedisNames.publishedAt`, written by every full re-publish) and the worker's own
 * (`RedisNames.workerReady`, written once its consumer groups and schedulers exist). When the publication
 * marker is gone it re-publishes at once (data planes, which kept their last known good state meanwhile,
 * reload on the `resync` that follows); when either is gone it recreates the consumer groups and the
 * BullMQ job schedulers. The control plane repairs a lost publication marker on its own reconnect too, so
 * the worker's marker is what tells it that its own structures went with the data.
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

  /** Call once the worker created its structures: they exist now, so only a later loss counts. */
  start(): void {
    this.deps.redis.on("ready", this.onReady);
    this.timer = setInterval(() => void this.check(), this.deps.intervalMs);
    this.timer.unref();
    // Unwritten (Redis down at start), the next check recreates the structures: idempotent, no harm.
    this.deps.redis.set(this.deps.names.workerReady(), new Date().toISOString()).catch(() => undefined);
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
    let published: boolean;
    let own: boolean;
    try {
      // Two single-key reads: on a Redis Cluster the two keys live in different slots.
      published = (await this.deps.redis.exists(this.deps.names.publishedAt())) === 1;
      own = (await this.deps.redis.exists(this.deps.names.workerReady())) === 1;
    } catch {
      return; // Redis unreachable: the next tick or the reconnect checks again
    }
    if ((published && own) || this.stopped) return;
    const t0 = Date.now();
    this.deps.log.warn(
      { publicationMarker: published, workerMarker: own },
      "redis lost its data (restarted empty?): re-publishing where needed and recreating the worker's structures",
    );
    try {
      // Serving first: data planes wait for this re-publish (keys changed while Redis was away keep their
      // old cached state until it lands). The consumer group is created at the start of the stream, so the
      // usage flushed meanwhile is read in full whenever it comes back.
      if (!published) await this.deps.republish();
      await this.deps.recreate();
      // Last: a failure before this leaves the marker absent, so the next check tries again.
      await this.deps.redis.set(this.deps.names.workerReady(), new Date().toISOString());
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
