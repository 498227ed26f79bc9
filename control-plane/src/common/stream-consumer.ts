import type { Logger } from "../../../shared/src/log/logger";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { deadLetteredEntries } from "./metrics";

export type StreamEntry = [id: string, fields: string[]];

/**
 * Processes one entry. Resolves true when the entry is done (it is then acknowledged), false to leave it
 * pending and go on (it is read again after the next failure or restart, or claimed by another consumer).
 * Throwing leaves it pending too and ends the round (see `pollOnce`).
 */
export type StreamEntryHandler = (id: string, fields: string[]) => Promise<boolean>;

export interface StreamConsumerOptions {
  /** The stream's key (from RedisNames). */
  stream: string;
  group: string;
  consumerName: string;
  /** How long a read waits for new entries in the background loop. */
  blockMs: number;
  /** Entries per XREADGROUP / XAUTOCLAIM. */
  batch: number;
  /** Entries pending longer than this belong to a dead consumer and are claimed. */
  claimIdleMs: number;
  /** What the stream carries, for log lines ("usage", "request-log"). */
  label: string;
  /**
   * How often consumers with nothing pending that went idle `pruneIdleMs` ago (workers that restarted
   * under a new name) are removed, so the group's consumer list does not grow with every restart. Default 1 h.
   */
  pruneIntervalMs?: number;
  /** Idle time after which a consumer with nothing pending is removed (default 24 h). */
  pruneIdleMs?: number;
  /** Pause after a failed round (Redis or the handler's store away) before the next one. */
  retryPauseMs?: number;
  handle: StreamEntryHandler;
  /**
   * Failures of one entry (while `probe` says the store works) after which it is set aside to
   * `deadLetterStream` and acknowledged, so that the entries after it go on (default 5).
   */
  maxAttempts?: number;
  /** Where such entries go (RedisNames.deadLetterStream; default `<stream>:dead`). */
  deadLetterStream?: string;
  /** Approximate MAXLEN of the dead-letter stream (default 10,000 entries). */
  deadLetterMaxLen?: number;
  /**
   * Wait before an entry that failed is tried again: retryPauseMs x 2^(failures - 1), at least this
   * (default: retryPauseMs, 1 s), so that N attempts span a few seconds, not N reads in a row.
   */
  attemptBackoffMs?: number;
  /**
   * Resolves when the handler's store works (the request log's and usage's: `SELECT 1`). A handler that
   * throws while the probe also fails is the store's failure, not the entry's: the round ends as before
   * and nothing is counted against the entry, so a Postgres outage never sends good entries to the
   * dead-letter stream. Without a probe every failure counts against its entry.
   */
  probe?: () => Promise<unknown>;
}

/**
 * Thrown by a handler to end the round at once: the entry stays pending and nothing is counted against
 * it, as when the store is away (the ingestors' test hooks throw it to simulate a crash before XACK).
 */
export class HaltRound extends Error {
  constructor(cause: unknown) {
    super(String((cause as Error)?.message ?? cause), { cause });
    this.name = "HaltRound";
  }
}

/** Default attempts of one entry before it is set aside. */
export const DEFAULT_MAX_ATTEMPTS = 5;
const DEFAULT_DEAD_LETTER_MAXLEN = 10_000;
/** Entries whose failures are remembered at once (each also pending in Redis: a handful in practice). */
const MAX_TRACKED_FAILURES = 10_000;
/** Longest error message copied into a dead-letter entry. */
const MAX_ERROR_CHARS = 1_000;

/**
 * The JSON value of an entry's field (the last one of that name), or undefined when the field is missing or
 * not JSON: the caller's schema then rejects the entry as poison.
 */
export function entryJson(fields: string[], name: string): unknown {
  let raw: string | undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) raw = fields[i + 1];
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/**
 * Stale entries are looked for every claimIdleMs, but at least this often: an entry is then claimed within
 * this long of turning stale, not up to twice claimIdleMs after it was read.
 */
const MAX_CLAIM_INTERVAL_MS = 10_000;
const PRUNE_INTERVAL_MS = 3600 * 1000;
const PRUNE_IDLE_MS = 24 * 3600 * 1000;

/**
 * One consumer of a Redis stream's consumer group, delivering each entry to a handler and XACKing it after
 * the handler succeeds: at-least-once delivery, so handlers must be idempotent. On start (and after a
 * failed round) it first re-reads its own pending entries: a restart under the same consumer name resumes
 * what it had read but not acknowledged. Entries left pending by dead consumers are taken over after
 * `claimIdleMs` (XAUTOCLAIM). A group that vanished (Redis restarted empty) is recreated at the start of
 * the stream, so entries added since are read too.
 *
 * No single entry can stop the group: an entry whose handler throws while the store works (see `probe`)
 * stays pending and is tried again with a backoff while the entries after it go on; after `maxAttempts`
 * failures it is copied to the dead-letter stream, acknowledged, counted
 * (rpcgw_worker_stream_dead_letters_total) and logged.
 */
