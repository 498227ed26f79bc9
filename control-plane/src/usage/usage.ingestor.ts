import { DataSource } from "typeorm";
import { Logger } from "../../../shared/src/log/logger";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import {
  USAGE_CONSUMER_GROUP,
  USAGE_STREAM_FIELD,
  UsageBatchEnvelopeSchema,
  UsageRow,
  UsageRowSchema,
  UUID_RE,
} from "../../../shared/src/usage/contract";
import { applyBatch } from "./usage.sql";

export interface UsageIngestorOptions {
  consumerName: string;
  blockMs: number;
  batch: number;
  claimIdleMs: number;
  /**
   * Test hook, called after COMMIT and before XACK: throwing simulates a crash in between; returning false
   * skips the XACK (as if the acknowledgement was lost) and goes on.
   */
  beforeAck?: (entryId: string) => boolean | undefined;
}

type StreamEntry = [id: string, fields: string[]];

export interface IngestStats {
  /** Entries applied. */
  applied: number;
  /** Entries already applied before (redelivered or XADDed twice): acknowledged only. */
  duplicates: number;
  /** Entries that are not a usage batch at all (acknowledged and skipped). */
  invalid: number;
  /** Rows skipped inside otherwise valid entries (bad shape, or ids that are not UUIDs). */
  invalidRows: number;
}

/**
 * Reads the usage stream as one consumer of the `usage-ingest` group and folds each entry into Postgres
 * (applyBatch: one transaction, dedup on batchId), then XACKs. Delivery is at-least-once, counting exactly
 * once: an entry redelivered after a crash between COMMIT and XACK is recognised by its batchId and only
 * acknowledged. On start the consumer first re-reads its own pending entries (same consumer name after a
 * restart), and every `claimIdleMs` it takes over entries left pending by dead consumers (XAUTOCLAIM).
 * A Postgres failure leaves the entry pending; it is retried after a pause.
 */
export class UsageIngestor {
  readonly stats: IngestStats = { applied: 0, duplicates: 0, invalid: 0, invalidRows: 0 };
  private running: Promise<void> | undefined;
  private stopping = false;
  private lastClaimAt = 0;
  private lastPruneAt = 0;
  private readPendingFirst = true;
  private blocking = false;
  private readonly stream: string;

  constructor(
    private readonly ds: DataSource,
    /** A dedicated connection: XREADGROUP BLOCK holds it. */
    private readonly redis: RedisClient,
    names: RedisNames,
    private readonly log: Logger,
    private readonly opts: UsageIngestorOptions,
  ) {
    this.stream = names.usageStream();
  }

  /**
   * Creates the consumer group (at the start of the stream) unless it exists. `conn` defaults to the
   * ingestor's own connection, which may sit in a blocking read for up to `blockMs`: callers in a hurry
   * pass another one.
   */
  async ensureGroup(conn: RedisClient = this.redis): Promise<void> {
    try {
      await conn.xgroup("CREATE", this.stream, USAGE_CONSUMER_GROUP, "0", "MKSTREAM");
    } catch (err) {
      if (!String((err as Error).message).includes("BUSYGROUP")) throw err;
    }
  }

  /** Starts the read loop in the background. */
  async start(): Promise<void> {
    await this.ensureGroup();
    this.running = this.loop();
  }

