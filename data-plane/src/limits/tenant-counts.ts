/**
 * Counts per tenant (an app's limit id, a node key, a client-address bucket) that the per-tenant caps compare
 * against: calls in flight (MAX_IN_FLIGHT_PER_KEY, MAX_HEAVY_IN_FLIGHT_PER_KEY) and open WebSocket sockets
 * (WS_MAX_CONNECTIONS_PER_KEY / _PER_IP). A cap is one for the whole process: with DATA_PLANE_THREADS > 1
 * every serving thread counts into one shared table (SharedTenantCounts), so a tenant whose connections
 * land on N threads cannot hold N times its cap.
 */
export interface TenantCounts {
  /** The count of `id` in the process (shared: never below it, see SharedTenantCounts). */
  get(id: string): number;
  /**
   * Adds `n` to `id` when the count stays within `cap` after it, or, with `anyWhenIdle`, when the count
   * was 0 (a request larger than the cap is not refused forever). Returns whether it added.
   */
  tryAdd(id: string, n: number, cap: number, anyWhenIdle?: boolean): boolean;
  /** Adds `n` to `id` whatever the count (a caller that checked `get` first). */
  add(id: string, n: number): void;
  /** Takes back `n` that this thread added to `id`. */
  sub(id: string, n: number): void;
  /** Ids this thread holds counts for (a leak would show as a growing number). */
  readonly size: number;
}

/** One thread's counts, in a Map (DATA_PLANE_THREADS=1, tests). */
export class LocalTenantCounts implements TenantCounts {
  private readonly counts = new Map<string, number>();

  get(id: string): number {
    return this.counts.get(id) ?? 0;
  }

  tryAdd(id: string, n: number, cap: number, anyWhenIdle = false): boolean {
    const cur = this.counts.get(id) ?? 0;
    if (cur + n > cap && !(anyWhenIdle && cur === 0)) return false;
    this.counts.set(id, cur + n);
    return true;
  }

  add(id: string, n: number): void {
    this.counts.set(id, (this.counts.get(id) ?? 0) + n);
  }

  sub(id: string, n: number): void {
    const cur = this.counts.get(id);
    if (cur === undefined) return;
    if (cur <= n) this.counts.delete(id);
    else this.counts.set(id, cur - n);
  }

  get size(): number {
    return this.counts.size;
  }
}

/**
 * Slots per row of a shared table: 2^15 Int32 (128 KiB per row). Two tenants share a slot by their hash;
 * they share the count only when they share a slot in every row (see SharedTenantCounts).
 */
const SLOTS = 1 << 15;
const ROWS = 2;
/**
 * Lock words after the rows: `tryAdd` decides and adds under the lock of its id's row-0 slot (striped), so
 * that racing threads are serialised per id. Without it, the two rows' adds interleave and each racer can
 * read a minimum from before the other's add: both admitted past the cap.
 */
const LOCK_STRIPES = 256;
const TABLE_INTS = ROWS * SLOTS + LOCK_STRIPES;
const TABLE_BYTES = TABLE_INTS * 4;
/** Ids whose slots a thread remembers (about 100 bytes each). */
const SLOT_MEMO_MAX = 10_000;

/** The tables the data plane shares between its threads, one per cap. */
export const TENANT_TABLES = ["inFlight", "heavyInFlight", "wsByKey", "wsByIp"] as const;
export type TenantTable = (typeof TENANT_TABLES)[number];
export type TenantCountSet = Record<TenantTable, TenantCounts>;

/** Memory for every table of TENANT_TABLES, given to each serving thread (`workerData`). 1 MiB. */
export function allocateTenantTables(): SharedArrayBuffer {
  return new SharedArrayBuffer(TENANT_TABLES.length * TABLE_BYTES);
}

export function localTenantCounts(): TenantCountSet {
  return {
    inFlight: new LocalTenantCounts(),
    heavyInFlight: new LocalTenantCounts(),
    wsByKey: new LocalTenantCounts(),
    wsByIp: new LocalTenantCounts(),
  };
}