export class StreamConsumer {
  private running: Promise<void> | undefined;
  private stopping = false;
  private blocking = false;
  private readPendingFirst = true;
  /** An entry failed this round and stays pending: read the pending entries again next round. */
  private retryPending = false;
  private lastClaimAt = 0;
  private lastPruneAt = 0;
  /** Entry id -> failures counted against it and when it may be tried again (epoch ms). */
  private readonly failures = new Map<string, { count: number; retryAt: number }>();
  /** Entries set aside since start (also in rpcgw_worker_stream_dead_letters_total). */
  deadLettered = 0;

  constructor(
    /** A dedicated connection: XREADGROUP BLOCK holds it, and stop() may disconnect it. */
    private readonly redis: RedisClient,
    private readonly log: Logger,
    private readonly opts: StreamConsumerOptions,
  ) {}

  /**
   * Creates the consumer group (at the start of the stream) unless it exists. `conn` defaults to the
   * consumer's own connection, which may sit in a blocking read for up to `blockMs`: callers in a hurry
   * pass another one.
   */
  async ensureGroup(conn: RedisClient = this.redis): Promise<void> {
    try {
      await conn.xgroup("CREATE", this.opts.stream, this.opts.group, "0", "MKSTREAM");
    } catch (err) {
      if (!String((err as Error).message).includes("BUSYGROUP")) throw err;
    }
  }

  /** Starts the read loop in the background. */
  async start(): Promise<void> {
    await this.ensureGroup();
    this.running = this.loop();
  }

