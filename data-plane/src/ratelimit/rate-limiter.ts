import { type Clock, systemClock } from "./clock";
import { WindowCounts } from "./window-counts";

/**
 * Per-second request limits (docs/contracts.md#how-requests-count).
 *
 * Windows are fixed 1-second windows aligned to the epoch second (`floor(nowMs / 1000)`): exact, O(1) per
 * check, and the same window on every instance (given NTP-synced clocks), so instances can meet on one
 * Redis key per identifier per second. The price of a fixed window is the classic boundary burst: up to
 * 2 x limit can pass within any 1 s span straddling a boundary; a sliding window would not allow that,
 * but costs more per check and cannot be merged across instances as cheaply.
 */
export interface RateLimiter {
  /**
   * Admits `cost` request objects (a batch of 30 costs 30) for `identifier` against `limitPerSecond`.
   * All or nothing: a request that would take the identifier over the limit is refused whole and
   * consumes nothing. Synchronous and never throws; no Redis round trip.
   *
   * `commit: false` decides without consuming (a read: another thread may take the room before a later
   * commit). A caller that must pass two windows (an app's cap and its workspace's limit) commits the
   * first, checks the second, and on the second's refusal `refund`s the first, in one synchronous turn.
   *
   * With a process table shared by the serving threads (WindowCounts) the count is the process's: the
   * limit is exact for the process, not only for this thread.
   */
  check(identifier: string, cost: number, limitPerSecond: number, commit?: boolean): RateLimitResult;

  /**
   * Takes back `cost` admitted for `identifier` by a `check` of this same synchronous turn (the second
   * window of a two-window admission refused). Between the two, another thread may have seen the count
   * with it and refused a request of its own: early, never late.
   */
  refund(identifier: string, cost: number): void;
}

export interface RateLimitResult {
  readonly allowed: boolean;
  /** The per-second limit applied (`data.limit` in the error). */
  readonly limit: number;
  /** Request objects still admissible in this window after this decision (never negative). */
  readonly remaining: number;
  /** 0 when allowed; otherwise ms until the window resets (the `Retry-After` / `data.retryAfterMs`). */
  readonly retryAfterMs: number;
  /** Epoch ms at which the current window ends. */
  readonly resetAtMs: number;
  /**
   * Why a refusal is special; absent on an ordinary "over the limit this second" refusal.
   * - `batch_exceeds_limit`: cost > limit, so this request can never pass: split the batch or upgrade.
   * - `store_unavailable`: fail-closed mode and Redis has been unreachable too long.
   */
  readonly reason?: RateLimitRefusal;
}

export type RateLimitRefusal = "batch_exceeds_limit" | "store_unavailable";

export const WINDOW_MS = 1000;

/** Extra fields for the 429 error object (`errorResponse(GatewayError.RateLimited, id, {...})`). */
export function rateLimitErrorExtras(r: RateLimitResult): {
  retryAfterMs: number;
  limit: number;
  message?: string;
} {
  if (r.reason === "batch_exceeds_limit") {
    return {
      retryAfterMs: r.retryAfterMs,
      limit: r.limit,
      message: `Too many requests: batch larger than the rate limit of ${r.limit} requests/s; split the batch or upgrade the plan`,
    };
  }
  return { retryAfterMs: r.retryAfterMs, limit: r.limit };
}

/** `Retry-After` header value: whole seconds, rounded up, at least 1. */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

const UNLIMITED: RateLimitResult = Object.freeze({
  allowed: true,
  limit: Number.POSITIVE_INFINITY,
  remaining: Number.POSITIVE_INFINITY,
  retryAfterMs: 0,
  resetAtMs: 0,
  reason: undefined,
});

/** Limits off (the benchmark's "limits off" run, or a deployment that limits elsewhere). */
export class NoopRateLimiter implements RateLimiter {
  check(): RateLimitResult {
    return UNLIMITED;
  }

  refund(): void {}
}

/** Shared decision for a refusal or an unlimited pass; kept out of the classes so both stay identical. */
export function refuse(
  limit: number,
  used: number,
  windowEndMs: number,
  nowMs: number,
  reason: RateLimitRefusal | undefined = undefined,
): RateLimitResult {
  const retryAfterMs = Math.max(1, windowEndMs - nowMs);
  const remaining = Math.max(limit - used, 0);
  return { allowed: false, limit, remaining, retryAfterMs, resetAtMs: windowEndMs, reason };
}

/**
 * Single-instance limiter (RATE_LIMIT_MODE=local): exact for the process. Counts live in a WindowCounts
 * table, the process's when the serving threads share one (`counts`), else this limiter's own; only the
 * current window's counts matter, a slot is reclaimed once its window is two seconds old.
 */
export class LocalRateLimiter implements RateLimiter {
  private readonly clock: Clock;
  private windowIndex = -1;
  private readonly counts: WindowCounts;
  /** Identifiers' slot handles in the current window (stable for it), so a busy one is looked up once. */
  private slots = new Map<string, number>();

  constructor(opts: { clock?: Clock; counts?: WindowCounts } = {}) {
    this.clock = opts.clock ?? systemClock;
    this.counts = opts.counts ?? new WindowCounts();
  }

  check(identifier: string, cost: number, limitPerSecond: number, commit = true): RateLimitResult {
    const nowMs = this.clock.now();
    const index = Math.floor(nowMs / WINDOW_MS);
    // A clock stepping backwards stays in the newest window seen, rather than reopening an old one.
    if (index > this.windowIndex) {
      this.windowIndex = index;
      this.slots = new Map();
    }
    const windowEndMs = (this.windowIndex + 1) * WINDOW_MS;
    if (!(limitPerSecond < Number.POSITIVE_INFINITY)) return UNLIMITED;
    const counts = this.counts;
    let slot = this.slots.get(identifier);
    if (slot === undefined) {
      slot = counts.slot(identifier, this.windowIndex);
      this.slots.set(identifier, slot);
    }
    let used = counts.load(slot);
    if (cost > limitPerSecond) {
      return refuse(limitPerSecond, used, windowEndMs, nowMs, "batch_exceeds_limit");
    }
    for (;;) {
      if (used + cost > limitPerSecond) return refuse(limitPerSecond, used, windowEndMs, nowMs);
      if (cost <= 0 || !commit) break;
      // Another thread may have added since the load: the add happens only on the count it was decided on.
      const found = counts.compareExchange(slot, used, used + cost);
      if (found === used) break;
      used = found;
    }
    return {
      allowed: true,
      limit: limitPerSecond,
      remaining: limitPerSecond - used - cost,
      retryAfterMs: 0,
      resetAtMs: windowEndMs,
      // Present (undefined) on every result: one object shape keeps the hot path monomorphic.
      reason: undefined,
    };
  }

  refund(identifier: string, cost: number): void {
    if (cost > 0) this.counts.refund(identifier, this.windowIndex, cost);
  }

  /** Identifiers holding a count in the current window (a table scan); for tests and metrics. */
  get size(): number {
    return this.counts.active(this.windowIndex);
  }
}
