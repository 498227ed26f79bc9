import { z } from "zod";
import { env } from "../../../shared/src/config/env";
import type { Logger } from "../../../shared/src/log/logger";
import type { RedisClient, RedisNodeAddress } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { appQuotaKeys, computeUnitQuotaKeys, type QuotaKeys, RedisQuotaStore } from "../quota/quota-store";
import { NoopQuotaTracker, type QuotaTracker, ReconciledQuotaTracker } from "../quota/quota-tracker";
import {
  SharedMemoryQuotaStore,
  SharedQuotaCounts,
  type SharedQuotaTables,
} from "../quota/shared-quota-counts";
import type { Clock } from "./clock";
import { LocalRateLimiter, NoopRateLimiter, type RateLimiter } from "./rate-limiter";
import { createLimitsRedis } from "./redis-client";
import { RedisReconciledRateLimiter } from "./redis-rate-limiter";
import { WindowCounts } from "./window-counts";

/** Environment for limits; spread into the data plane's env shape (`...limitsEnvShape`). */
export const limitsEnvShape = {
  /** `redis`: coordinated across instances; `local`: per instance only; `off`: no per-second limits. */
  RATE_LIMIT_MODE: z.enum(["redis", "local", "off"]).default("redis"),
  /** How often each instance reconciles its per-second counts through Redis. */
  RATE_LIMIT_SYNC_INTERVAL_MS: env.int(25, 5, 1_000),
  /** A reconciliation round unanswered this long counts as Redis being unreachable. */
  RATE_LIMIT_SYNC_TIMEOUT_MS: env.int(250, 10, 10_000),
  /** 0 = fail-open (local limits while Redis is down); N = refuse once Redis is unreachable N ms. */
  RATE_LIMIT_FAIL_CLOSED_AFTER_MS: env.int(0, 0, 3_600_000),
  /** Per client IP on `/{network}/public`. */
  PUBLIC_RATE_LIMIT_PER_SECOND: env.int(50, 1, 1_000_000),
  /** `redis`: daily/monthly quotas counted in Redis; `local`: in process only; `off`: no quotas. */
  QUOTA_MODE: z.enum(["redis", "local", "off"]).default("redis"),
  /** How often quota counts are flushed to Redis and the global totals read back. */
  QUOTA_FLUSH_INTERVAL_MS: env.int(200, 10, 10_000),
  QUOTA_FLUSH_TIMEOUT_MS: env.int(1_000, 50, 60_000),
  /** On shutdown, how long to keep retrying the final quota flush. */
  QUOTA_CLOSE_TIMEOUT_MS: env.int(5_000, 0, 600_000),
};
export const LimitsEnvSchema = z.object(limitsEnvShape);
export type LimitsConfig = z.infer<typeof LimitsEnvSchema>;

export interface Limits {
  readonly rateLimiter: RateLimiter;
  readonly quota: QuotaTracker;
  /**
   * Apps' own daily caps (access rules), counted per app id (`appQuotaDay`), reconciled like the workspace
   * quota; only apps with a cap are counted. Follows QUOTA_MODE.
   */
  readonly appQuota: QuotaTracker;
  /**
   * Workspaces' daily / monthly compute units (plans with `dailyComputeUnitLimit` or
   * `monthlyComputeUnitLimit`), per workspace id under their own keys, reconciled like the workspace quota.
   */
  readonly computeUnitQuota: QuotaTracker;
  /** Starts the background loops (Redis connection opens by itself). */
  start(): void;
  /** Stops the loops, flushes the quota counts, closes the connection. */
  close(): Promise<void>;
  /**
   * Whether the limiter and the quota tracker currently reach Redis (null: that part does not use Redis).
   * Read at scrape time for the `/metrics` health gauge.
   */
  redisHealth(): { rateLimit: boolean | null; quota: boolean | null };
}

export interface CreateLimitsOptions {
  /** Injected in tests to step across second, day and month boundaries. */
  clock?: Clock;
  /**
   * The process's per-second counts (WindowCounts.allocate), shared by its serving threads so that a
   * per-second limit holds for the process; this plane's own by default.
   */
  rateLimitTable?: SharedArrayBuffer;
  /** The process's rate-limit instance id in Redis, the same in every serving thread (random by default). */
  rateLimitInstanceId?: string;
  /**
   * The process's quota counts (allocateQuotaTables), shared by its serving threads so that a daily or
   * monthly limit holds for the process; this plane's own by default.
   */
  quotaTables?: QuotaTables;
}

