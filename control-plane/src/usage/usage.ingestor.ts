import { DataSource } from "typeorm";
import { Logger } from "../../../shared/src/log/logger";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { safeText } from "../../../shared/src/text/safe-text";
import {
  USAGE_CONSUMER_GROUP,
  USAGE_STREAM_FIELD,
  UsageBatchEnvelopeSchema,
  UsageRow,
  UsageRowSchema,
  UUID_RE,
} from "../../../shared/src/usage/contract";
import { entryJson, HaltRound, StreamConsumer } from "../common/stream-consumer";
import { applyBatch } from "./usage.sql";

export interface UsageIngestorOptions {
  consumerName: string;
  blockMs: number;
  batch: number;
  claimIdleMs: number;
  /** Failures of one entry (Postgres answering) before it is set aside to the dead-letter stream (default 5). */
  maxAttempts?: number;
  /** First wait before a failed entry is tried again; doubles (default 1 s). */
  retryBaseMs?: number;
  /** Removal of idle consumers (StreamConsumerOptions; defaults 1 h and 24 h). */
  pruneIntervalMs?: number;
  pruneIdleMs?: number;
  /**
   * Test hook, called after COMMIT and before XACK: throwing simulates a crash in between; returning false
   * skips the XACK (as if the acknowledgement was lost) and goes on.
   */
  beforeAck?: (entryId: string) => boolean | undefined;
}

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
  /** Reading, claiming and acknowledging; this class only applies entries. */
  readonly consumer: StreamConsumer;

  constructor(
    private readonly ds: DataSource,
    /** A dedicated connection: XREADGROUP BLOCK holds it. */
    redis: RedisClient,
    names: RedisNames,
    private readonly log: Logger,
    private readonly opts: UsageIngestorOptions,
  ) {
    this.consumer = new StreamConsumer(redis, log, {
      stream: names.usageStream(),
      group: USAGE_CONSUMER_GROUP,
      consumerName: opts.consumerName,
      blockMs: opts.blockMs,
      batch: opts.batch,
      claimIdleMs: opts.claimIdleMs,
      label: "usage",
      pruneIntervalMs: opts.pruneIntervalMs,
      pruneIdleMs: opts.pruneIdleMs,
      maxAttempts: opts.maxAttempts,
      attemptBackoffMs: opts.retryBaseMs,
      deadLetterStream: names.deadLetterStream(names.usageStream()),
      // A failure while Postgres itself is away is not the entry's fault (see StreamConsumerOptions.probe).
      probe: () => this.ds.query("SELECT 1"),
      handle: (id, fields) => this.apply(id, fields),
    });
  }

  /** Applies one entry; false: leave it unacknowledged (the test hook said so). */
  private async apply(id: string, fields: string[]): Promise<boolean> {
    const parsed = UsageBatchEnvelopeSchema.safeParse(entryJson(fields, USAGE_STREAM_FIELD));
    if (!parsed.success) {
      // Poison entry: it can never be applied; acknowledge so it does not block the group.
      this.stats.invalid++;
      this.log.warn({ entryId: id, error: parsed.error.message }, "invalid usage stream entry skipped");
      return true;
    }
    const rows: UsageRow[] = [];
    for (const r of parsed.data.rows) {
      const row = UsageRowSchema.safeParse(r);
      if (
        row.success &&
        (row.data.workspaceId === null || UUID_RE.test(row.data.workspaceId)) &&
        (row.data.appId === null || UUID_RE.test(row.data.appId)) &&
        // Summed into bigint columns: a row's units must stay exact in a JS number.
        (row.data.computeUnits ?? 0) <= Number.MAX_SAFE_INTEGER
      ) {
        // The data plane only writes bounded ASCII names (MethodBounder); an entry from anything else must
        // not carry what Postgres refuses (U+0000) into the rollups either.
        row.data.method = safeText(row.data.method, 128) || "other";
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
    let ack: boolean | undefined;
    try {
      ack = this.opts.beforeAck?.(id);
    } catch (err) {
      throw new HaltRound(err); // a simulated crash: the round ends there
    }
    return ack !== false;
  }
}
