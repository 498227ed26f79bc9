/**
 * The memory layout of the shared response cache store (shared-store.ts describes it): sizes, word
 * offsets, the shard views and the key hash, shared by the store's reader and writer paths.
 */

/** A shard is at most this large (offsets stay positive int32), and at least this large unless the whole store is smaller. */
export const MAX_SHARD_BYTES = 1 << 30;
export const MIN_SHARD_BYTES = 32 << 20;
export const MAX_SHARDS = 64;

export const HEADER_BYTES = 64;
export const H_LOCK = 0;
export const H_HEAD = 1;
export const H_TAIL = 2;
export const H_USED = 3;
export const H_COUNT = 4;
/** Stamp of the last entry written (each entry gets the next one). */
export const H_STAMP = 5;

/** Index bytes: one 8-byte slot per this many bytes of shard (rounded down to a power of two). */
export const BYTES_PER_SLOT = 64;

export const ENTRY_HEADER = 32;
export const E_SIZE = 0;
export const E_HASH = 1;
export const E_KEY = 2;
export const E_VALUE = 3;
export const E_FLAGS = 4;
export const E_STAMP = 5;
/** Float64 index offset of `expiresAt` within an entry (byte 24). */
export const E_EXPIRES_F64 = 3;
export const LIVE = 1;
export const TIMED = 2;
/** The size word of a skip marker (the rest of the arena is unused; writing went on at 0). */
export const SKIP = -1;

export interface StoreOptions {
  /** Epoch milliseconds (expiry of timed entries); tests pass a fake clock. */
  readonly now?: () => number;
}

/** One shard's views. */
export interface Shard {
  readonly header: Int32Array;
  readonly index: Uint32Array;
  readonly mask: number;
  /** Live entries at most (3/4 of the index's slots). */
  readonly maxEntries: number;
  readonly arenaBase: number;
  readonly arenaBytes: number;
  /** Larger entries are not kept (an eighth of the arena, as lru-cache's maxEntrySize was). */
  readonly maxEntryBytes: number;
  readonly i32: Int32Array;
  readonly f64: Float64Array;
  readonly bytes: Buffer;
}

export function round8(n: number): number {
  return (n + 7) & ~7;
}

/** The shard buffers for a store of `maxBytes`, given to every serving thread. */
export function allocateStore(maxBytes: number): SharedArrayBuffer[] {
  let shards = 1;
  while (
    shards < MAX_SHARDS &&
    (maxBytes / shards > MAX_SHARD_BYTES || maxBytes / (shards * 2) >= MIN_SHARD_BYTES)
  )
    shards *= 2;
  const each = Math.floor(maxBytes / shards / 8) * 8;
  return Array.from({ length: shards }, () => new SharedArrayBuffer(Math.max(each, HEADER_BYTES)));
}

export function shardView(sab: SharedArrayBuffer): Shard {
  const total = sab.byteLength;
  let slots = 16;
  while (slots * 2 * BYTES_PER_SLOT <= total) slots *= 2;
  let arenaBase = HEADER_BYTES + slots * 8;
  if (arenaBase > total) {
    // Hostile or tiny sizes: an index no bigger than the space, and an empty arena if that is all.
    slots = 0;
    arenaBase = HEADER_BYTES;
  }
  const arenaBytes = Math.max(0, Math.floor((total - arenaBase) / 8) * 8);
  return {
    header: new Int32Array(sab, 0, HEADER_BYTES / 4),
    index: new Uint32Array(sab, HEADER_BYTES, slots * 2),
    mask: slots - 1,
    maxEntries: Math.floor((slots * 3) / 4),
    arenaBase,
    arenaBytes,
    maxEntryBytes: Math.floor(arenaBytes / 8),
    i32: new Int32Array(sab, arenaBase, arenaBytes / 4),
    f64: new Float64Array(sab, arenaBase, arenaBytes / 8),
    bytes: Buffer.from(sab, arenaBase, arenaBytes),
  };
}

/** FNV-1a over UTF-16 code units with a murmur3 finaliser; never 0 (0 marks an empty index slot). */
export function keyHash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0 || 1;
}
