import type { PlanLimits } from "../../../shared/src/redis/records";
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

/** A tenant's two caps: calls in flight and heavy calls in flight (0 = that cap is off). */
export interface FlightCaps {
  readonly max: number;
  readonly maxHeavy: number;
}

/**
 * A tenant's account at the concurrency caps: its id (app key: its limit id `app:{appId}`; node key
 * `node:{nodeId}`; public endpoint `ip:{address}`) and the caps that apply to it (its plan's
 * maxInFlightPerKey / maxHeavyInFlightPerKey, else the process's MAX_IN_FLIGHT_PER_KEY /
 * MAX_HEAVY_IN_FLIGHT_PER_KEY). Built once per verified key (VerifiedKey.flight), so a plan change, which
 * re-publishes the key record, brings new caps with the new record.
 */
export interface Flight extends FlightCaps {
  readonly id: string;
}

/**
 * Upstream calls in flight per tenant, across HTTP and WebSocket and every serving thread of the process
 * (limits/tenant-counts.ts). A tenant flooding slow calls holds at most `max` of the upstream connections,
 * and at most `maxHeavy` heavy calls (eth_getLogs, debug_*, trace_*, ...: the network's share of
 * heavy-call connections is not one tenant's to take), so the others keep theirs. The caps are the
 * tenant's (Flight: its plan's, else this limiter's defaults); the counts are per id, so slots taken under
 * a plan's old caps are given back the same way after a change.
 *
 * What holds a slot (the counting rule, docs/contracts.md#limits-and-plans): a single call that goes
 * upstream holds one; a batch holds one per upstream exchange it starts (forward/forward.ts batchSlots:
 * one per chunk it is spread over, one per element sent on its own), not one per element, because a node
 * works through one exchange's elements on one connection. Heavy slots are per heavy element, batch or
 * not: each is a scan of its own on the node. Cache hits, refusals and subscriptions hold none. A slot is
 * released when the upstream call settles, not when the client goes away: an aborted client's call still
 * occupies the node until it ends.
 *
 * For the total cap, when nothing is in flight for the id any size is admitted, so a request larger than
 * the cap is not refused forever. Not so for the heavy cap: one request with more heavy calls than
 * `maxHeavy` is refused (HeavyRequestTooLarge), else an idle key could start a batch of 100 slow getLogs at
 * once. A cap of 0 is off.
 */
export class ConcurrencyLimiter implements FlightCaps {
  private readonly total: TenantCounts;
  private readonly heavyCounts: TenantCounts;

  /** `max` / `maxHeavy`: the defaults (MAX_IN_FLIGHT_PER_KEY / MAX_HEAVY_IN_FLIGHT_PER_KEY). */
  constructor(
    readonly max: number,
    readonly maxHeavy = 0,
    counts: Pick<TenantCountSet, "inFlight" | "heavyInFlight"> = localTenantCounts(),
  ) {
    this.total = counts.inFlight;
    this.heavyCounts = counts.heavyInFlight;
  }

  /** A tenant with the default caps (the public endpoint's client addresses). */
  flight(id: string): Flight {
    return { id, max: this.max, maxHeavy: this.maxHeavy };
  }

  /** A key's tenant: its plan's caps where the plan sets them, the defaults otherwise. */
  planFlight(id: string, plan: PlanLimits): Flight {
    return {
      id,
      max: plan.maxInFlightPerKey ?? this.max,
      maxHeavy: plan.maxHeavyInFlightPerKey ?? this.maxHeavy,
    };
  }

  /**
   * Takes `n` slots for `id`, `heavy` of them on the heavy cap, under `caps` (the defaults unless given);
   * nothing is taken when refused.
   */
  tryAcquire(id: string, n: number, heavy = 0, caps: FlightCaps = this): Acquired {
    const max = caps.max;
    const maxHeavy = caps.maxHeavy;
    if (max > 0 && !this.total.tryAdd(id, n, max, true)) return Acquired.OverTotal;
    if (heavy > 0 && maxHeavy > 0) {
      const refused =
        heavy > maxHeavy
          ? Acquired.HeavyRequestTooLarge
          : this.heavyCounts.tryAdd(id, heavy, maxHeavy)
            ? undefined
            : Acquired.OverHeavy;
      if (refused !== undefined) {
        if (max > 0) this.total.sub(id, n);
        return refused;
      }
    }
    return Acquired.Ok;
  }

  /** Gives back what one successful tryAcquire took (same `n`, `heavy` and `caps`), exactly once. */
  release(id: string, n: number, heavy = 0, caps: FlightCaps = this): void {
    if (caps.max > 0) this.total.sub(id, n);
    if (heavy > 0 && caps.maxHeavy > 0) this.heavyCounts.sub(id, heavy);
  }

  /** Takes a tenant's slots under its own caps (see tryAcquire). */
  acquireFor(flight: Flight, n: number, heavy: number): Acquired {
    return this.tryAcquire(flight.id, n, heavy, flight);
  }

  /** Gives back what acquireFor took. */
  releaseFor(flight: Flight, n: number, heavy: number): void {
    this.release(flight.id, n, heavy, flight);
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
