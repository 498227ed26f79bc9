/**
 * The response cache's entries in shared memory, one store for every serving thread of a process
 * (DATA_PLANE_THREADS > 1): an answer fetched by one thread is a hit on every other, and CACHE_MAX_BYTES
 * bounds the process. A hit is synchronous: a lock, a probe, a copy out; no message to another thread.
 *
 * The memory is split in shards (a key's shard is chosen by its hash), each one SharedArrayBuffer:
 * `[header][index][arena]`.
 * - Header: a lock word (futex-style mutex: 0 free, 1 held, 2 held with sleepers), the arena's write
 *   position (`head`), its oldest entry (`tail`), the bytes in use between them and the live entry count.
 * - Index: an open-addressed table (linear probing, backward-shift deletion) of `[hash, offset + 1]`.
 * - Arena: a ring of entries written at `head` and evicted at `tail`, oldest first. An entry is a 32-byte
 *   header `[size, hash, keyBytes, valueBytes, flags, stamp, expiresAt (float64, 0 = never)]` followed by the
 *   key's and the value's UTF-8 bytes, 8-byte aligned. Where an entry does not fit before the end of the
 *   arena, a skip marker fills the rest and writing goes on at 0.
 *
 * Eviction is FIFO with re-insertion: a hit on an entry in the oldest quarter of a nearly full shard writes
 * it again at `head`, so entries in use stay and entries nobody reads reach the tail and go, close to the
 * LRU order a per-thread lru-cache gave. An entry replaced, expired or dropped is marked dead and leaves
 * the index at once; its bytes are reclaimed when the tail passes it.
 *
 * Every read and write of a shard's index and arena is under its lock (held for a probe and a copy: well
 * under a microsecond for a small answer), so the plain typed-array accesses inside are ordered by the
 * lock's atomics. Keys are compared byte for byte: a hash collision is a probe step, never a wrong answer.
 */
import {
  allocateStore,
  E_EXPIRES_F64,
  E_FLAGS,
  E_HASH,
  E_KEY,
  E_SIZE,
  E_STAMP,
  E_VALUE,
  ENTRY_HEADER,
  H_COUNT,
  H_HEAD,
  H_LOCK,
  H_STAMP,
  H_TAIL,
  H_USED,
  keyHash,
  LIVE,
  round8,
  type Shard,
  SKIP,
  type StoreOptions,
  shardView,
  TIMED,
} from "./shared-layout";
import { lock, unlock } from "./shared-lock";

export { allocateStore, keyHash };

/** A thread's view of a shared store (the buffers from `allocateStore`). */
export class SharedStore {
  /**
   * Where the entry of the last hit of `get` is (for `stillLive`): its shard, offset, stamp and expiry.
   * Fields rather than a returned object, so that a hit allocates nothing more than its value.
   */
  lastShard = 0;
  lastHash = 0;
  lastOffset = 0;
  lastStamp = 0;
  lastExpires = 0;
  private readonly shards: Shard[];
  private readonly shardMask: number;
  private readonly now: () => number;
  /** This thread's key bytes of the operation under way. */
  private scratch = Buffer.alloc(4096);

  constructor(buffers: readonly SharedArrayBuffer[], options: StoreOptions = {}) {
    if (buffers.length === 0 || (buffers.length & (buffers.length - 1)) !== 0)
      throw new Error("shared cache store: the shard count must be a power of two");
    this.shards = buffers.map(shardView);
    this.shardMask = buffers.length - 1;
    this.now = options.now ?? Date.now;
  }

  /** The value stored under `key` (live and not expired), or undefined. */
  get(key: string): string | undefined {
    const hash = keyHash(key);
    const s = this.shards[(hash >>> 26) & this.shardMask]!;
    if (s.mask < 0) return undefined;
    const kb = this.encodeKey(key);
    lock(s.header, H_LOCK);
    try {
      const slot = this.find(s, hash, kb);
      if (slot < 0) return undefined;
      const o = s.index[slot * 2 + 1]! - 1;
      const e = o >> 2;
      const keyBytes = s.i32[e + E_KEY]!;
      const valueBytes = s.i32[e + E_VALUE]!;
      const expires = s.f64[(o >> 3) + E_EXPIRES_F64]!;
      if (expires !== 0 && expires <= this.now()) {
        this.remove(s, slot, o);
        return undefined;
      }
      const start = o + ENTRY_HEADER + keyBytes;
      const value = s.bytes.toString("utf8", start, start + valueBytes);
      if (this.aging(s, o)) {
        // Read again while the shard is nearly full and this entry is among the next to go: written anew.
        this.remove(s, slot, o);
        this.lastOffset = this.insert(s, hash, kb, value, valueBytes, expires);
      } else {
        this.lastOffset = o;
      }
      this.lastShard = (hash >>> 26) & this.shardMask;
      this.lastHash = hash;
      this.lastStamp = s.i32[(this.lastOffset >> 2) + E_STAMP]!;
      this.lastExpires = expires;
      return value;
    } finally {
      unlock(s.header, H_LOCK);
    }
  }

