import { LRUCache } from "lru-cache";
import type { CallResult, Reply } from "../upstream/reply";
import { Doorkeeper } from "./doorkeeper";
import { MergedLoads } from "./merged-loads";

/** Cached answers to single calls, bounded by bytes, plus sharing of identical in-flight calls. */
export interface ResponseCache {
  readonly enabled: boolean;
  get(key: string): Reply | undefined;
  set(key: string, reply: Reply, ttlMs: number | undefined): void;
  /**
   * Runs `load` unless an identical call (same key) is already in flight, whose result is shared.
   * `traceparent`: a sampled call's upstream span (data-plane/src/telemetry), kept while it is in flight
   * so that a sampled call joining it can link to it (`joining`).
   */
  merge(key: string, load: () => Promise<CallResult>, traceparent?: string): Promise<CallResult>;
  /**
   * For a sampled call about to `merge`: undefined when no identical call is in flight (it will lead),
   * else the traceparent the one in flight was merged with ("" = none: not sampled).
   */
  joining(key: string): string | undefined;
  /**
   * Drops the live entries that were set with a TTL (the per-block ones) and whose key `match`es; returns
   * how many. Walks about one TTL's worth of keys: for rare events (a reorg), not per request.
   */
  dropTimed(match: (key: string) => boolean): number;
  clear(): void;
}

/** Rough per-entry overhead (object headers, LRU bookkeeping) added to the text sizes. */
const ENTRY_OVERHEAD = 96;

/** Doorkeeper fingerprints (4 bytes each, 1 MiB): "recently" = within about this many distinct keys. */
const DOORKEEPER_SLOTS = 1 << 18;

/**
 * When an answer is stored: on the `second` request for its key (within the doorkeeper's memory; the
 * default, see doorkeeper.ts) or on the `first`.
 */
export type CacheAdmission = "first" | "second";

export class LruResponseCache implements ResponseCache {
  readonly enabled = true;
  private readonly lru: LRUCache<string, Reply>;
  private readonly loads = new MergedLoads();
  /**
   * Keys set with a TTL, in the order they expire (one TTL per call site, so insertion order), as
   * parallel arrays from `expiryHead`. lru-cache only drops an expired entry when it is read or evicted
   * by size, so unique per-block answers (eth_call with fresh params) would pile up to CACHE_MAX_BYTES
   * (and two to three times that in heap), a large old generation for the GC to walk. Each set() drops
   * the entries whose TTL has run out, so the cache holds about one TTL's worth of them, and the GC has
   * less to walk under a cache-miss load. Entries are never served stale either way; only memory
   * changes.
   */
  private expiryKeys: string[] = [];
  private expiryReplies: Reply[] = [];
  private expiryAtMs: number[] = [];
  private expiryHead = 0;

  private readonly doorkeeper: Doorkeeper | undefined;

  constructor(maxBytes: number, admission: CacheAdmission = "second") {
    this.doorkeeper = admission === "second" ? new Doorkeeper(DOORKEEPER_SLOTS) : undefined;
    this.lru = new LRUCache<string, Reply>({
      maxSize: maxBytes,
      maxEntrySize: Math.max(1024, Math.floor(maxBytes / 8)),
      sizeCalculation: (v, k) => v.tail.length + k.length + ENTRY_OVERHEAD,
    });
  }

  get(key: string): Reply | undefined {
    return this.lru.get(key);
  }

  /** Stores `reply` under `key`, unless this is the first time the doorkeeper sees the key. */
  set(key: string, reply: Reply, ttlMs: number | undefined): void {
    if (this.doorkeeper !== undefined && !this.lru.has(key) && !this.doorkeeper.seen(key)) return;
    const now = performance.now();
    this.dropExpired(now);
    this.lru.set(key, reply, ttlMs === undefined ? undefined : { ttl: ttlMs });
    if (ttlMs !== undefined) {
      this.expiryKeys.push(key);
      this.expiryReplies.push(reply);
      this.expiryAtMs.push(now + ttlMs);
    }
  }

  private dropExpired(now: number): void {
    const keys = this.expiryKeys;
    const at = this.expiryAtMs;
    let i = this.expiryHead;
    // TTLs differ only between rare configuration paths; an entry queued behind a longer one waits for it.
    while (i < keys.length && at[i]! <= now) {
      const key = keys[i]!;
      // Dropped only while it still holds the reply queued here (set again since: a newer entry, newer
      // TTL). lru-cache stamped it no later than `at[i] - ttl`, so it is expired there too.
      if (this.lru.peek(key, { allowStale: true }) === this.expiryReplies[i]) this.lru.delete(key);
      i++;
    }
    if (i === keys.length) {
      this.resetExpiry();
    } else if (i > 4096 && i * 2 > keys.length) {
      this.expiryKeys = keys.slice(i);
      this.expiryReplies = this.expiryReplies.slice(i);
      this.expiryAtMs = at.slice(i);
      this.expiryHead = 0;
    } else {
      this.expiryHead = i;
    }
  }

  dropTimed(match: (key: string) => boolean): number {
    const keys = this.expiryKeys;
    let dropped = 0;
    // Every live TTL'd entry is queued from expiryHead on (dropExpired removes only expired ones); a key
    // set twice is queued twice, and the second delete finds nothing.
    for (let i = this.expiryHead; i < keys.length; i++) {
      const key = keys[i]!;
      if (match(key) && this.lru.delete(key)) dropped++;
    }
    return dropped;
  }

  merge(key: string, load: () => Promise<CallResult>, traceparent?: string): Promise<CallResult> {
    return this.loads.merge(key, load, traceparent);
  }

  joining(key: string): string | undefined {
    return this.loads.joining(key);
  }

  clear(): void {
    this.lru.clear();
    this.doorkeeper?.clear();
    this.resetExpiry();
  }

  private resetExpiry(): void {
    this.expiryKeys = [];
    this.expiryReplies = [];
    this.expiryAtMs = [];
    this.expiryHead = 0;
  }

  get sizeBytes(): number {
    return this.lru.calculatedSize;
  }
}

export class NoopResponseCache implements ResponseCache {
  readonly enabled = false;
  get(): Reply | undefined {
    return undefined;
  }
  set(): void {}
  merge(_key: string, load: () => Promise<CallResult>): Promise<CallResult> {
    return load();
  }
  joining(): string | undefined {
    return undefined;
  }
  dropTimed(): number {
    return 0;
  }
  clear(): void {}
}
