/**
 * Per-second counts of one process, shared by its serving threads (DATA_PLANE_THREADS > 1): the request
 * objects admitted per limiter identifier (`ws:{id}`, `app:{id}`, `ip:{bucket}`, `node:{id}`) in one
 * fixed 1-second window. Every thread's limiter decides against the same count, so a limit is exact for
 * the process whatever thread a request lands on (docs/contracts.md#how-requests-count).
 *
 * Layout: an open-addressed table in a SharedArrayBuffer, 3 + `values` Int32 per slot:
 * `[window, tagA, tagB, count, ...more values]` (the rate limits keep one value, the count; the quotas'
 * per-day and per-month counts keep three, quota/shared-quota-counts.ts). An identifier is named by two independent 32-bit hashes (tagA, tagB):
 * two identifiers share a count only when both collide (about 1 in 2^64 per pair), and then both are
 * limited early, never late. Its home slot is `tagA mod slots`, probed linearly up to PROBE slots.
 *
 * Invariants that make it lock-free and exact:
 * - A slot's window only moves forward: empty (0) or an older window -> CLAIMING -> the current window.
 *   Claiming is one compareExchange on the window word; the claimer then writes the tags and a zero count
 *   and publishes the window last. A thread meeting CLAIMING waits (a few stores) and looks again, so two
 *   threads can never each claim a slot for the same identifier and window.
 * - Within a window a slot that holds it keeps it, so an identifier found past its home slot is found
 *   there again by every thread (the slots before it stay taken for the whole window).
 * - A count changes only by compareExchange (admission: `count + cost <= max` is checked against the value
 *   replaced) or by subtracting what this process added (a refund): it never passes `max` by a race.
 * - A slot is reclaimed only once its window is two seconds old, never for an older window than it holds:
 *   a thread still in second W (its clock read a moment before another's, or its check under way at the
 *   boundary) keeps its handle valid while others start second W + 1, and cannot wipe W + 1's counts.
 *
 * When every slot of an identifier's probe run holds another identifier of the current or the previous
 * second (more than about 30,000 identifiers active per second, or a clustered run), the identifier is
 * counted in a thread-local spill instead: exact per thread only, until the next second. `spilled` counts
 * those. A slot being claimed is a few stores from publication, but its claimer can be descheduled in
 * between (more runnable threads than cores): a reader spins CLAIM_SPINS looks, then sleeps on the window
 * word (the claimer notifies on publication) for up to CLAIM_WAIT_MS in all, and only then spills (a
 * claimer that never publishes: its thread was terminated between two stores).
 */
/** Int32 per slot before its values. */
const HEADER_INTS = 3;
const WINDOW = 0;
const TAG_A = 1;
const TAG_B = 2;
const COUNT = 3;
/** Slots per process table (2 MiB of shared memory): two seconds' identifiers. */
const DEFAULT_SLOTS = 1 << 17;
/** Slots probed from an identifier's home slot before it spills. */
const PROBE = 32;
/** A slot being claimed (its tags are being written); never a stored window (see encodeWindow). */
const CLAIMING = -1;
/** How many times a reader looks again at a slot being claimed before it sleeps on it (about 10 µs). */
const CLAIM_SPINS = 2_000;
/**
 * How long (ms) a reader waits in all for a claimed slot's publication before it spills: longer than a
 * descheduled claimer takes to run again on a loaded machine (scheduler slices are a few ms).
 */
const CLAIM_WAIT_MS = 200;
/** One sleep on a claimed slot (ms): a missed notify costs no more than this. */
const CLAIM_SLEEP_MS = 1;
/** Stored windows are kept within 30 bits (never 0 = empty, never -1 = claiming). */
const WINDOW_SPACE = 0x3fffffff;
/** A stored window this far ahead of a thread's own is newer (that thread's clock read is behind). */
const AHEAD_WINDOWS = 1024;

/** The stored form of a window index: 1..WINDOW_SPACE. */
function encodeWindow(windowIndex: number): number {
  return (((windowIndex % WINDOW_SPACE) + WINDOW_SPACE) % WINDOW_SPACE) + 1;
}

/** Two independent FNV-1a hashes of the identifier (the second with another basis, read backwards). */
interface Tags {
  readonly a: number;
  readonly b: number;
}

/** Identifiers whose tags a view remembers (a busy identifier is hashed once, not per request). */
const TAG_MEMO_MAX = 10_000;