/** The tables of `shared` (from allocateTenantTables), as this thread's view of them. */
export function sharedTenantCounts(shared: SharedArrayBuffer): TenantCountSet {
  const at = (i: number) => new SharedTenantCounts(new Int32Array(shared, i * TABLE_BYTES, TABLE_INTS));
  return { inFlight: at(0), heavyInFlight: at(1), wsByKey: at(2), wsByIp: at(3) };
}

/**
 * Counts shared by every thread of the process: a count-min sketch in shared memory. Each id adds to one
 * slot per row (two independent hashes); its count is the smallest of its slots. That is never below the
 * true count, and above it only when other tenants with counts share the id's slot in both rows (with
 * 1,000 tenants busy at once, about 1 in 1,000 ids): then the id is capped early, never late.
 *
 * `tryAdd` reads the id's count and adds under a lock striped by its row-0 slot (every tryAdd of one id
 * takes the same lock), so two threads racing for the last place cannot both be admitted; the critical
 * section is two loads and two adds. `add` after a `get` may overshoot a cap by what other threads admit at
 * that moment; the caps use `tryAdd`. This thread's own counts are kept too, so that `size` and `sub` see only what this thread added.
 */
export class SharedTenantCounts implements TenantCounts {
  private readonly own = new LocalTenantCounts();
  /** Ids' slots (row 0 in the low 16 bits, row 1 above), so that a busy id is hashed once, not per call. */
  private readonly slots = new Map<string, number>();

  constructor(private readonly table: Int32Array) {}

  get(id: string): number {
    const s = this.slotsOf(id);
    return Math.min(Atomics.load(this.table, s & 0xffff), Atomics.load(this.table, SLOTS + (s >>> 16)));
  }

  tryAdd(id: string, n: number, cap: number, anyWhenIdle = false): boolean {
    const t = this.table;
    const s = this.slotsOf(id);
    const a = s & 0xffff;
    const b = SLOTS + (s >>> 16);
    const lock = ROWS * SLOTS + (a & (LOCK_STRIPES - 1));
    while (Atomics.compareExchange(t, lock, 0, 1) !== 0) {
      // Spin: the holder is between two loads and two adds on another thread.
    }
    const before = Math.min(Atomics.load(t, a), Atomics.load(t, b));
    const admitted = before + n <= cap || (anyWhenIdle && before === 0);
    if (admitted) {
      Atomics.add(t, a, n);
      Atomics.add(t, b, n);
    }
    Atomics.store(t, lock, 0);
    if (admitted) this.own.add(id, n);
    return admitted;
  }

  add(id: string, n: number): void {
    const s = this.slotsOf(id);
    Atomics.add(this.table, s & 0xffff, n);
    Atomics.add(this.table, SLOTS + (s >>> 16), n);
    this.own.add(id, n);
  }

  sub(id: string, n: number): void {
    // Never more than this thread added: a double release cannot take another thread's count.
    const held = Math.min(n, this.own.get(id));
    if (held === 0) return;
    const s = this.slotsOf(id);
    Atomics.sub(this.table, s & 0xffff, held);
    Atomics.sub(this.table, SLOTS + (s >>> 16), held);
    this.own.sub(id, held);
  }

  private slotsOf(id: string): number {
    let s = this.slots.get(id);
    if (s === undefined) {
      // Bounded: client addresses are unbounded in number; forgetting only costs a hash.
      if (this.slots.size >= SLOT_MEMO_MAX) this.slots.clear();
      s = slot0(id) | (slot1(id) << 16);
      this.slots.set(id, s);
    }
    return s;
  }

  get size(): number {
    return this.own.size;
  }
}

/**
 * The id's slot in row 0 / row 1: FNV-1a (32 bit) of its UTF-16 code units, with another offset basis and
 * read from the other end for row 1, so that ids sharing a slot in one row rarely share it in the other.
 */
function slot0(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return (h ^ (h >>> 15)) & (SLOTS - 1);
}

function slot1(id: string): number {
  let h = 0x050c5d1f;
  for (let i = id.length - 1; i >= 0; i--) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return (h ^ (h >>> 15)) & (SLOTS - 1);
}
