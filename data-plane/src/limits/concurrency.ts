/** Outcome of ConcurrencyLimiter.tryAcquire. */
export const Acquired = {
  Ok: 0,
  OverTotal: 1,
  OverHeavy: 2,
  /** One request carries more heavy calls than the heavy cap: refused whatever is in flight (split it). */
  HeavyRequestTooLarge: 3,
} as const;
export type Acquired = (typeof Acquired)[keyof typeof Acquired];

/** The message of a concurrency refusal by the heavy-call cap (data.limit is that cap). */
export const HEAVY_CONCURRENCY_MESSAGE =
  "Too many requests: too many heavy calls (eth_getLogs, debug_*, trace_*, ...) in flight for this key";

/**
 * The message of a concurrency refusal (undefined = the row's own, for the total cap). Built only on a
 * refusal; data.limit is the heavy cap for both heavy outcomes.
 */
export function concurrencyRefusalMessage(
  got: Acquired,
  heavy: number,
  maxHeavy: number,
): string | undefined {
  if (got === Acquired.OverHeavy) return HEAVY_CONCURRENCY_MESSAGE;
  if (got === Acquired.HeavyRequestTooLarge) {
    return `Too many requests: this request carries ${heavy} heavy calls (eth_getLogs, debug_*, trace_*, ...); at most ${maxHeavy} may be in flight per key: split it into requests of at most ${maxHeavy} heavy calls`;
  }
  return undefined;
}

/**
 * Upstream calls in flight per tenant (app key: its limit id `app:{appId}`; public endpoint: `ip:{address}`),
 * across HTTP and WebSocket, in this process. A tenant flooding slow calls holds at most `max` of the
 * upstream connections, and at most `maxHeavy` heavy calls (eth_getLogs, debug_*, trace_*, ...: the
 * network's share of heavy-call connections is not one tenant's to take), so the others keep theirs.
 *
 * Counted in request objects that go upstream (a batch of 30 forwarded elements holds 30); cache hits,
 * refusals and subscriptions hold none. A slot is released when the upstream call settles, not when the
 * client goes away: an aborted client's call still occupies the node until it ends.
 *
 * For the total cap, when nothing is in flight for the id any size is admitted, so a batch larger than the
 * cap is not refused forever. Not so for the heavy cap: one request with more heavy calls than `maxHeavy`
 * is refused (HeavyRequestTooLarge), else an idle key could start a batch of 100 slow getLogs at once. A
 * cap of 0 is off.
 */
export class ConcurrencyLimiter {
  private readonly counts = new Map<string, number>();
  private readonly heavyCounts = new Map<string, number>();

  constructor(
    readonly max: number,
    readonly maxHeavy = 0,
  ) {}

  /** Takes `n` slots for `id`, `heavy` of them heavy calls (heavy <= n); nothing is taken when refused. */
  tryAcquire(id: string, n: number, heavy = 0): Acquired {
    let cur = 0;
    if (this.max > 0) {
      cur = this.counts.get(id) ?? 0;
      if (cur > 0 && cur + n > this.max) return Acquired.OverTotal;
    }
    if (heavy > 0 && this.maxHeavy > 0) {
      if (heavy > this.maxHeavy) return Acquired.HeavyRequestTooLarge;
      const h = this.heavyCounts.get(id) ?? 0;
      if (h + heavy > this.maxHeavy) return Acquired.OverHeavy;
      this.heavyCounts.set(id, h + heavy);
    }
    if (this.max > 0) this.counts.set(id, cur + n);
    return Acquired.Ok;
  }

  /** Gives back what one successful tryAcquire took (same `n` and `heavy`), exactly once. */
  release(id: string, n: number, heavy = 0): void {
    if (this.max > 0) drop(this.counts, id, n);
    if (heavy > 0 && this.maxHeavy > 0) drop(this.heavyCounts, id, heavy);
  }

  /** Slots held by `id` now. */
  inFlight(id: string): number {
    return this.counts.get(id) ?? 0;
  }

  /** Heavy-call slots held by `id` now. */
  heavyInFlight(id: string): number {
    return this.heavyCounts.get(id) ?? 0;
  }

  /** Ids holding slots (a leak would show as a growing number). */
  get size(): number {
    return Math.max(this.counts.size, this.heavyCounts.size);
  }
}

function drop(m: Map<string, number>, id: string, n: number): void {
  const cur = m.get(id);
  if (cur === undefined) return;
  if (cur <= n) m.delete(id);
  else m.set(id, cur - n);
}