export class WindowCounts {
  private readonly table: Int32Array;
  private readonly slots: number;
  /** Int32 per slot: the header and `values`. */
  private readonly slotInts: number;
  private readonly tags = new Map<string, Tags>();
  /**
   * Thread-local values of identifiers that found no shared slot this window (`values` each, at indices
   * past the table).
   */
  private spill: Int32Array;
  private readonly spillIndex = new Map<string, number>();
  private spillWindow = 0;
  /** Identifiers counted in the spill since this view was made. */
  spilled = 0;

  /** Memory for one process's table of `values` Int32 per identifier, given to every serving thread. */
  static allocate(slots = DEFAULT_SLOTS, values = 1): SharedArrayBuffer {
    return new SharedArrayBuffer(slots * (HEADER_INTS + values) * 4);
  }

  /**
   * A view of `shared` (from `allocate`, with the same `values`); a private table when none is given (one
   * thread, tests).
   */
  constructor(
    shared: SharedArrayBuffer = WindowCounts.allocate(),
    private readonly values = 1,
  ) {
    this.table = new Int32Array(shared);
    this.slotInts = HEADER_INTS + values;
    this.slots = this.table.length / this.slotInts;
    if (!Number.isInteger(this.slots) || this.slots < PROBE)
      throw new Error("window counts: table too small");
    this.spill = new Int32Array(64 * values);
  }

  /**
   * The handle of `identifier`'s count in window `windowIndex`, claiming a slot when it has none yet.
   * Stable for the rest of the window (a limiter may keep it for that long). Value `i` of the identifier
   * is at `handle + i`.
   */
  slot(identifier: string, windowIndex: number): number {
    const found = this.find(identifier, windowIndex, true);
    return found >= 0 ? found : this.spillSlot(identifier, windowIndex);
  }

  /** The handle `slot` would give, without claiming one: -1 when the identifier has none in the window. */
  peek(identifier: string, windowIndex: number): number {
    const found = this.find(identifier, windowIndex, false);
    if (found >= 0) return found;
    if (this.spillWindow !== encodeWindow(windowIndex)) return -1;
    const i = this.spillIndex.get(identifier);
    return i === undefined ? -1 : this.table.length + i * this.values;
  }

  /** The value behind a handle from `slot` or `peek`. */
  load(handle: number): number {
    if (handle < this.table.length) return Atomics.load(this.table, handle);
    return this.spill[handle - this.table.length]!;
  }

  /** Adds `n` (negative: takes away) to the value behind `handle`. */
  add(handle: number, n: number): void {
    if (handle < this.table.length) Atomics.add(this.table, handle, n);
    else this.spill[handle - this.table.length]! += n;
  }

  /** Raises the value behind `handle` to `value` when it is below (never lowers it, whatever races). */
  raise(handle: number, value: number): void {
    if (handle >= this.table.length) {
      const i = handle - this.table.length;
      if (this.spill[i]! < value) this.spill[i] = value;
      return;
    }
    for (let cur = Atomics.load(this.table, handle); cur < value; ) {
      const found = Atomics.compareExchange(this.table, handle, cur, value);
      if (found === cur) return;
      cur = found;
    }
  }

  /**
   * Adds `cost` to the count behind `handle` when the count it replaces is `expected`; returns the count
   * found (the add happened iff it equals `expected`).
   */
  compareExchange(handle: number, expected: number, next: number): number {
    if (handle < this.table.length) return Atomics.compareExchange(this.table, handle, expected, next);
    const i = handle - this.table.length;
    const cur = this.spill[i]!;
    if (cur === expected) this.spill[i] = next;
    return cur;
  }

  /**
   * Takes back `cost` this process added to `identifier` in window `windowIndex` (an admission undone in
   * the same turn); nothing when the window's slot is gone.
   */
  refund(identifier: string, windowIndex: number, cost: number): void {
    const handle = this.peek(identifier, windowIndex);
    if (handle < 0) return;
    if (handle < this.table.length) Atomics.sub(this.table, handle, cost);
    else this.spill[handle - this.table.length] = Math.max(0, this.load(handle) - cost);
  }

  /** The count of `identifier` in window `windowIndex` (0 when it has none), without claiming a slot. */
  count(identifier: string, windowIndex: number): number {
    const handle = this.peek(identifier, windowIndex);
    return handle < 0 ? 0 : this.load(handle);
  }

