import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Counter } from "prom-client";
import { z } from "zod";
import { env } from "../../../shared/src/config/env";
import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import type { RedisNames } from "../../../shared/src/redis/keys";
import {
  DEFAULT_REQUEST_LOG_STREAM_MAXLEN,
  REQUEST_LOG_ENTRY_MAX_BYTES,
  REQUEST_LOG_STREAM_FIELD,
  type RequestLogRecord,
} from "../../../shared/src/requestlog/contract";
import { makeSafe } from "../../../shared/src/requestlog/safe-record";
import { KeylessCounts } from "./keyless";

/** Records per stream entry (a flush with more writes several entries). */
const MAX_RECORDS_PER_ENTRY = 500;

/** Environment of the request log; spread into the data-plane config schema. */
export const requestLogEnvShape = {
  /** Request log on/off (errors always logged, successes sampled). */
  REQUEST_LOG_ENABLED: env.bool(true),
  /** Share of successful request objects logged, in percent (0..100; fractions allowed). */
  REQUEST_LOG_SAMPLE_PERCENT: z.coerce.number().min(0).max(100).default(1),
  /** How often buffered records are XADDed (one stream entry per flush). */
  REQUEST_LOG_FLUSH_INTERVAL_MS: env.int(1_000, 20, 600_000),
  /** Records buffered in memory (Redis slow or away); beyond it new records are dropped and counted. */
  REQUEST_LOG_MAX_PENDING: env.int(50_000, 1, 10_000_000),
  /**
   * Approximate MAXLEN of the request-log stream (entries of at most 64 KiB each: the default bounds the
   * stream to about 256 MiB).
   */
  REQUEST_LOG_STREAM_MAXLEN: env.int(DEFAULT_REQUEST_LOG_STREAM_MAXLEN, 100, 1_000_000_000),
  /** Lifetime of a minute's hash of errors that belong to no workspace (`keyless:<minute>`). */
  REQUEST_LOG_KEYLESS_TTL_SECONDS: env.int(10_800, 60, 30 * 86_400),
};

export interface RequestLogConfig {
  samplePercent: number;
  flushIntervalMs: number;
  maxPending: number;
  streamMaxLen: number;
  /** TTL of the per-minute keyless hashes (default 3 h). */
  keylessTtlSeconds?: number;
}

export interface RequestLogRedis {
  xadd(key: string, ...args: (string | number)[]): Promise<string | null>;
  hincrby(key: string, field: string, increment: number): Promise<number>;
  expire(key: string, seconds: number): Promise<number>;
}

/** Counters the log reports to (the data plane's registry); absent in tests that do not look. */
export interface RequestLogMetrics {
  /** rpcgw_request_log_keyless_total{reason}: errors of no workspace, counted in aggregate. */
  keyless?: Counter<"reason">;
}

/**
 * What the transports call. `wants(category)` is the sampling decision, taken before anything is built:
 * an unsampled success costs a comparison and a decrement, no allocation and no random draw.
 */
export interface RequestLog {
  wants(category: string): boolean;
  record(r: RequestLogRecord): void;
  flush(): Promise<void>;
  close(): Promise<void>;
}

export class NoopRequestLog implements RequestLog {
  wants(): boolean {
    return false;
  }
  record(): void {}
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}

/**
 * Buffers sampled records and XADDs them, one entry (`batchId` unique per process) per flush, to the
 * request-log stream. The buffer is bounded by `maxPending`: when Redis is away the newest records past
 * it are dropped (counted in `dropped`), never the request. A failed XADD keeps its batch (same batchId,
 * retried next tick); the worker inserts idempotently, so a lost reply costs nothing.
 */
