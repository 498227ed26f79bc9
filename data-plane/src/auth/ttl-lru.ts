/**
 * A least-recently-used map with expiry, on one `Map` (insertion order = recency: a hit moves the entry to
 * the end, eviction takes the first). Unlike lru-cache, it allocates nothing up front: lru-cache with
 * `max` and a TTL preallocates slot arrays for `max` entries per cache, resident whether or not the
 * slots are used. The expiry (epoch ms) is read from the value itself, so an entry costs one Map slot and
 * no wrapper object.
 */
/** Approximate-recency granularity (ms) for maps built with `bumped`. */
export const BUMP_INTERVAL_MS = 1_000;

export class TtlLru<V> {
  private readonly map = new Map<string, V>();

  constructor(
    private readonly max: number,
    /** When the value stops being served (epoch ms, compared with `nowMs`). */
    private readonly expiresAtMs: (value: V) => number,
    /**
     * Optional approximate recency: when the value was last moved to the end, readable and settable. A hit
     * then moves an entry at most once per `BUMP_INTERVAL_MS` (a key used thousands of times a second
     * costs one Map delete + set per second, not per request); eviction order is exact to that interval.
     */
    private readonly bumped?: { at(value: V): number; set(value: V, nowMs: number): void },
  ) {}

  /** The live value (now among the most recently used), or undefined; an expired entry is dropped. */
  get(key: string, nowMs: number): V | undefined {
    const v = this.map.get(key);
    if (v === undefined) return undefined;
    if (this.expiresAtMs(v) <= nowMs) {
      this.map.delete(key);
      return undefined;
    }
    const bumped = this.bumped;
    if (bumped === undefined || nowMs - bumped.at(v) >= BUMP_INTERVAL_MS) {
      this.map.delete(key);
      this.map.set(key, v);
      bumped?.set(v, nowMs);
    }
    return v;
  }

  /** Whether a live value is cached (does not change recency). */
  has(key: string, nowMs: number): boolean {
    const v = this.map.get(key);
    if (v === undefined) return false;
    if (this.expiresAtMs(v) > nowMs) return true;
    this.map.delete(key);
    return false;
  }

  set(key: string, value: V): void {
    this.map.delete(key);
    if (this.map.size >= this.max) {
      const oldest = this.map.keys().next();
      if (!oldest.done) this.map.delete(oldest.value);
    }
    this.map.set(key, value);
  }

  delete(key: string): void {
    this.map.delete(key);
  }

  /** Every cached entry, expired ones included (callers only use it to drop entries). */
  entries(): IterableIterator<[string, V]> {
    return this.map.entries();
  }

  clear(): void {
    this.map.clear();
  }

  get size(): number {
    return this.map.size;
  }
}
