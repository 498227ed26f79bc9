import { type Clock, systemClock } from "./clock";

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
   * `commit: false` decides without consuming: a caller that must pass two windows (an app's cap and its
   * workspace's limit) asks the first, checks the second, then commits the first, all in one synchronous
   * turn, so a refusal by either consumes nothing from the other.
   */
  check(identifier: string, cost: number, limitPerSecond: number, commit?: boolean): RateLimitResult;
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
 * Single-instance limiter: exact. Counts live in a map for the current window only; when the second
 * changes the map is replaced, so memory is bounded by the identifiers active in one second and cleanup
 * is O(1).
 */
export class LocalRateLimiter implements RateLimiter {
  private readonly clock: Clock;
  private windowIndex = -1;
  private counts = new Map<string, number>();

  constructor(opts: { clock?: Clock } = {}) {
    this.clock = opts.clock ?? systemClock;
  }

  check(identifier: string, cost: number, limitPerSecond: number, commit = true): RateLimitResult {
    const nowMs = this.clock.now();
    const index = Math.floor(nowMs / WINDOW_MS);
    // A clock stepping backwards stays in the newest window seen, rather than reopening an old one.
    if (index > this.windowIndex) {
      this.windowIndex = index;
      this.counts = new Map();
    }
    const windowEndMs = (this.windowIndex + 1) * WINDOW_MS;
    if (!(limitPerSecond < Number.POSITIVE_INFINITY)) return UNLIMITED;
    const used = this.counts.get(identifier) ?? 0;
    if (cost > limitPerSecond) {
      return refuse(limitPerSecond, used, windowEndMs, nowMs, "batch_exceeds_limit");
    }
    if (used + cost > limitPerSecond) return refuse(limitPerSecond, used, windowEndMs, nowMs);
    if (cost > 0 && commit) this.counts.set(identifier, used + cost);
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

  /** Identifiers holding state (those active in the current window); for tests and metrics. */
  get size(): number {
    return this.counts.size;
  }
}
