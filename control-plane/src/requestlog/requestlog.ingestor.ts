import type { DataSource } from "typeorm";
import type { Logger } from "../../../shared/src/log/logger";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import {
  REQUEST_LOG_CONSUMER_GROUP,
  REQUEST_LOG_STREAM_FIELD,
  RequestLogBatchSchema,
  type RequestLogRecord,
  RequestLogRecordSchema,
} from "../../../shared/src/requestlog/contract";
import { makeSafe } from "../../../shared/src/requestlog/safe-record";
import { entryJson, HaltRound, StreamConsumer } from "../common/stream-consumer";
import { dayStart, ensurePartitions, retentionCutoff } from "./requestlog.partitions";

export interface RequestLogIngestorOptions {
  consumerName: string;
  blockMs: number;
  /** Stream entries per XREADGROUP. */
  batch: number;
  claimIdleMs: number;
  retentionDays: number;
  /** Failures of one entry (Postgres answering) before it is set aside to the dead-letter stream (default 5). */
  maxAttempts?: number;
  /** First wait before a failed entry is tried again; doubles (default 1 s). */
  retryBaseMs?: number;
  /** Removal of idle consumers (StreamConsumerOptions; defaults 1 h and 24 h). */
  pruneIntervalMs?: number;
  pruneIdleMs?: number;
  /** Test hook: called after the INSERT and before XACK; throwing simulates a crash in between. */
  beforeAck?: (entryId: string) => void;
}

/** Rows per INSERT: 15 parameters each, well under Postgres' 65,535 bind parameters. */
const ROWS_PER_INSERT = 1_000;
/** Records stamped further ahead than this (a skewed clock) are skipped rather than given a partition. */
const MAX_FUTURE_MS = 86_400_000;
/** compute_units is an `integer`: a record claiming more for one request object is not a data plane's. */
const MAX_COMPUTE_UNITS = 2_147_483_647;

/**
 * Reads the request-log stream as one consumer of `request-log-ingest` and inserts each entry's records
 * (`ON CONFLICT DO NOTHING` on time + request id + item), then XACKs: at-least-once delivery, each record
 * stored once. After a restart under the same consumer name its own pending entries are read first;
 * entries left pending by dead consumers are claimed after `claimIdleMs`. Records past the retention are
 * skipped (their partition was or will be dropped); partitions a record needs are created on the way.
 */
export class RequestLogIngestor {
  readonly stats = { entries: 0, inserted: 0, duplicates: 0, invalid: 0, expired: 0 };
  /** Reading, claiming and acknowledging; this class only stores entries. */
  readonly consumer: StreamConsumer;
  /** Day starts whose partition is known to exist (saves a catalog lookup per entry). */
  private readonly knownDays = new Set<number>();

  constructor(
    private readonly ds: DataSource,
    /** A dedicated connection: XREADGROUP BLOCK holds it. */
    redis: RedisClient,
    names: RedisNames,
    private readonly log: Logger,
    private readonly opts: RequestLogIngestorOptions,
  ) {
    this.consumer = new StreamConsumer(redis, log, {
      stream: names.requestLogStream(),
      group: REQUEST_LOG_CONSUMER_GROUP,
      consumerName: opts.consumerName,
      blockMs: opts.blockMs,
      batch: opts.batch,
      claimIdleMs: opts.claimIdleMs,
      label: "request-log",
      pruneIntervalMs: opts.pruneIntervalMs,
      pruneIdleMs: opts.pruneIdleMs,
      maxAttempts: opts.maxAttempts,
      attemptBackoffMs: opts.retryBaseMs,
      deadLetterStream: names.deadLetterStream(names.requestLogStream()),
      // A failure while Postgres itself is away is not the entry's fault (see StreamConsumerOptions.probe).
      probe: () => this.ds.query("SELECT 1"),
      handle: (id, fields) => this.store(id, fields),
    });
  }

  private async store(id: string, fields: string[]): Promise<boolean> {
    const records = this.parse(id, fields);
    if (records.length > 0) await this.insert(records);
    this.stats.entries++;
    try {
      this.opts.beforeAck?.(id);
    } catch (err) {
      throw new HaltRound(err); // a simulated crash: the round ends there
    }
    return true;
  }

  /** The entry's valid records inside the retention; a poison entry yields none (and is acknowledged). */
  private parse(id: string, fields: string[]): RequestLogRecord[] {
    const batch = RequestLogBatchSchema.safeParse(entryJson(fields, REQUEST_LOG_STREAM_FIELD));
    if (!batch.success) {
      this.stats.invalid++;
      this.log.warn({ entryId: id }, "invalid request-log stream entry skipped");
      return [];
    }
    const now = Date.now();
    const cutoff = retentionCutoff(now, this.opts.retentionDays);
    const out: RequestLogRecord[] = [];
    for (const r of batch.data.records) {
      // Made safe before the schema: a record from elsewhere than a data plane may still hold a U+0000, or
      // a method too long for the schema that is kept cut instead of skipped.
      if (typeof r === "object" && r !== null && !Array.isArray(r)) makeSafe(r as RequestLogRecord);
      const rec = RequestLogRecordSchema.safeParse(r);
      if (!rec.success || (rec.data.computeUnits ?? 0) > MAX_COMPUTE_UNITS) {
        this.stats.invalid++;
        continue;
      }
      if (rec.data.time < cutoff || rec.data.time > now + MAX_FUTURE_MS) {
        this.stats.expired++;
        continue;
      }
      out.push(rec.data);
    }
    return out;
  }

  private async insert(records: RequestLogRecord[]): Promise<void> {
    const days = new Set<number>();
    for (const r of records) {
      const d = dayStart(r.time);
      if (!this.knownDays.has(d)) days.add(d);
    }
    if (days.size > 0) {
      await ensurePartitions(this.ds, days);
      for (const d of days) this.knownDays.add(d);
    }
    for (let at = 0; at < records.length; at += ROWS_PER_INSERT) {
      const chunk = records.slice(at, at + ROWS_PER_INSERT);
      const params: unknown[] = [];
      const tuples: string[] = [];
      for (const r of chunk) {
        const b = params.length;
        tuples.push(
          `(to_timestamp($${b + 1}::double precision / 1000), $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6}, ` +
            `$${b + 7}, $${b + 8}, $${b + 9}, $${b + 10}, $${b + 11}, $${b + 12}, $${b + 13}, $${b + 14}, $${b + 15})`,
        );
        params.push(
          r.time,
          r.requestId,
          r.item,
          r.workspaceId,
          r.appId,
          r.network,
          r.transport,
          r.method,
          r.methodLength ?? null,
          r.httpStatus,
          r.category,
          r.reason,
          r.latencyMs,
          r.clientIp,
          r.computeUnits ?? null,
        );
      }
      const res = (await this.ds.query(
        `INSERT INTO request_log (time, request_id, item, workspace_id, app_id, network, transport, method,
           method_length, http_status, category, reason, latency_ms, client_ip, compute_units)
         VALUES ${tuples.join(", ")} ON CONFLICT DO NOTHING RETURNING 1`,
        params,
      )) as unknown[];
      this.stats.inserted += res.length;
      this.stats.duplicates += chunk.length - res.length;
    }
  }
}
