import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import { type CallResult, type Reply, ReplyKind } from "../upstream/reply";
import { Doorkeeper } from "./doorkeeper";
import { MergedLoads } from "./merged-loads";
import type { CacheAdmission, ResponseCache } from "./response-cache";
import { type Claim, SharedFlights } from "./shared-flights";
import { allocateStore, keyHash, SharedStore } from "./shared-store";

/** Doorkeeper fingerprints, as the per-thread cache has (response-cache.ts). */
const DOORKEEPER_SLOTS = 1 << 18;

/** The shared memory of one process's response cache, made by the main thread and given to every serving thread. */
export interface SharedCacheMemory {
  readonly store: readonly SharedArrayBuffer[];
  readonly flights: SharedArrayBuffer;
  /** With CACHE_ADMISSION=second. */
  readonly doorkeeper: SharedArrayBuffer | undefined;
}

export function allocateSharedCache(maxBytes: number, admission: CacheAdmission): SharedCacheMemory {
  return {
    store: allocateStore(maxBytes),
    flights: SharedFlights.allocate(),
    doorkeeper: admission === "second" ? Doorkeeper.allocate(DOORKEEPER_SLOTS) : undefined,
  };
}

export interface SharedCacheOptions {
  /**
   * How long a call waits for the same call in flight on another thread before it sends its own (that
   * thread stuck or gone): the longest an upstream call can take.
   */
  readonly mergeWaitMs: number;
  /** Epoch milliseconds, for TTLs (tests pass a fake clock). */
  readonly now?: () => number;
}

/**
 * Answers this thread read from the store lately, kept as the Reply it answered with: a hit on one of
 * them while its entry is still live (SharedStore.stillLive, a few atomic loads) copies nothing out of
 * shared memory and allocates nothing. Bounded per thread by KEPT_MAX_ENTRIES and a sixteenth of the
 * store (at most KEPT_MAX_BYTES) of answer text. Once full, nothing more is kept (a read then copies out of
 * the store, as a first read does) until the next KEPT_REFRESH_MS, when all are forgotten and the answers
 * read since are kept: clearing at each overflow would make a working set larger than the bound churn the
 * map on every read.
 */
const KEPT_MAX_ENTRIES = 10_000;
const KEPT_MAX_BYTES = 8 << 20;
const KEPT_REFRESH_MS = 10_000;

interface Kept {
  readonly reply: Reply;
  readonly shard: number;
  readonly offset: number;
  readonly stamp: number;
  readonly expires: number;
  readonly hash: number;
}

/** A call this thread leads in the shared in-flight table, until its answer is stored or known not kept. */
interface Lead {
  readonly key: string;
  readonly slot: number;
}

/**
 * The response cache of a process with several serving threads (DATA_PLANE_THREADS > 1): one store in
 * shared memory (shared-store.ts) for every thread, bounded by CACHE_MAX_BYTES as a whole, one doorkeeper
 * (a key's second request admits it on any thread) and an in-flight merge across threads
 * (shared-flights.ts): a call for a key another thread is fetching waits for that answer, then reads it
 * from the store. Answers stored are results only (what forward.ts `store` keeps), so a hit is a
 * `Result` with category Success.
 *
 * The leader of a call keeps its in-flight slot until the caller stores the answer (`set`, just after the
 * call settles) and releases it then, so a waiting thread finds the answer in the store; an answer not
 * kept (an error, a null) releases it on the next turn of the event loop, and the waiting threads then
 * send their own call. Within the thread, identical calls share one promise, as in LruResponseCache.
 */
export class SharedResponseCache implements ResponseCache {
  readonly enabled = true;
  private readonly store: SharedStore;
  private readonly flights: SharedFlights;
  private readonly doorkeeper: Doorkeeper | undefined;
  private readonly mergeWaitMs: number;
  private readonly loads = new MergedLoads();
  private readonly leading = new Map<string, Lead>();
  private readonly kept = new Map<string, Kept>();
  private keptBytes = 0;
  private keptSinceMs = performance.now();
  private readonly keptMaxBytes: number;
  private releases: Lead[] = [];
  private readonly flushReleases = () => {
    const due = this.releases;
    this.releases = [];
    for (const lead of due) this.release(lead);
  };

