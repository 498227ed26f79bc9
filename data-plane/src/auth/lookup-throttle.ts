import type { ErrorRow } from "../../../shared/src/jsonrpc/errors";

/**
 * Failed key look-ups per client address (IPv4 address, IPv6 /64: ipBucket), counted before Redis is asked
 * for a key that is not cached: an address that presented KEY_LOOKUP_MAX_FAILURES unknown keys within the
 * current KEY_LOOKUP_WINDOW_MS window gets 429 `key_lookup_throttled` for any key not cached, until the
 * window ends. Keys already cached (known or unknown) are answered as before: the throttle spares Redis,
 * and a client with a working key behind the same address keeps being served.
 *
 * One table for the whole process, in shared memory (SharedArrayBuffer, given to every serving thread
 * with DATA_PLANE_THREADS > 1), so the limit holds across threads: a count-min sketch of ROWS x SLOTS
 * (count, window) pairs. An address's count is the smallest of its slots', so it is never below the true
 * count; it is above it only when busy addresses share its slot in every row (early, never late). Windows
 * are fixed (a burst across a boundary may see up to twice the limit) and a slot's reset at a new window
 * races with other threads' adds (an add may be lost then): the bound is approximate, within a few
 * look-ups per window, which is what it is for (a host sending random keys costs Redis at most about
 * KEY_LOOKUP_MAX_FAILURES GETs per window, not one per request).
 */
const ROWS = 2;
const SLOTS = 1 << 16;
/** Int32 per row: SLOTS counts, then SLOTS window numbers. */
const ROW_INTS = 2 * SLOTS;

export interface KeyLookupThrottleOptions {
  /** Unknown keys an address may present per window; 0 = no throttle. */
  maxFailures: number;
  windowMs: number;
  /** Wall clock (ms); tests pass a fake one. */
  now?: () => number;
}

export class KeyLookupThrottle {
  private readonly table: Int32Array;
  private readonly now: () => number;

  /** Memory for one process's table (1 MiB), shared by its threads. */
  static allocate(): SharedArrayBuffer {
    return new SharedArrayBuffer(ROWS * ROW_INTS * 4);
  }

  constructor(
    shared: SharedArrayBuffer,
    private readonly opts: KeyLookupThrottleOptions,
  ) {
    this.table = new Int32Array(shared);
    this.now = opts.now ?? Date.now;
  }

  /** Whether the throttle counts anything at all. */
  get enabled(): boolean {
    return this.opts.maxFailures > 0;
  }

  /** Milliseconds until `address` may have a key looked up again; 0 = now. */
  blockedForMs(address: string): number {
    if (!this.enabled) return 0;
    const t = this.now();
    const w = windowOf(t, this.opts.windowMs);
    if (this.count(address, w) < this.opts.maxFailures) return 0;
    return Math.max(1, this.opts.windowMs - (t % this.opts.windowMs));
  }

  /** Counts one unknown key presented by `address` in the current window. */
  failed(address: string): void {
    if (!this.enabled) return;
    const w = windowOf(this.now(), this.opts.windowMs);
    const t = this.table;
    for (let r = 0; r < ROWS; r++) {
      const c = r * ROW_INTS + slot(address, r);
      const e = c + SLOTS;
      const seen = Atomics.load(t, e);
      // The first add of a new window resets the slot (one thread wins the exchange).
      if (seen !== w && Atomics.compareExchange(t, e, seen, w) === seen) Atomics.store(t, c, 0);
      Atomics.add(t, c, 1);
    }
  }

  private count(address: string, w: number): number {
    const t = this.table;
    let min = Number.POSITIVE_INFINITY;
    for (let r = 0; r < ROWS; r++) {
      const c = r * ROW_INTS + slot(address, r);
      const n = Atomics.load(t, c + SLOTS) === w ? Atomics.load(t, c) : 0;
      if (n < min) min = n;
    }
    return min;
  }
}

/** The window number as an Int32 (only compared for equality, so wrapping is harmless). */
function windowOf(t: number, windowMs: number): number {
  return Math.floor(t / windowMs) | 0;
}

/** FNV-1a (32 bit) of the address, with a different basis and direction per row. */
function slot(id: string, row: number): number {
  let h = row === 0 ? 0x811c9dc5 : 0x050c5d1f;
  if (row === 0) for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  else for (let i = id.length - 1; i >= 0; i--) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return (h ^ (h >>> 16)) & (SLOTS - 1);
}

/**
 * A refusal row carrying its Retry-After (`key_lookup_throttled`), for the WebSocket upgrades, whose
 * authorize step answers a row: the upgrade's refusal reads `retryAfterMs` for its header and body.
 */
export function withRetryAfter(row: ErrorRow, retryAfterMs: number | undefined): ErrorRow {
  return retryAfterMs === undefined ? row : Object.freeze({ ...row, retryAfterMs });
}
