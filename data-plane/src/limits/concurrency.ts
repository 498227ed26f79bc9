import { localTenantCounts, type TenantCountSet, type TenantCounts } from "./tenant-counts";

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
 * across HTTP and WebSocket and every serving thread of the process (limits/tenant-counts.ts). A tenant
 * flooding slow calls holds at most `max` of the upstream connections, and at most `maxHeavy` heavy calls
 * (eth_getLogs, debug_*, trace_*, ...: the network's share of heavy-call connections is not one tenant's
 * to take), so the others keep theirs.
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
  private readonly total: TenantCounts;
  private readonly heavyCounts: TenantCounts;

  constructor(
    readonly max: number,
    readonly maxHeavy = 0,
    counts: Pick<TenantCountSet, "inFlight" | "heavyInFlight"> = localTenantCounts(),
  ) {
    this.total = counts.inFlight;
    this.heavyCounts = counts.heavyInFlight;
  }

  /** Takes `n` slots for `id`, `heavy` of them heavy calls (heavy <= n); nothing is taken when refused. */
  tryAcquire(id: string, n: number, heavy = 0): Acquired {
    if (this.max > 0 && !this.total.tryAdd(id, n, this.max, true)) return Acquired.OverTotal;
    if (heavy > 0 && this.maxHeavy > 0) {
      const refused =
        heavy > this.maxHeavy
          ? Acquired.HeavyRequestTooLarge
          : this.heavyCounts.tryAdd(id, heavy, this.maxHeavy)
            ? undefined
            : Acquired.OverHeavy;
      if (refused !== undefined) {
        if (this.max > 0) this.total.sub(id, n);
        return refused;
      }
    }
    return Acquired.Ok;
  }

  /** Gives back what one successful tryAcquire took (same `n` and `heavy`), exactly once. */
  release(id: string, n: number, heavy = 0): void {
    if (this.max > 0) this.total.sub(id, n);
    if (heavy > 0 && this.maxHeavy > 0) this.heavyCounts.sub(id, heavy);
  }

  /** Slots held by `id` now. */
  inFlight(id: string): number {
    return this.total.get(id);
  }

  /** Heavy-call slots held by `id` now. */
  heavyInFlight(id: string): number {
    return this.heavyCounts.get(id);
  }

  /** Ids holding slots in this thread (a leak would show as a growing number). */
  get size(): number {
    return Math.max(this.total.size, this.heavyCounts.size);
  }
}