  constructor(memory: SharedCacheMemory, options: SharedCacheOptions) {
    this.store = new SharedStore(memory.store, { now: options.now });
    this.flights = new SharedFlights(memory.flights);
    this.doorkeeper = memory.doorkeeper === undefined ? undefined : new Doorkeeper(memory.doorkeeper);
    this.mergeWaitMs = options.mergeWaitMs;
    this.keptMaxBytes = Math.min(KEPT_MAX_BYTES, Math.floor(this.store.capacityBytes / 16));
  }

  get(key: string): Reply | undefined {
    const store = this.store;
    const k = this.kept.get(key);
    if (k !== undefined && store.stillLive(k.shard, k.offset, k.stamp, k.expires, k.hash)) return k.reply;
    const tail = store.get(key);
    if (tail === undefined) {
      if (k !== undefined) {
        this.kept.delete(key);
        this.keptBytes -= k.reply.tail.length;
      }
      return undefined;
    }
    const reply = resultReply(tail);
    if (k !== undefined) this.keptBytes -= k.reply.tail.length;
    if (this.kept.size >= KEPT_MAX_ENTRIES || this.keptBytes + tail.length > this.keptMaxBytes) {
      const now = performance.now();
      if (now - this.keptSinceMs < KEPT_REFRESH_MS) {
        if (k !== undefined) this.kept.delete(key);
        return reply;
      }
      this.kept.clear();
      this.keptBytes = 0;
      this.keptSinceMs = now;
    }
    if (tail.length <= this.keptMaxBytes) {
      this.kept.set(key, {
        reply,
        shard: store.lastShard,
        offset: store.lastOffset,
        stamp: store.lastStamp,
        expires: store.lastExpires,
        hash: store.lastHash,
      });
      this.keptBytes += tail.length;
    } else if (k !== undefined) {
      this.kept.delete(key);
    }
    return reply;
  }

  /**
   * Stores a result under `key`, unless this is the first time the doorkeeper sees the key and no other
   * thread waits for it (a call other threads asked for at once was asked for more than once).
   */
  set(key: string, reply: Reply, ttlMs: number | undefined): void {
    const lead = this.leading.get(key);
    if (reply.kind === ReplyKind.Result) {
      const followed = lead !== undefined && this.flights.followed(lead.slot);
      if (followed || this.doorkeeper === undefined || this.store.has(key) || this.doorkeeper.seen(key))
        this.store.set(key, reply.tail, ttlMs);
    }
    if (lead !== undefined) this.release(lead);
  }

  merge(key: string, load: () => Promise<CallResult>, traceparent?: string): Promise<CallResult> {
    return this.loads.merge(key, () => this.acrossThreads(key, load), traceparent);
  }

  joining(key: string): string | undefined {
    const here = this.loads.joining(key);
    if (here !== undefined) return here;
    // In flight on another thread: merged, with no span of this thread's to link to.
    return this.flights.inFlight(keyHash(key)) ? "" : undefined;
  }

  dropTimed(match: (key: string) => boolean): number {
    return this.store.dropTimed(match);
  }

  clear(): void {
    this.kept.clear();
    this.keptBytes = 0;
    this.store.clear();
    this.doorkeeper?.clear();
  }

  get sizeBytes(): number {
    return this.store.usedBytes;
  }

  /** `load` as the leader of `key` in the process, or the answer of the thread that leads it. */
  private acrossThreads(key: string, load: () => Promise<CallResult>): Promise<CallResult> {
    const claim = this.flights.claim(keyHash(key));
    if (!claim.lead) return this.follow(key, claim, load);
    if (claim.slot < 0) return load();
    const lead: Lead = { key, slot: claim.slot };
    this.leading.set(key, lead);
    return load().then(
      (r) => {
        // Released by `set` when the caller stores it (this turn), else on the next one.
        if (this.releases.length === 0) setImmediate(this.flushReleases);
        this.releases.push(lead);
        return r;
      },
      (err: unknown) => {
        this.release(lead);
        throw err;
      },
    );
  }

  private async follow(key: string, claim: Claim, load: () => Promise<CallResult>): Promise<CallResult> {
    await this.flights.wait(claim, this.mergeWaitMs);
    const tail = this.store.get(key);
    return tail === undefined ? load() : { ok: true, reply: resultReply(tail) };
  }

  private release(lead: Lead): void {
    if (this.leading.get(lead.key) !== lead) return;
    this.leading.delete(lead.key);
    this.flights.release(lead.slot);
  }
}

function resultReply(tail: string): Reply {
  return { tail, kind: ReplyKind.Result, category: ErrorCategory.Success };
}
