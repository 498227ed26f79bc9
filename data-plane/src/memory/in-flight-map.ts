/**
 * Deletes between rebuilds: at least this many, and at least twice the entries live at the time, so a
 * rebuild (which copies the live entries) costs at most half a copy per delete however many calls are in
 * flight (a slow upstream can hold thousands).
 */
const REBUILD_MIN_DELETES = 256;

/**
 * A Map for entries that live about as long as one request (calls in flight, merged loads), set and deleted
 * at request rate by a long-lived owner.
 *
 * A plain Map used that way lives in V8's old generation while every entry it gets is young, and it kept
 * young objects alive through scavenges: they were promoted, pauses grew, and the p99 of every request
 * waiting behind them followed. The same Map rebuilt every 256 deletes (or more, see REBUILD_MIN_DELETES)
 * stays young and dies young (the `--trace-gc-nvp` figures are in docs/benchmarks.md).
 */
export class InFlightMap<K, V> {
  private map = new Map<K, V>();
  private deletes = 0;

  get size(): number {
    return this.map.size;
  }

  get(key: K): V | undefined {
    return this.map.get(key);
  }

  set(key: K, value: V): void {
    this.map.set(key, value);
  }

  delete(key: K): boolean {
    if (!this.map.delete(key)) return false;
    if (++this.deletes >= REBUILD_MIN_DELETES && this.deletes >= 2 * this.map.size) {
      this.deletes = 0;
      this.map = new Map(this.map);
    }
    return true;
  }

  values(): IterableIterator<V> {
    return this.map.values();
  }

  clear(): void {
    this.map = new Map();
    this.deletes = 0;
  }
}
