import { LRUCache } from "lru-cache";
import type { CallResult, Reply } from "../upstream/reply";

/** Cached answers to single calls, bounded by bytes, plus sharing of identical in-flight calls. */
export interface ResponseCache {
  readonly enabled: boolean;
  get(key: string): Reply | undefined;
  set(key: string, reply: Reply, ttlMs: number | undefined): void;
  /** Runs `load` unless an identical call (same key) is already in flight, whose result is shared. */
  merge(key: string, load: () => Promise<CallResult>): Promise<CallResult>;
  clear(): void;
}

/** Rough per-entry overhead (object headers, LRU bookkeeping) added to the text sizes. */
const ENTRY_OVERHEAD = 96;

export class LruResponseCache implements ResponseCache {
  readonly enabled = true;
  private readonly lru: LRUCache<string, Reply>;
  private readonly inFlight = new Map<string, Promise<CallResult>>();

  constructor(maxBytes: number) {
    this.lru = new LRUCache<string, Reply>({
      maxSize: maxBytes,
      maxEntrySize: Math.max(1024, Math.floor(maxBytes / 8)),
      sizeCalculation: (v, k) => v.tail.length + k.length + ENTRY_OVERHEAD,
    });
  }

  get(key: string): Reply | undefined {
    return this.lru.get(key);
  }

  set(key: string, reply: Reply, ttlMs: number | undefined): void {
    this.lru.set(key, reply, ttlMs === undefined ? undefined : { ttl: ttlMs });
  }

  merge(key: string, load: () => Promise<CallResult>): Promise<CallResult> {
    const existing = this.inFlight.get(key);
    if (existing !== undefined) return existing;
    const p = load().finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, p);
    return p;
  }

  clear(): void {
    this.lru.clear();
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
  clear(): void {}
}