  /**
   * Stores `value` under `key` (replacing what was there), for `ttlMs` or until evicted (undefined).
   * Returns false when it is too large for the store.
   */
  set(key: string, value: string, ttlMs: number | undefined): boolean {
    const hash = keyHash(key);
    const s = this.shards[(hash >>> 26) & this.shardMask]!;
    const kb = this.encodeKey(key);
    const vb = Buffer.byteLength(value);
    if (round8(ENTRY_HEADER + kb + vb) > s.maxEntryBytes || s.maxEntries === 0) return false;
    const expires = ttlMs === undefined ? 0 : this.now() + ttlMs;
    lock(s.header, H_LOCK);
    try {
      const slot = this.find(s, hash, kb);
      if (slot >= 0) this.remove(s, slot, s.index[slot * 2 + 1]! - 1);
      this.insert(s, hash, kb, value, vb, expires);
      return true;
    } finally {
      unlock(s.header, H_LOCK);
    }
  }

  /**
   * Whether the entry a `get` found (its `last*` fields then) is still there, unexpired and not among the
   * next to be evicted, read without the lock: a thread that kept the value it read then may answer with
   * it again without copying it out. False when in doubt (`get` then decides under the lock).
   *
   * An entry's stamp is unique within its shard (a counter, stored before its LIVE flag); removing it
   * clears the flag first. So LIVE read before the stamp, and the stamp equal to the one kept, mean it was
   * this entry, live, at that moment. Its bytes could later be overwritten by another entry's key or
   * value; matching flags, stamp and hash at once by chance would keep serving this same key's own value,
   * at most until its expiry, which is checked here from the kept copy.
   */
  stillLive(shard: number, o: number, stamp: number, expires: number, hash: number): boolean {
    const s = this.shards[shard]!;
    const e = o >> 2;
    if ((Atomics.load(s.i32, e + E_FLAGS) & LIVE) === 0) return false;
    if (Atomics.load(s.i32, e + E_STAMP) !== stamp || Atomics.load(s.i32, e + E_HASH) !== (hash | 0))
      return false;
    if (expires !== 0 && expires <= this.now()) return false;
    const used = Atomics.load(s.header, H_USED);
    if (used * 4 < s.arenaBytes * 3 && Atomics.load(s.header, H_COUNT) * 4 < s.maxEntries * 3) return true;
    // Nearly full: among the oldest quarter, `get` writes it again.
    return ((o - Atomics.load(s.header, H_TAIL) + s.arenaBytes) % s.arenaBytes) * 4 >= used;
  }

  /** Whether `key` is stored (live, not expired); no effect on eviction. */
  has(key: string): boolean {
    const hash = keyHash(key);
    const s = this.shards[(hash >>> 26) & this.shardMask]!;
    if (s.mask < 0) return false;
    const kb = this.encodeKey(key);
    lock(s.header, H_LOCK);
    try {
      const slot = this.find(s, hash, kb);
      if (slot < 0) return false;
      const o = s.index[slot * 2 + 1]! - 1;
      const expires = s.f64[(o >> 3) + E_EXPIRES_F64]!;
      return expires === 0 || expires > this.now();
    } finally {
      unlock(s.header, H_LOCK);
    }
  }

