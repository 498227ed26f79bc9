import type { Registry } from "prom-client";
import type { Logger } from "../../../shared/src/log/logger";
import { isCluster, type RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import type { DataPlaneConfig } from "../config";
import { createLimitsRedis } from "../ratelimit/redis-client";
import { NoopUsageRecorder, RedisUsageRecorder, type UsageRecorder } from "./recorder";

/** A recorder built from the data-plane configuration, plus what it owns (its Redis connection). */
export interface OwnedUsageRecorder {
  readonly recorder: UsageRecorder;
  /** `recorder.start()` (periodic flush). */
  start(): void;
  /** Final flush (retried up to USAGE_CLOSE_TIMEOUT_MS), then the connection is closed. */
  close(): Promise<void>;
}

/**
 * USAGE_MODE=redis: a RedisUsageRecorder on its own connection (offline queue off: a flush while Redis is
 * down fails at once and the batch is retried on the next tick with the same batchId). USAGE_MODE=off: a
 * no-op recorder.
 */
export function createUsageRecorder(
  config: DataPlaneConfig,
  opts: { logger?: Logger; registry?: Registry } = {},
): OwnedUsageRecorder {
  if (config.USAGE_MODE === "off") {
    const recorder = new NoopUsageRecorder();
    return { recorder, start() {}, close: () => recorder.close() };
  }
  const redis = createLimitsRedis(config.REDIS_URL, {
    clusterNodes: config.REDIS_CLUSTER_NODES,
    commandTimeoutMs: Math.max(config.REDIS_COMMAND_TIMEOUT_MS, 2_000),
    name: `data-plane:${config.REDIS_KEY_PREFIX}usage`,
  });
  const logger = opts.logger;
  const names = new RedisNames(config.REDIS_KEY_PREFIX);
  redis.on("error", (err: Error) => logger?.warn({ err: err.message }, "usage redis connection error"));
  let lastErrorLog = 0;
  const recorder = new RedisUsageRecorder({
    redis,
    names,
    registry: opts.registry,
    config: {
      flushIntervalMs: config.USAGE_FLUSH_INTERVAL_MS,
      maxPendingRows: config.USAGE_MAX_PENDING_ROWS,
      streamMaxLen: config.USAGE_STREAM_MAXLEN,
      maxMethodsPerNetwork: config.USAGE_MAX_METHODS_PER_NETWORK,
      closeTimeoutMs: config.USAGE_CLOSE_TIMEOUT_MS,
      replayWindowMs: config.USAGE_REPLAY_WINDOW_MS,
      replayMaxRows: config.USAGE_REPLAY_MAX_ROWS,
    },
    onError(err) {
      const now = Date.now();
      if (now - lastErrorLog < 10_000) return; // one line per 10 s while Redis is away
      lastErrorLog = now;
      logger?.warn({ err: (err as Error).message }, "usage flush failed; rows kept for the next flush");
    },
  });
  // A Redis that restarted (new run_id) may have lost entries written just before (no persistence, or
  // AOF's last second): write the recent ones again; the worker counts each batchId once.
  const watcher = watchRedisRestarts(runIdSource(redis, names.usageStream()), () => {
    const n = recorder.redeliverRecent();
    logger?.warn({ entries: n }, "redis restarted: writing recent usage entries again");
  });
  return {
    recorder,
    start() {
      recorder.start();
    },
    async close() {
      watcher.stop();
      await recorder.close();
      redis.disconnect();
    },
  };
}

/** What `watchRedisRestarts` needs of a connection (an ioredis client satisfies it). */
export interface RunIdSource {
  readonly status: string;
  on(event: "ready", listener: () => void): unknown;
  info(section: "server"): Promise<string>;
}

/**
 * Where the run id of the server holding `key` is read. A single Redis: the connection itself. A Redis
 * Cluster: INFO of the master that serves `key`'s slot (a script declaring the key is routed there, after
 * a failover too), read again whenever the cluster (re)connects, adds a node (a node that restarted comes
 * back as a new one) or loses one; a failover to a replica shows as a new run id, and the replica may well
 * have missed the last writes, so the recent entries are written again then too.
 *
 * Losing a node counts because a failover adds none: the client already holds a connection to every
 * replica, and the promoted one only changes role. A master that dies closes its connection at once (one
 * that stops answering leaves at the next slot-map refresh, `shared/src/redis/connect.ts`); a read before
 * a replica serves the slot fails, and `watchRedisRestarts` retries it until one does.
 */
export function runIdSource(redis: RedisClient, key: string): RunIdSource {
  if (!isCluster(redis)) return redis;
  return {
    get status() {
      return redis.status;
    },
    on(event, listener) {
      redis.on(event, listener);
      redis.on("+node", listener);
      redis.on("-node", listener);
      return this;
    },
    info: () => redis.eval("return redis.call('INFO', 'server')", 1, key) as Promise<string>,
  };
}

/**
 * Calls `onRestart` when the server behind `redis` is a new process (its `run_id` changed across a
 * reconnect). The run id is read on every "ready"; a failed read is retried every `retryMs` while the
 * connection stays ready, so a failure on the first "ready" does not leave the id unknown (which would
 * hide the first restart).
 */
export function watchRedisRestarts(
  redis: RunIdSource,
  onRestart: () => void,
  retryMs = 500,
): { stop(): void } {
  let runId: string | undefined;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  const read = (): void => {
    if (retry !== undefined) clearTimeout(retry);
    retry = undefined;
    if (stopped) return;
    redis.info("server").then(
      (text: string) => {
        const id = /run_id:(\w+)/.exec(text)?.[1];
        if (id === undefined || stopped) return;
        if (runId !== undefined && id !== runId) onRestart();
        runId = id;
      },
      () => {
        // Not ready any more: the next "ready" reads it.
        if (stopped || redis.status !== "ready" || retry !== undefined) return;
        retry = setTimeout(read, retryMs);
        retry.unref();
      },
    );
  };
  redis.on("ready", read);
  return {
    stop() {
      stopped = true;
      if (retry !== undefined) clearTimeout(retry);
    },
  };
}