/** One SharedQuotaCounts table pair per quota the limits keep. */
export interface QuotaTables {
  readonly workspace: SharedQuotaTables;
  readonly app: SharedQuotaTables;
  readonly computeUnits: SharedQuotaTables;
}

/** Memory for the process's quota counts, given to every serving thread (2.3 MiB). */
export function allocateQuotaTables(): QuotaTables {
  return {
    workspace: SharedQuotaCounts.allocate(),
    app: SharedQuotaCounts.allocate(),
    computeUnits: SharedQuotaCounts.allocate(),
  };
}

/** Builds the limiter and quota tracker the server uses, from configuration. */
export function createLimits(
  config: LimitsConfig & {
    REDIS_URL: string;
    REDIS_CLUSTER_NODES?: readonly RedisNodeAddress[];
    REDIS_KEY_PREFIX: string;
    REDIS_COMMAND_TIMEOUT_MS?: number;
  },
  logger?: Logger,
  opts: CreateLimitsOptions = {},
): Limits {
  const clock = opts.clock;
  const counts = config.RATE_LIMIT_MODE === "off" ? undefined : new WindowCounts(opts.rateLimitTable);
  const names = new RedisNames(config.REDIS_KEY_PREFIX);
  const needRedis = config.RATE_LIMIT_MODE === "redis" || config.QUOTA_MODE === "redis";
  let redis: RedisClient | undefined;
  if (needRedis) {
    redis = createLimitsRedis(config.REDIS_URL, {
      clusterNodes: config.REDIS_CLUSTER_NODES,
      commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS,
      name: `data-plane:${config.REDIS_KEY_PREFIX}limits`,
    });
    redis.on("error", (err: Error) => logger?.warn({ err: err.message }, "limits redis connection error"));
  }
  const reconciled =
    config.RATE_LIMIT_MODE === "redis"
      ? new RedisReconciledRateLimiter({
          redis: redis!,
          names,
          syncIntervalMs: config.RATE_LIMIT_SYNC_INTERVAL_MS,
          syncTimeoutMs: config.RATE_LIMIT_SYNC_TIMEOUT_MS,
          failClosedAfterMs: config.RATE_LIMIT_FAIL_CLOSED_AFTER_MS || null,
          clock,
          logger,
          counts,
          instanceId: opts.rateLimitInstanceId,
        })
      : undefined;
  const rateLimiter: RateLimiter =
    reconciled ??
    (config.RATE_LIMIT_MODE === "local" ? new LocalRateLimiter({ clock, counts }) : new NoopRateLimiter());
  const quotaTracker = (keys: QuotaKeys | undefined, tables: SharedQuotaTables | undefined) => {
    if (config.QUOTA_MODE === "off") return undefined;
    // With QUOTA_MODE=local the process's shared counts are the store too.
    const shared = new SharedQuotaCounts(tables);
    return new ReconciledQuotaTracker({
      store:
        config.QUOTA_MODE === "redis"
          ? new RedisQuotaStore({ redis: redis!, names, keys })
          : new SharedMemoryQuotaStore(shared),
      shared,
      flushIntervalMs: config.QUOTA_FLUSH_INTERVAL_MS,
      flushTimeoutMs: config.QUOTA_FLUSH_TIMEOUT_MS,
      clock,
      logger,
    });
  };
  const tables = opts.quotaTables;
  const tracker = quotaTracker(undefined, tables?.workspace);
  const appTracker = quotaTracker(appQuotaKeys(names), tables?.app);
  const cuTracker = quotaTracker(computeUnitQuotaKeys(names), tables?.computeUnits);
  return {
    rateLimiter,
    quota: tracker ?? new NoopQuotaTracker(),
    appQuota: appTracker ?? new NoopQuotaTracker(),
    computeUnitQuota: cuTracker ?? new NoopQuotaTracker(),
    start() {
      reconciled?.start();
      tracker?.start();
      appTracker?.start();
      cuTracker?.start();
    },
    async close() {
      await reconciled?.stop();
      await Promise.all([
        tracker?.close(config.QUOTA_CLOSE_TIMEOUT_MS),
        appTracker?.close(config.QUOTA_CLOSE_TIMEOUT_MS),
        cuTracker?.close(config.QUOTA_CLOSE_TIMEOUT_MS),
      ]);
      redis?.disconnect();
    },
    redisHealth() {
      return {
        rateLimit: reconciled === undefined ? null : reconciled.redisHealthy,
        quota: tracker === undefined || config.QUOTA_MODE !== "redis" ? null : tracker.storeHealthy,
      };
    },
  };
}
