/**
 * Cacheable calls in flight in any serving thread of the process, so that a thread asking for a key
 * another thread is already fetching waits for that answer instead of sending the call again (the
 * in-flight merge, across threads; within a thread the cache shares the promise itself).
 *
 * A table in a SharedArrayBuffer under one lock: SLOTS slots of `[hash, generation, followers, -]`. A key
 * is named by its hash alone: two keys sharing one only make the second wait for the first's answer, then
 * find no entry for itself in the store and send its own call (a delay, never a wrong answer: answers
 * travel through the store, whose keys are compared in full). A key's slot is any free one among PROBE
 * from its home, all PROBE looked at before one is taken, so a key is never in two slots. With every one
 * of them taken (more than a few thousand distinct keys in flight at once) the call goes unmerged.
 *
 * The leader releases its slot once the answer is stored (or known not to be kept): it bumps the slot's
 * generation and wakes every thread waiting on that word (Atomics.waitAsync: the waiters' event loops go on).
 */
import { lock, unlock } from "./shared-lock";

const SLOTS = 4096;
const SLOT_INTS = 4;
const S_HASH = 0;
const S_GEN = 1;
const S_FOLLOWERS = 2;
const PROBE = 16;
/** The lock word sits after the slots. */
const LOCK = SLOTS * SLOT_INTS;

/** What `claim` found: this thread leads (slot to release; -1 = the table is full, nothing to release) or follows. */
export interface Claim {
  readonly lead: boolean;
  readonly slot: number;
  /** The slot's generation when claimed: a follower waits for it to change. */
  readonly generation: number;
}

/** Atomics.waitAsync (Node 16+), which the configured TypeScript lib does not declare. */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(
      a: Int32Array,
      i: number,
      value: number,
      timeoutMs: number,
    ): { async: boolean; value: Promise<string> | string };
  }
).waitAsync;

const UNSHARED: Claim = Object.freeze({ lead: true, slot: -1, generation: 0 });

export class SharedFlights {
  private readonly t: Int32Array;

  static allocate(): SharedArrayBuffer {
    return new SharedArrayBuffer((SLOTS * SLOT_INTS + 1) * 4);
  }

  constructor(shared: SharedArrayBuffer) {
    this.t = new Int32Array(shared);
  }

  /** Leads the call for `hash` when no thread has it in flight, else follows the thread that has. */
  claim(hash: number): Claim {
    const t = this.t;
    const h = hash | 0;
    let free = -1;
    lock(t, LOCK);
    try {
      let slot = hash & (SLOTS - 1);
      for (let i = 0; i < PROBE; i++) {
        const base = slot * SLOT_INTS;
        const held = t[base + S_HASH]!;
        if (held === h) {
          t[base + S_FOLLOWERS]!++;
          return { lead: false, slot, generation: t[base + S_GEN]! };
        }
        if (held === 0 && free < 0) free = slot;
        slot = (slot + 1) & (SLOTS - 1);
      }
      if (free < 0) return UNSHARED;
      const base = free * SLOT_INTS;
      t[base + S_HASH] = h;
      t[base + S_FOLLOWERS] = 0;
      return { lead: true, slot: free, generation: t[base + S_GEN]! };
    } finally {
      unlock(t, LOCK);
    }
  }

  /** Whether another thread waits for the call led in `slot`. */
  followed(slot: number): boolean {
    return slot >= 0 && Atomics.load(this.t, slot * SLOT_INTS + S_FOLLOWERS) > 0;
  }

  /** Whether a call for `hash` is in flight in some thread (a traced call about to join it). */
  inFlight(hash: number): boolean {
    const t = this.t;
    const h = hash | 0;
    let slot = hash & (SLOTS - 1);
    for (let i = 0; i < PROBE; i++) {
      if (Atomics.load(t, slot * SLOT_INTS + S_HASH) === h) return true;
      slot = (slot + 1) & (SLOTS - 1);
    }
    return false;
  }

  /** Ends the lead of `slot` (from `claim`) and wakes its followers. */
  release(slot: number): void {
    if (slot < 0) return;
    const t = this.t;
    const base = slot * SLOT_INTS;
    lock(t, LOCK);
    t[base + S_HASH] = 0;
    t[base + S_FOLLOWERS] = 0;
    Atomics.add(t, base + S_GEN, 1);
    unlock(t, LOCK);
    Atomics.notify(t, base + S_GEN);
  }

  /** Resolves once the lead of `c.slot` has ended, or after `timeoutMs` (a leader stuck or gone). */
  wait(c: Claim, timeoutMs: number): Promise<unknown> | undefined {
    const r = waitAsync(this.t, c.slot * SLOT_INTS + S_GEN, c.generation, timeoutMs);
    return typeof r.value === "string" ? undefined : r.value;
  }
}