  /**
   * Drops the live entries stored with a TTL whose key `match`es; returns how many. Walks every shard's
   * arena under its lock: for rare events (a reorg), not per request.
   */
  dropTimed(match: (key: string) => boolean): number {
    let dropped = 0;
    for (const s of this.shards) {
      lock(s.header, H_LOCK);
      try {
        let o = s.header[H_TAIL]!;
        let left = s.header[H_USED]!;
        while (left > 0) {
          const e = o >> 2;
          const size = s.i32[e + E_SIZE]!;
          if (size === SKIP) {
            left -= s.arenaBytes - o;
            o = 0;
            continue;
          }
          const flags = s.i32[e + E_FLAGS]!;
          if ((flags & (LIVE | TIMED)) === (LIVE | TIMED)) {
            const start = o + ENTRY_HEADER;
            if (match(s.bytes.toString("utf8", start, start + s.i32[e + E_KEY]!))) {
              const slot = this.slotOf(s, s.i32[e + E_HASH]! >>> 0, o);
              if (slot >= 0) {
                this.remove(s, slot, o);
                dropped++;
              }
            }
          }
          left -= size;
          o += size;
          if (o === s.arenaBytes) o = 0;
        }
      } finally {
        unlock(s.header, H_LOCK);
      }
    }
    return dropped;
  }

  clear(): void {
    for (const s of this.shards) {
      lock(s.header, H_LOCK);
      try {
        // Every entry's flag cleared, not only the index: a thread may still hold one (`stillLive`).
        let o = s.header[H_TAIL]!;
        let left = s.header[H_USED]!;
        while (left > 0) {
          const size = s.i32[o >> 2]!;
          if (size === SKIP) {
            left -= s.arenaBytes - o;
            o = 0;
            continue;
          }
          Atomics.store(s.i32, (o >> 2) + E_FLAGS, 0);
          left -= size;
          o += size;
          if (o === s.arenaBytes) o = 0;
        }
        s.index.fill(0);
        s.header[H_HEAD] = 0;
        s.header[H_TAIL] = 0;
        s.header[H_USED] = 0;
        s.header[H_COUNT] = 0;
      } finally {
        unlock(s.header, H_LOCK);
      }
    }
  }

  /** Arena bytes in use (live and dead entries not yet passed by the tail), over every shard. */
  get usedBytes(): number {
    let n = 0;
    for (const s of this.shards) n += Atomics.load(s.header, H_USED);
    return n;
  }

  /** Bytes of shared memory the store spans. */
  get capacityBytes(): number {
    let n = 0;
    for (const s of this.shards) n += s.header.buffer.byteLength;
    return n;
  }

  /** Live entries, over every shard. */
  get entries(): number {
    let n = 0;
    for (const s of this.shards) n += Atomics.load(s.header, H_COUNT);
    return n;
  }

  /** The key's UTF-8 bytes into `scratch`; their count. */
  private encodeKey(key: string): number {
    if (key.length * 3 > this.scratch.length) this.scratch = Buffer.alloc(key.length * 3);
    return this.scratch.write(key, 0, "utf8");
  }

  /** The index slot holding the key in `scratch` (`kb` bytes), or -1. */
  private find(s: Shard, hash: number, kb: number): number {
    const index = s.index;
    const scratch = this.scratch;
    let slot = hash & s.mask;
    for (;;) {
      const h = index[slot * 2]!;
      if (h === 0) return -1;
      if (h === hash) {
        const o = index[slot * 2 + 1]! - 1;
        const start = o + ENTRY_HEADER;
        if (s.i32[(o >> 2) + E_KEY] === kb && s.bytes.compare(scratch, 0, kb, start, start + kb) === 0)
          return slot;
      }
      slot = (slot + 1) & s.mask;
    }
  }

  /** The index slot pointing at the entry at `o`, or -1. */
  private slotOf(s: Shard, hash: number, o: number): number {
    const index = s.index;
    let slot = hash & s.mask;
    for (;;) {
      const h = index[slot * 2]!;
      if (h === 0) return -1;
      if (h === hash && index[slot * 2 + 1] === o + 1) return slot;
      slot = (slot + 1) & s.mask;
    }
  }

  /** A hit on an entry among the next to be evicted in a nearly full shard. */
  private aging(s: Shard, o: number): boolean {
    const used = s.header[H_USED]!;
    if (used * 4 < s.arenaBytes * 3 && s.header[H_COUNT]! * 4 < s.maxEntries * 3) return false;
    const fromTail = (o - s.header[H_TAIL]! + s.arenaBytes) % s.arenaBytes;
    return fromTail * 4 < used;
  }

