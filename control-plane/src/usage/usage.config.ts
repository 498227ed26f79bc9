import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { z } from "zod";
import { env, parseEnv } from "../../../shared/src/config/env";

const schema = z.object({
  /** Minute rollups older than this are deleted by the retention job. */
  USAGE_MINUTE_RETENTION_DAYS: env.int(7, 1, 3650),
  /** Hour rollups older than this are deleted. */
  USAGE_HOUR_RETENTION_DAYS: env.int(90, 1, 36500),
  /** Day rollups older than this are deleted; 0 keeps them forever. */
  USAGE_DAY_RETENTION_DAYS: env.int(0, 0, 365000),
  /** Period of the retention job. */
  USAGE_RETENTION_INTERVAL_SECONDS: env.int(3600, 5, 7 * 24 * 3600),
  /** XREADGROUP BLOCK timeout (how long an idle read waits for new entries). */
  USAGE_INGEST_BLOCK_MS: env.int(2_000, 10, 60_000),
  /** Entries read per XREADGROUP. */
  USAGE_INGEST_BATCH: env.int(50, 1, 10_000),
  /** Pending entries idle this long (their consumer died) are claimed with XAUTOCLAIM. */
  USAGE_CLAIM_IDLE_MS: env.int(60_000, 100, 24 * 3600 * 1000),
  /** Consumer name in the group; stable across restarts of the same worker lets it resume its own pending entries. */
  USAGE_CONSUMER_NAME: z.string().min(1).max(128).optional(),
  /**
   * Failures of one stream entry (usage and request log) while Postgres answers, after which it is set
   * aside to the stream's dead-letter stream (`<stream>:dead`) so the others go on.
   */
  INGEST_MAX_ATTEMPTS: env.int(5, 1, 100),
  /** First wait before a failed entry is tried again; doubles after each further failure. */
  INGEST_RETRY_BASE_MS: env.int(1_000, 10, 600_000),
  /** Set to false to run a worker without usage ingestion. */
  USAGE_INGEST_ENABLED: env.bool(true),
  /** Request-log day partitions older than this are dropped (by the usage queue's request-log job). */
  REQUEST_LOG_RETENTION_DAYS: env.int(7, 1, 3650),
  /** Set to false to run a worker without request-log ingestion (the stream is left unread). */
  REQUEST_LOG_INGEST_ENABLED: env.bool(true),
});

/** The environment schema: docs/contracts.md lists every variable (test/unit/docs/contracts.test.ts checks it). */
export const UsageWorkerEnvSchema = schema;

export interface UsageWorkerConfig {
  minuteRetentionDays: number;
  hourRetentionDays: number;
  /** 0 = forever. */
  dayRetentionDays: number;
  retentionIntervalSeconds: number;
  blockMs: number;
  batch: number;
  claimIdleMs: number;
  consumerName: string;
  enabled: boolean;
  requestLogRetentionDays: number;
  requestLogIngestEnabled: boolean;
  maxAttempts: number;
  retryBaseMs: number;
}

export function loadUsageWorkerConfig(source: NodeJS.ProcessEnv = process.env): UsageWorkerConfig {
  const e = parseEnv(schema, source);
  return {
    minuteRetentionDays: e.USAGE_MINUTE_RETENTION_DAYS,
    hourRetentionDays: e.USAGE_HOUR_RETENTION_DAYS,
    dayRetentionDays: e.USAGE_DAY_RETENTION_DAYS,
    retentionIntervalSeconds: e.USAGE_RETENTION_INTERVAL_SECONDS,
    blockMs: e.USAGE_INGEST_BLOCK_MS,
    batch: e.USAGE_INGEST_BATCH,
    claimIdleMs: e.USAGE_CLAIM_IDLE_MS,
    consumerName: e.USAGE_CONSUMER_NAME ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`,
    enabled: e.USAGE_INGEST_ENABLED,
    requestLogRetentionDays: e.REQUEST_LOG_RETENTION_DAYS,
    requestLogIngestEnabled: e.REQUEST_LOG_INGEST_ENABLED,
    maxAttempts: e.INGEST_MAX_ATTEMPTS,
    retryBaseMs: e.INGEST_RETRY_BASE_MS,
  };
}