  /** Stops after the current read (at most `blockMs`); entries read but not acknowledged stay pending. */
  async stop(): Promise<void> {
    this.stopping = true;
    // Cut a blocking XREADGROUP short; anything it was delivering stays pending (claimed later).
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
          // Redis lost the group (restarted empty): recreate it at the start of the stream, so entries the
          // data planes added since are read too. Retried after the pause below if Redis is down again.
          this.log.warn("usage consumer group missing (Redis restarted empty?): recreating it");
          if (
            await this.ensureGroup().then(
              () => true,
              () => false,
            )
          )
            continue;
        }
        this.log.error({ err }, "usage ingestion failed; retrying");
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  }

  /**
   * One round: own pending entries (after a start or a failure), stale entries of dead consumers, then new
   * entries (waiting up to `blockMs`; 0 = no wait). Returns the number of entries handled.
   */
  async pollOnce(blockMs = 0): Promise<number> {
    try {
      return await this.round(blockMs);
    } catch (err) {
      // Whatever was read and not acknowledged is in our pending list: read it first next time.
      this.readPendingFirst = true;
      throw err;
    }
  }

  private async round(blockMs: number): Promise<number> {
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
    if (now - this.lastPruneAt >= 3600_000) {
      this.lastPruneAt = now;
      await this.pruneIdleConsumers();
    }
    const entries = await this.read(">", blockMs);
    handled += await this.handle(entries);
    return handled;
  }

  /**
   * Removes consumers of the group that have nothing pending and were idle for `idleMs` (workers that
   * restarted under a new name), so XINFO stays readable. Returns the names removed.
   */
  async pruneIdleConsumers(idleMs = 24 * 3600 * 1000): Promise<string[]> {
    const list = (await this.redis.xinfo("CONSUMERS", this.stream, USAGE_CONSUMER_GROUP)) as unknown[][];
    const removed: string[] = [];
    for (const flat of list) {
      const info: Record<string, unknown> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) info[String(flat[i])] = flat[i + 1];
      const name = String(info.name);
      if (name === this.opts.consumerName) continue;
      if (Number(info.pending) === 0 && Number(info.idle) >= idleMs) {
        await this.redis.xgroup("DELCONSUMER", this.stream, USAGE_CONSUMER_GROUP, name);
        removed.push(name);
      }
    }
    return removed;
  }

  /** XAUTOCLAIM every entry idle for claimIdleMs (its consumer died) and process it. */
  async claimStale(): Promise<number> {
    let cursor = "0-0";
    let handled = 0;
    do {
      const res = (await this.redis.xautoclaim(
        this.stream,
        USAGE_CONSUMER_GROUP,
        this.opts.consumerName,
        this.opts.claimIdleMs,
        cursor,
        "COUNT",
        this.opts.batch,
      )) as [string, (StreamEntry | null)[], string[]?];
      cursor = res[0];
      const entries = res[1].filter((e): e is StreamEntry => e !== null && Array.isArray(e[1]));
      if (entries.length > 0) this.log.info({ count: entries.length }, "claimed stale usage entries");
      handled += await this.handle(entries);
    } while (cursor !== "0-0" && !this.stopping);
    return handled;
  }

  private async read(id: string, blockMs: number): Promise<StreamEntry[]> {
    const args: (string | number)[] = ["GROUP", USAGE_CONSUMER_GROUP, this.opts.consumerName];
    args.push("COUNT", this.opts.batch);
    if (id === ">" && blockMs > 0) args.push("BLOCK", blockMs);
    args.push("STREAMS", this.stream, id);
    if (id === ">" && blockMs > 0 && this.stopping) return [];
    this.blocking = blockMs > 0;
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
      let raw: string | undefined;
      for (let i = 0; i + 1 < fields.length; i += 2)
        if (fields[i] === USAGE_STREAM_FIELD) raw = fields[i + 1];
      let parsed: ReturnType<typeof UsageBatchEnvelopeSchema.safeParse> | undefined;
      try {
        parsed = raw === undefined ? undefined : UsageBatchEnvelopeSchema.safeParse(JSON.parse(raw));
      } catch {
        parsed = undefined;
      }
      if (!parsed?.success) {
        // Poison entry: it can never be applied; acknowledge so it does not block the group.
        this.stats.invalid++;
        this.log.warn({ entryId: id, error: parsed?.error?.message }, "invalid usage stream entry skipped");
        await this.redis.xack(this.stream, USAGE_CONSUMER_GROUP, id);
        continue;
      }
      const rows: UsageRow[] = [];
      for (const r of parsed.data.rows) {
        const row = UsageRowSchema.safeParse(r);
        if (
          row.success &&
          (row.data.workspaceId === null || UUID_RE.test(row.data.workspaceId)) &&
          (row.data.appId === null || UUID_RE.test(row.data.appId))
        ) {
          rows.push(row.data);
        } else {
          this.stats.invalidRows++;
        }
      }
      if (rows.length < parsed.data.rows.length) {
        this.log.warn(
          { entryId: id, skipped: parsed.data.rows.length - rows.length },
          "usage rows with a bad shape or non-UUID ids skipped",
        );
      }
      const applied = await applyBatch(this.ds.manager, parsed.data.batchId, id, rows);
      if (applied) this.stats.applied++;
      else this.stats.duplicates++;
      if (this.opts.beforeAck?.(id) === false) continue;
      await this.redis.xack(this.stream, USAGE_CONSUMER_GROUP, id);
    }
    return entries.length;
  }
}