export class RedisRequestLog implements RequestLog {
  /** Successes logged when Math.random() < this (0..1). */
  private readonly successRate: number;
  /** Successes still to pass over before the next sampled one (see wants). */
  private skip = 0;
  private buf: RequestLogRecord[] = [];
  /** Cut batches not yet written (oldest first); the JSON is built when the batch is first written. */
  private queued: { batchId: string; records: RequestLogRecord[]; payload?: string }[] = [];
  private queuedCount = 0;
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private readonly instanceId = `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  /** Errors of no workspace, counted per minute instead of logged (see keyless.ts). */
  readonly keyless = new KeylessCounts();
  dropped = 0;
  written = 0;

  constructor(
    private readonly redis: RequestLogRedis,
    private readonly names: RedisNames,
    private readonly cfg: RequestLogConfig,
    private readonly onError?: (err: unknown) => void,
    private readonly metrics: RequestLogMetrics = {},
  ) {
    this.successRate = cfg.samplePercent / 100;
  }

  start(): this {
    if (this.timer === undefined) {
      this.timer = setInterval(() => void this.flush(), this.cfg.flushIntervalMs);
      this.timer.unref();
    }
    return this;
  }

  wants(category: string): boolean {
    if (category !== ErrorCategory.Success) return true;
    // Each success is still sampled with probability successRate, independently of the others, but one
    // random draw per sampled success instead of one per success: the number of successes passed over
    // before the next sampled one is drawn from the geometric distribution (the gaps of a Bernoulli
    // process). A batch of 100 at 1% then draws about once, not 100 times.
    if (this.skip > 0) {
      this.skip--;
      return false;
    }
    this.skip = this.nextSkip();
    return this.successRate > 0;
  }

  /** Successes to pass over before the next sampled one: Geometric(successRate) on {0, 1, 2, ...}. */
  private nextSkip(): number {
    const p = this.successRate;
    if (p >= 1) return 0;
    if (p <= 0) return Number.POSITIVE_INFINITY;
    // Inverse transform: floor(ln U / ln(1 - p)) for U uniform on (0, 1]; 1 - Math.random() is never 0.
    return Math.floor(Math.log(1 - Math.random()) / Math.log1p(-p));
  }

  /**
   * Takes one record: made safe first (every transport's records pass here), then either buffered for the
   * stream or, when it belongs to no workspace, counted in aggregate (an error) or dropped (a success of
   * the public endpoint: usage counts it, and no one could list it).
   */
  record(r: RequestLogRecord): void {
    makeSafe(r);
    if (r.workspaceId === null) {
      if (r.category !== ErrorCategory.Success) {
        const reason = this.keyless.add(r);
        this.metrics.keyless?.inc({ reason });
      }
      return;
    }
    if (this.buf.length + this.queuedCount >= this.cfg.maxPending) {
      this.dropped++;
      return;
    }
    this.buf.push(r);
  }

  flush(): Promise<void> {
    this.flushing ??= this.doFlush().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async doFlush(): Promise<void> {
    await this.flushKeyless();
    if (this.buf.length > 0) {
      const records = this.buf;
      this.buf = [];
      // Entries of at most MAX_RECORDS_PER_ENTRY, serialised one at a time between the XADDs: a flush at
      // 100% sampling under load (10k+ records) would otherwise stall the event loop in one JSON.stringify,
      // and every request waiting behind it would see that stall in its latency.
      for (let at = 0; at < records.length; at += MAX_RECORDS_PER_ENTRY) {
        const part =
          at === 0 && records.length <= MAX_RECORDS_PER_ENTRY
            ? records
            : records.slice(at, at + MAX_RECORDS_PER_ENTRY);
        this.queued.push({ batchId: `${this.instanceId}:${++this.seq}`, records: part });
      }
      this.queuedCount += records.length;
    }
    while (this.queued.length > 0) {
      const b = this.queued[0]!;
      b.payload ??= JSON.stringify({ batchId: b.batchId, records: b.records });
      // The stream's bound is entries x REQUEST_LOG_ENTRY_MAX_BYTES: a larger entry is cut in two (the
      // halves get batch ids of their own; a record is far smaller than the cap, see makeSafe).
      if (b.records.length > 1 && Buffer.byteLength(b.payload) > REQUEST_LOG_ENTRY_MAX_BYTES) {
        const half = b.records.length >> 1;
        this.queued.splice(
          0,
          1,
          { batchId: `${this.instanceId}:${++this.seq}`, records: b.records.slice(0, half) },
          { batchId: `${this.instanceId}:${++this.seq}`, records: b.records.slice(half) },
        );
        continue;
      }
      try {
        await this.redis.xadd(
          this.names.requestLogStream(),
          "MAXLEN",
          "~",
          this.cfg.streamMaxLen,
          "*",
          REQUEST_LOG_STREAM_FIELD,
          b.payload,
        );
      } catch (err) {
        this.onError?.(err);
        return;
      }
      this.queued.shift();
      this.queuedCount -= b.records.length;
      this.written += b.records.length;
    }
  }

  /**
   * Adds the keyless counts to their minutes' hashes (HINCRBY per field, then EXPIRE), one minute at a time;
   * what fails is kept and added next time (a lost reply may count a field twice: these are estimates).
   */
  private async flushKeyless(): Promise<void> {
    const minutes = this.keyless.take();
    for (let i = 0; i < minutes.length; i++) {
      const m = minutes[i]!;
      const key = this.names.keylessErrors(m.minuteMs);
      try {
        const writes: Promise<number>[] = [];
        for (const [field, n] of m.counts) writes.push(this.redis.hincrby(key, field, n));
        writes.push(this.redis.expire(key, this.cfg.keylessTtlSeconds ?? 10_800));
        await Promise.all(writes);
      } catch (err) {
        this.onError?.(err);
        this.keyless.restore(minutes.slice(i));
        return;
      }
    }
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }
}