  /** Identifiers holding a count in window `windowIndex` (a scan of the table: for tests and metrics). */
  active(windowIndex: number): number {
    const w = encodeWindow(windowIndex);
    let n = this.spillWindow === w ? this.spillIndex.size : 0;
    for (let s = 0; s < this.table.length; s += this.slotInts) if (Atomics.load(this.table, s) === w) n++;
    return n;
  }

  /** The COUNT index of the identifier's slot for the window, or -1 (not there and `claim` false, or full). */
  private find(identifier: string, windowIndex: number, claim: boolean): number {
    const t = this.table;
    const tags = this.tagsOf(identifier);
    const w = encodeWindow(windowIndex);
    let s = (tags.a >>> 0) % this.slots;
    for (let probe = 0; probe < PROBE; probe++) {
      const base = s * this.slotInts;
      let spins = 0;
      let sleptMs = 0;
      for (;;) {
        const held = Atomics.load(t, base + WINDOW);
        if (held === w) {
          if (Atomics.load(t, base + TAG_A) === tags.a && Atomics.load(t, base + TAG_B) === tags.b) {
            return base + COUNT;
          }
          break; // another identifier's: probe on
        }
        if (held === CLAIMING) {
          // Another thread is writing this slot's tags: a few stores away from publishing its window,
          // unless it was descheduled in between; then sleep so that it gets a core.
          if (++spins <= CLAIM_SPINS) continue;
          if (sleptMs >= CLAIM_WAIT_MS) return -1;
          Atomics.wait(t, base + WINDOW, CLAIMING, CLAIM_SLEEP_MS);
          sleptMs += CLAIM_SLEEP_MS;
          continue;
        }
        // Empty or another window. The previous window (a thread may still be using it) and a newer one
        // (this thread's clock read is behind) are left alone.
        const ahead = (((held - w) % WINDOW_SPACE) + WINDOW_SPACE) % WINDOW_SPACE;
        if (held !== 0 && (ahead <= AHEAD_WINDOWS || ahead === WINDOW_SPACE - 1)) break;
        if (!claim) {
          // Slots are claimed in probe order, so a reclaimable one ends the identifier's run: not here.
          return -1;
        }
        if (Atomics.compareExchange(t, base + WINDOW, held, CLAIMING) !== held) continue; // look again
        Atomics.store(t, base + TAG_A, tags.a);
        Atomics.store(t, base + TAG_B, tags.b);
        for (let v = 0; v < this.values; v++) Atomics.store(t, base + COUNT + v, 0);
        Atomics.store(t, base + WINDOW, w);
        // Readers that found it CLAIMING past their spins sleep on the word (a no-op when none do).
        Atomics.notify(t, base + WINDOW);
        return base + COUNT;
      }
      s = s + 1 === this.slots ? 0 : s + 1;
    }
    return -1;
  }

  private spillSlot(identifier: string, windowIndex: number): number {
    const w = encodeWindow(windowIndex);
    if (this.spillWindow !== w) {
      this.spillWindow = w;
      this.spillIndex.clear();
      this.spill.fill(0);
    }
    let i = this.spillIndex.get(identifier);
    if (i === undefined) {
      i = this.spillIndex.size;
      if ((i + 1) * this.values > this.spill.length) {
        const bigger = new Int32Array(this.spill.length * 2);
        bigger.set(this.spill);
        this.spill = bigger;
      }
      this.spillIndex.set(identifier, i);
      this.spilled++;
    }
    return this.table.length + i * this.values;
  }

  private tagsOf(identifier: string): Tags {
    let tags = this.tags.get(identifier);
    if (tags === undefined) {
      // Bounded: client addresses are unbounded in number; forgetting one only costs a hash.
      if (this.tags.size >= TAG_MEMO_MAX) this.tags.clear();
      let a = 0x811c9dc5;
      for (let i = 0; i < identifier.length; i++) a = Math.imul(a ^ identifier.charCodeAt(i), 0x01000193);
      let b = 0x050c5d1f;
      for (let i = identifier.length - 1; i >= 0; i--)
        b = Math.imul(b ^ identifier.charCodeAt(i), 0x01000193);
      tags = { a: a ^ (a >>> 15), b: b ^ (b >>> 13) };
      this.tags.set(identifier, tags);
    }
    return tags;
  }
}