  /** Writes a new entry (key bytes in `scratch`) and indexes it, evicting the oldest as needed. */
  private insert(s: Shard, hash: number, kb: number, value: string, vb: number, expires: number): number {
    const size = round8(ENTRY_HEADER + kb + vb);
    while (s.header[H_COUNT]! >= s.maxEntries) this.evictTail(s);
    const o = this.allocate(s, size);
    const e = o >> 2;
    s.i32[e + E_SIZE] = size;
    s.i32[e + E_HASH] = hash | 0;
    s.i32[e + E_KEY] = kb;
    s.i32[e + E_VALUE] = vb;
    // The stamp before the flags, both atomically: `stillLive` reads them in the other order without the lock.
    s.header[H_STAMP] = (s.header[H_STAMP]! + 1) | 0;
    Atomics.store(s.i32, e + E_STAMP, s.header[H_STAMP]!);
    Atomics.store(s.i32, e + E_FLAGS, expires === 0 ? LIVE : LIVE | TIMED);
    s.f64[(o >> 3) + E_EXPIRES_F64] = expires;
    this.scratch.copy(s.bytes, o + ENTRY_HEADER, 0, kb);
    s.bytes.write(value, o + ENTRY_HEADER + kb, vb, "utf8");
    const index = s.index;
    let slot = hash & s.mask;
    while (index[slot * 2] !== 0) slot = (slot + 1) & s.mask;
    index[slot * 2] = hash;
    index[slot * 2 + 1] = o + 1;
    s.header[H_COUNT]!++;
    return o;
  }

  /** The offset of `size` free bytes at the head (`size` <= maxEntryBytes), after evicting what is in the way. */
  private allocate(s: Shard, size: number): number {
    const h = s.header;
    const arena = s.arenaBytes;
    for (;;) {
      const used = h[H_USED]!;
      if (used === 0) {
        h[H_HEAD] = 0;
        h[H_TAIL] = 0;
      }
      const head = h[H_HEAD]!;
      const tail = h[H_TAIL]!;
      // Free bytes from the head on: up to the end while the tail is behind it, else up to the tail.
      const contiguous = used === 0 || head > tail ? arena - head : head === tail ? 0 : tail - head;
      if (size <= contiguous) {
        h[H_HEAD] = head + size === arena ? 0 : head + size;
        h[H_USED] = used + size;
        return head;
      }
      if (used === 0 || head > tail) {
        // Not before the end: skip the rest, go on at 0.
        s.i32[head >> 2] = SKIP;
        h[H_USED] = used + (arena - head);
        h[H_HEAD] = 0;
        continue;
      }
      this.evictTail(s);
    }
  }

  /** Drops the oldest entry (or skip marker) and moves the tail past it. */
  private evictTail(s: Shard): void {
    const h = s.header;
    const o = h[H_TAIL]!;
    const e = o >> 2;
    const size = s.i32[e + E_SIZE]!;
    if (size === SKIP) {
      h[H_USED] = h[H_USED]! - (s.arenaBytes - o);
      h[H_TAIL] = 0;
      return;
    }
    if ((s.i32[e + E_FLAGS]! & LIVE) !== 0) {
      const slot = this.slotOf(s, s.i32[e + E_HASH]! >>> 0, o);
      if (slot >= 0) this.remove(s, slot, o);
    }
    h[H_USED] = h[H_USED]! - size;
    h[H_TAIL] = o + size === s.arenaBytes ? 0 : o + size;
  }

  /** Marks the entry at `o` dead and deletes index slot `slot` (backward shift: no tombstones). */
  private remove(s: Shard, slot: number, o: number): void {
    Atomics.store(s.i32, (o >> 2) + E_FLAGS, 0);
    s.header[H_COUNT]!--;
    const index = s.index;
    const mask = s.mask;
    let hole = slot;
    let j = slot;
    for (;;) {
      j = (j + 1) & mask;
      const h = index[j * 2]!;
      if (h === 0) break;
      const home = h & mask;
      // Entry j may move into the hole when its home is not cyclically within (hole, j].
      if (hole <= j ? home <= hole || home > j : home <= hole && home > j) {
        index[hole * 2] = h;
        index[hole * 2 + 1] = index[j * 2 + 1]!;
        hole = j;
      }
    }
    index[hole * 2] = 0;
    index[hole * 2 + 1] = 0;
  }
}