  /**
   * Stops the loop: a blocked read is cut short, a batch being handled is finished first. Entries read
   * but not acknowledged stay pending.
   */
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
          // producers added since are read too. Retried after the pause below if Redis is down again.
          this.log.warn(`${this.opts.label} consumer group missing (Redis restarted empty?): recreating it`);
          if (
            await this.ensureGroup().then(
              () => true,
              () => false,
            )
          )
            continue;
        }
        this.log.error({ err }, `${this.opts.label} ingestion failed; retrying`);
        await new Promise((r) => setTimeout(r, this.opts.retryPauseMs ?? 1_000));
      }
    }
  }

  /**
   * One round: own pending entries (after a start or a failure), stale entries of dead consumers, then new
   * entries (waiting up to `blockMs`; 0 = no wait). Returns the number of entries handled. A handler that
   * throws ends the round with its error; what was read and not acknowledged is read first next round.
   */
  async pollOnce(blockMs = 0): Promise<number> {
    try {
      return await this.round(blockMs);
    } catch (err) {
      this.readPendingFirst = true;
      throw err;
    }
  }

  private async round(blockMs: number): Promise<number> {
    let handled = 0;
    if (this.readPendingFirst) {
      // From past the last one read, not from 0 again: an entry the handler leaves pending (or one trimmed
      // from the stream) would otherwise come back in every read of this loop.
      let after = "0";
      for (;;) {
        const entries = await this.read(after, 0);
        if (entries.length === 0) break;
        handled += await this.handle(entries);
        after = entries[entries.length - 1]![0];
      }
      this.readPendingFirst = false;
    }
    const now = Date.now();
    if (now - this.lastClaimAt >= Math.min(this.opts.claimIdleMs, MAX_CLAIM_INTERVAL_MS)) {
      this.lastClaimAt = now;
      handled += await this.claimStale();
    }
    if (now - this.lastPruneAt >= (this.opts.pruneIntervalMs ?? PRUNE_INTERVAL_MS)) {
      this.lastPruneAt = now;
      await this.pruneIdleConsumers();
    }
    handled += await this.handle(await this.read(">", blockMs));
    if (this.retryPending) {
      // A failed entry stays pending in this consumer: the next round reads it again (after its backoff).
      this.retryPending = false;
      this.readPendingFirst = true;
    }
    return handled;
  }

  /**
   * Removes consumers of the group that have nothing pending and were idle for `idleMs` (workers that
   * restarted under a new name), so XINFO stays readable. Returns the names removed.
   */
  async pruneIdleConsumers(idleMs = this.opts.pruneIdleMs ?? PRUNE_IDLE_MS): Promise<string[]> {
    const list = (await this.redis.xinfo("CONSUMERS", this.opts.stream, this.opts.group)) as unknown[][];
    const removed: string[] = [];
    for (const flat of list) {
      const info: Record<string, unknown> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) info[String(flat[i])] = flat[i + 1];
      const name = String(info.name);
      if (name === this.opts.consumerName) continue;
      if (Number(info.pending) === 0 && Number(info.idle) >= idleMs) {
        await this.redis.xgroup("DELCONSUMER", this.opts.stream, this.opts.group, name);
        removed.push(name);
      }
    }
    return removed;
  }

  /** XAUTOCLAIMs every entry idle for claimIdleMs (its consumer died) and handles it. */
  async claimStale(): Promise<number> {
    let cursor = "0-0";
    let handled = 0;
    do {
      const res = (await this.redis.xautoclaim(
        this.opts.stream,
        this.opts.group,
        this.opts.consumerName,
        this.opts.claimIdleMs,
        cursor,
        "COUNT",
        this.opts.batch,
      )) as [string, (StreamEntry | null)[], string[]?];
      cursor = res[0];
      // Entries trimmed from the stream while pending come back as null (Redis 6.2) or not at all (7).
      const entries = res[1].filter((e): e is StreamEntry => e !== null);
      if (entries.length > 0) {
        this.log.info({ count: entries.length }, `claimed stale ${this.opts.label} entries`);
      }
      handled += await this.handle(entries);
    } while (cursor !== "0-0" && !this.stopping);
    return handled;
  }

  private async read(id: string, blockMs: number): Promise<StreamEntry[]> {
    const block = id === ">" && blockMs > 0;
    // stop() only disconnects a read already blocking: one about to start would otherwise wait it out.
    if (block && this.stopping) return [];
    const args: (string | number)[] = ["GROUP", this.opts.group, this.opts.consumerName];
    args.push("COUNT", this.opts.batch);
    if (block) args.push("BLOCK", blockMs);
    args.push("STREAMS", this.opts.stream, id);
    this.blocking = block;
    let res: [string, StreamEntry[]][] | null;
    try {
      res = (await (this.redis.xreadgroup as (...a: (string | number)[]) => Promise<unknown>)(...args)) as
        | [string, StreamEntry[]][]
        | null;
    } finally {
      this.blocking = false;
    }
    return res?.[0]?.[1] ?? [];
  }

  /**
   * Returns the number of entries handed over (trimmed ones are not, nor failed ones still waiting for
   * their next attempt). An entry whose handler throws while the store works is left pending and tried
   * again after a backoff; at its `maxAttempts`-th failure it is set aside (deadLetter). A throw while the
   * store is away (probe fails) ends the round, as any Redis error does.
   */
  private async handle(entries: StreamEntry[]): Promise<number> {
    let handled = 0;
    for (const [id, fields] of entries) {
      // A pending entry trimmed from the stream comes back with null fields: nothing to hand over.
      if (!Array.isArray(fields)) {
        this.failures.delete(id);
        continue;
      }
      const failed = this.failures.get(id);
      if (failed !== undefined && failed.retryAt > Date.now()) {
        this.retryPending = true;
        continue;
      }
      handled++;
      let done: boolean;
      try {
        done = await this.opts.handle(id, fields);
      } catch (err) {
        if (err instanceof HaltRound || !(await this.storeWorks())) throw err;
        await this.entryFailed(id, fields, err);
        continue;
      }
      this.failures.delete(id);
      if (done) await this.redis.xack(this.opts.stream, this.opts.group, id);
    }
    return handled;
  }

  private async storeWorks(): Promise<boolean> {
    if (this.opts.probe === undefined) return true;
    try {
      await this.opts.probe();
      return true;
    } catch {
      return false;
    }
  }

  /** Counts a failure of `id` that is the entry's own; sets it aside at the last attempt. */
  private async entryFailed(id: string, fields: string[], err: unknown): Promise<void> {
    const max = this.opts.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
    const count = (this.failures.get(id)?.count ?? 0) + 1;
    const message = String((err as Error)?.message ?? err).slice(0, MAX_ERROR_CHARS);
    if (count >= max) {
      await this.deadLetter(id, fields, message, count);
      this.failures.delete(id);
      return;
    }
    if (!this.failures.has(id) && this.failures.size >= MAX_TRACKED_FAILURES) {
      // Forgetting a count only costs that entry more attempts.
      const oldest = this.failures.keys().next();
      if (!oldest.done) this.failures.delete(oldest.value);
    }
    const base = this.opts.attemptBackoffMs ?? this.opts.retryPauseMs ?? 1_000;
    this.failures.set(id, { count, retryAt: Date.now() + base * 2 ** (count - 1) });
    this.retryPending = true;
    this.log.warn(
      { entryId: id, attempt: count, maxAttempts: max, err: message },
      `${this.opts.label} stream entry failed; tried again later, the entries after it go on`,
    );
  }

  /**
   * Copies the entry to the dead-letter stream (its fields, then `deadEntryId`, `deadError`,
   * `deadAttempts`, `deadAt`), then acknowledges it. A crash between the two copies it again on the next
   * attempt: the dead-letter stream is at-least-once, as the stream itself.
   */
  private async deadLetter(id: string, fields: string[], message: string, attempts: number): Promise<void> {
    const dead = this.opts.deadLetterStream ?? `${this.opts.stream}:dead`;
    await this.redis.xadd(
      dead,
      "MAXLEN",
      "~",
      this.opts.deadLetterMaxLen ?? DEFAULT_DEAD_LETTER_MAXLEN,
      "*",
      ...fields,
      "deadEntryId",
      id,
      "deadError",
      message,
      "deadAttempts",
      String(attempts),
      "deadAt",
      new Date().toISOString(),
    );
    await this.redis.xack(this.opts.stream, this.opts.group, id);
    this.deadLettered++;
    deadLetteredEntries.inc({ stream: this.opts.label });
    this.log.error(
      { entryId: id, attempts, err: message, deadLetterStream: dead },
      `${this.opts.label} stream entry set aside to the dead-letter stream after ${attempts} failed attempts`,
    );
  }
}
