import { Counter, type Registry } from "prom-client";
import type { Logger } from "../../../shared/src/log/logger";
import { RedisNames } from "../../../shared/src/redis/keys";
import type { DataPlaneConfig } from "../config";
import { createLimitsRedis } from "../ratelimit/redis-client";
import { NoopRequestLog, RedisRequestLog, type RequestLog } from "./recorder";

/** The request log built from the data-plane config, with its own Redis connection. */
export interface OwnedRequestLog {
  readonly log: RequestLog;
  start(): void;
  close(): Promise<void>;
}

/**
 * REQUEST_LOG_ENABLED=false (or USAGE_MODE=off, which means "no Redis writes"): a no-op. Otherwise a
 * RedisRequestLog on its own connection (offline queue off: a flush while Redis is down fails at once
 * and is retried next tick).
 */
export function createRequestLog(
  config: DataPlaneConfig,
  logger?: Logger,
  registry?: Registry,
): OwnedRequestLog {
  if (!config.REQUEST_LOG_ENABLED || config.USAGE_MODE === "off") {
    const log = new NoopRequestLog();
    return { log, start() {}, close: () => log.close() };
  }
  const redis = createLimitsRedis(config.REDIS_URL, {
    clusterNodes: config.REDIS_CLUSTER_NODES,
    commandTimeoutMs: Math.max(config.REDIS_COMMAND_TIMEOUT_MS, 2_000),
    name: `data-plane:${config.REDIS_KEY_PREFIX}requestlog`,
  });
  redis.on("error", (err: Error) => logger?.warn({ err: err.message }, "request log redis connection error"));
  let lastErrorLog = 0;
  const log = new RedisRequestLog(
    redis,
    new RedisNames(config.REDIS_KEY_PREFIX),
    {
      samplePercent: config.REQUEST_LOG_SAMPLE_PERCENT,
      flushIntervalMs: config.REQUEST_LOG_FLUSH_INTERVAL_MS,
      maxPending: config.REQUEST_LOG_MAX_PENDING,
      streamMaxLen: config.REQUEST_LOG_STREAM_MAXLEN,
      keylessTtlSeconds: config.REQUEST_LOG_KEYLESS_TTL_SECONDS,
    },
    (err) => {
      const now = Date.now();
      if (now - lastErrorLog < 10_000) return;
      lastErrorLog = now;
      logger?.warn(
        { err: (err as Error).message },
        "request log flush failed; records kept for the next flush",
      );
    },
    {
      keyless:
        registry === undefined
          ? undefined
          : ((registry.getSingleMetric("rpcgw_request_log_keyless_total") as Counter<"reason"> | undefined) ??
            new Counter({
              name: "rpcgw_request_log_keyless_total",
              help: "Errors that belong to no workspace (unknown or missing key, public endpoint), counted per minute, reason and client prefix in Redis instead of logged one by one",
              labelNames: ["reason"],
              registers: [registry],
            })),
    },
  );
  return {
    log,
    start() {
      log.start();
    },
    async close() {
      await log.close();
      redis.disconnect();
    },
  };
}
