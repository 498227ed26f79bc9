/**
 * Admission filter for the response cache: an answer is stored only when its key was asked for before,
 * recently ("cache on second request", the doorkeeper of TinyLFU / W-TinyLFU). One-off requests, such as
 * eth_call with params that never repeat (an indexer's scan, most of a load test), then cost no cache
 * entry. Storing them was the expensive part of a cache miss: every entry outlives a young-generation GC
 * and is copied, and the old generation grows by the whole TTL's worth of them (CPU per request and GC
 * pauses with and without storing: docs/benchmarks.md).
 *
 * A fixed table of 32-bit fingerprints, 4 bytes a slot and nothing allocated per key. Each key has two
 * candidate slots (two-way, as a cuckoo filter's buckets): it is recorded in an empty one, else over
 * one of the two, the first and the second in turn. With one slot per key, two keys sharing it that are
 * asked for in turn (an indexer cycling over a set of reads) overwrote each other for ever and were
 * never admitted, pass after pass; with two, such pairs are admitted within a pass or two (counts in
 * docs/benchmarks.md).
 * A slot is still overwritten by later keys, so "recently" means within about `slots` distinct keys. A
 * fingerprint collision admits a key one request early, which costs nothing but that entry.
 */
export class Doorkeeper {
  private readonly table: Uint32Array;
  private readonly mask: number;
  /** Which of a key's two slots the next overwrite takes (alternates). */
  private flip = 0;

  /**
   * `slots` is rounded up to a power of two. A shared table (`Doorkeeper.allocate`) is one filter for every
   * serving thread of the process: a key's second request counts on whichever thread it lands. Its slots
   * are read and written without a lock; a race loses at most one fingerprint (one key admitted a request
   * late), as an overwrite does.
   */
  constructor(slots: number | SharedArrayBuffer) {
    if (typeof slots === "number") {
      this.table = new Uint32Array(Doorkeeper.size(slots));
    } else {
      this.table = new Uint32Array(slots);
      if (this.table.length !== Doorkeeper.size(this.table.length))
        throw new Error("doorkeeper: the table's slots must be a power of two");
    }
    this.mask = this.table.length - 1;
  }

  /** A table of `slots` (rounded up to a power of two) for serving threads to share. */
  static allocate(slots: number): SharedArrayBuffer {
    return new SharedArrayBuffer(Doorkeeper.size(slots) * 4);
  }

  private static size(slots: number): number {
    let size = 1;
    while (size < slots) size *= 2;
    return size;
  }

  /** Records `key`; true when it was already recorded (its second request, or later). */
  seen(key: string): boolean {
    const h = fingerprint(key);
    const t = this.table;
    const i = (h ^ (h >>> 15)) & this.mask;
    const j = (Math.imul(h, 0x9e3779b1) >>> 11) & this.mask;
    if (t[i] === h || t[j] === h) return true;
    if (t[i] === 0) t[i] = h;
    else if (t[j] === 0) t[j] = h;
    else {
      this.flip ^= 1;
      t[this.flip === 0 ? i : j] = h;
    }
    return false;
  }

  clear(): void {
    this.table.fill(0);
  }
}

/** FNV-1a over UTF-16 code units with a murmur3 finaliser; never 0 (0 marks an empty slot). */
export function fingerprint(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0 || 1;
}
