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
import { dayStart, ensurePartitions, retentionCutoff } from "./requestlog.partitions";

export interface RequestLogIngestorOptions {
  consumerName: string;
  blockMs: number;
  /** Stream entries per XREADGROUP. */
  batch: number;
  claimIdleMs: number;
  retentionDays: number;
  /** Test hook: called after the INSERT and before XACK; throwing simulates a crash in between. */
  beforeAck?: (entryId: string) => void;
}

type StreamEntry = [id: string, fields: string[]];

/** Rows per INSERT: 13 parameters each, well under Postgres' 65,535 bind parameters. */
const ROWS_PER_INSERT = 1_000;
/** Records stamped further ahead than this (a skewed clock) are skipped rather than given a partition. */
const MAX_FUTURE_MS = 86_400_000;

/**
 * Reads the request-log stream as one consumer of `request-log-ingest` and inserts each entry's records
 * (`ON CONFLICT DO NOTHING` on time + request id + item), then XACKs: at-least-once delivery, each record
 * stored once. After a restart under the same consumer name its own pending entries are read first;
 * entries left pending by dead consumers are claimed after `claimIdleMs`. Records past the retention are
 * skipped (their partition was or will be dropped); partitions a record needs are created on the way.
 */
export class RequestLogIngestor {
  readonly stats = { entries: 0, inserted: 0, duplicates: 0, invalid: 0, expired: 0 };
  private running: Promise<void> | undefined;
  private stopping = false;
  private blocking = false;
  private readPendingFirst = true;
  private lastClaimAt = 0;
  private readonly stream: string;
  /** Day starts whose partition is known to exist (saves a catalog lookup per entry). */
  private readonly knownDays = new Set<number>();

  constructor(
    private readonly ds: DataSource,
    /** A dedicated connection: XREADGROUP BLOCK holds it. */
    private readonly redis: RedisClient,
    names: RedisNames,
    private readonly log: Logger,
    private readonly opts: RequestLogIngestorOptions,
  ) {
    this.stream = names.requestLogStream();
  }

  async ensureGroup(conn: RedisClient = this.redis): Promise<void> {
    try {
      await conn.xgroup("CREATE", this.stream, REQUEST_LOG_CONSUMER_GROUP, "0", "MKSTREAM");
    } catch (err) {
      if (!String((err as Error).message).includes("BUSYGROUP")) throw err;
    }
  }

  async start(): Promise<void> {
    await this.ensureGroup();
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.blocking) this.redis.disconnect();
    await this.running;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.pollOnce(this.opts.blockMs);
      } catch (err) {
        if (this.stopping) break;
        if (String((err as Error).message).includes("NOGROUP")) {
          this.log.warn("request-log consumer group missing (Redis restarted empty?): recreating it");
          if (
            await this.ensureGroup().then(
              () => true,
              () => false,
            )
          )
            continue;
        }
        this.log.error({ err }, "request-log ingestion failed; retrying");
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  }

  /** One round: own pending entries (after a start or a failure), stale ones of dead consumers, new ones. */
  async pollOnce(blockMs = 0): Promise<number> {
    try {
      let handled = 0;
      if (this.readPendingFirst) {
        for (;;) {
          const entries = await this.read("0", 0);
          if (entries.length === 0) break;
          handled += await this.handle(entries);
        }
        this.readPendingFirst = false;
      }
      const now = Date.now();
      if (now - this.lastClaimAt >= Math.min(this.opts.claimIdleMs, 10_000)) {
        this.lastClaimAt = now;
        handled += await this.claimStale();
      }
      handled += await this.handle(await this.read(">", blockMs));
      return handled;
    } catch (err) {
      this.readPendingFirst = true;
      throw err;
    }
  }

  private async claimStale(): Promise<number> {
    let cursor = "0-0";
    let handled = 0;
    do {
      const res = (await this.redis.xautoclaim(
        this.stream,
        REQUEST_LOG_CONSUMER_GROUP,
        this.opts.consumerName,
        this.opts.claimIdleMs,
        cursor,
        "COUNT",
        this.opts.batch,
      )) as [string, (StreamEntry | null)[]];
      cursor = res[0];
      handled += await this.handle(res[1].filter((e): e is StreamEntry => e !== null && Array.isArray(e[1])));
    } while (cursor !== "0-0" && !this.stopping);
    return handled;
  }

  private async read(id: string, blockMs: number): Promise<StreamEntry[]> {
    const args: (string | number)[] = ["GROUP", REQUEST_LOG_CONSUMER_GROUP, this.opts.consumerName];
    args.push("COUNT", this.opts.batch);
    if (id === ">" && blockMs > 0) {
      if (this.stopping) return [];
      args.push("BLOCK", blockMs);
    }
    args.push("STREAMS", this.stream, id);
    this.blocking = id === ">" && blockMs > 0;
    let res: [string, StreamEntry[]][] | null;
    try {
      res = (await (this.redis.xreadgroup as (...a: (string | number)[]) => Promise<unknown>)(...args)) as
        | [string, StreamEntry[]][]
        | null;
    } finally {
      this.blocking = false;
    }
    if (!res || res.length === 0) return [];
    return res[0]![1].filter((e) => Array.isArray(e[1]));
  }

  private async handle(entries: StreamEntry[]): Promise<number> {
    for (const [id, fields] of entries) {
      const records = this.parse(id, fields);
      if (records.length > 0) await this.insert(records);
      this.stats.entries++;
      this.opts.beforeAck?.(id);
      await this.redis.xack(this.stream, REQUEST_LOG_CONSUMER_GROUP, id);
    }
    return entries.length;
  }

  /** The entry's valid records inside the retention; a poison entry yields none (and is acknowledged). */
  private parse(id: string, fields: string[]): RequestLogRecord[] {
    let raw: string | undefined;
    for (let i = 0; i + 1 < fields.length; i += 2)
      if (fields[i] === REQUEST_LOG_STREAM_FIELD) raw = fields[i + 1];
    let batch: ReturnType<typeof RequestLogBatchSchema.safeParse> | undefined;
    try {
      batch = raw === undefined ? undefined : RequestLogBatchSchema.safeParse(JSON.parse(raw));
    } catch {
      batch = undefined;
    }
    if (!batch?.success) {
      this.stats.invalid++;
      this.log.warn({ entryId: id }, "invalid request-log stream entry skipped");
      return [];
    }
    const now = Date.now();
    const cutoff = retentionCutoff(now, this.opts.retentionDays);
    const out: RequestLogRecord[] = [];
    for (const r of batch.data.records) {
      const rec = RequestLogRecordSchema.safeParse(r);
      if (!rec.success) {
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
            `$${b + 7}, $${b + 8}, $${b + 9}, $${b + 10}, $${b + 11}, $${b + 12}, $${b + 13})`,
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
          r.httpStatus,
          r.category,
          r.reason,
          r.latencyMs,
          r.clientIp,
        );
      }
      const res = (await this.ds.query(
        `INSERT INTO request_log (time, request_id, item, workspace_id, app_id, network, transport, method,
           http_status, category, reason, latency_ms, client_ip)
         VALUES ${tuples.join(", ")} ON CONFLICT DO NOTHING RETURNING 1`,
        params,
      )) as unknown[];
      this.stats.inserted += res.length;
      this.stats.duplicates += chunk.length - res.length;
    }
  }
}
