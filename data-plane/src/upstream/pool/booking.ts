import type { ExchangeFailure, ExchangeResult, Upstream } from "../upstream";
import type { PoolClock } from "./clock";
import type { PoolMetricHooks } from "./metric-hooks";
import { NOT_BAD, RATE_LIMITED } from "./wire";

/**
 * Books each settled exchange with a node: its metrics, a back-off for the node's rate-limit answer, a
 * health probe after a timeout (the call's timeout is no verdict on the node; a probe, at most one at a
 * time, gives one).
 */
export class ExchangeBook {
  constructor(
    private readonly hooks: PoolMetricHooks,
    private readonly clock: PoolClock,
    /** Probes a node whose exchange timed out (PoolHealth.probe). */
    private readonly probe: (u: Upstream) => Promise<unknown>,
  ) {}

  /**
   * Books one settled exchange with `u` (started at `start`, the clock's monotonic reading). Returns
   * undefined when `res` holds a usable answer, else why not.
   */
  book(u: Upstream, res: ExchangeResult<unknown>, start: number): ExchangeFailure | undefined {
    const seconds = (this.clock.monotonic() - start) / 1000;
    if (res.ok) {
      const value = res.value;
      if (value !== NOT_BAD && value !== RATE_LIMITED) {
        this.hooks.request(u.id, "ok", seconds);
        return undefined;
      }
      this.hooks.request(u.id, "error", seconds);
      if (value === NOT_BAD) return "bad";
      u.backOff(undefined);
      return "rate_limited";
    }
    const f = res.failure;
    this.hooks.request(
      u.id,
      f === "timeout" ? "timeout" : f === "cancelled" ? "cancelled" : "error",
      seconds,
    );
    if (f === "timeout") void this.probe(u);
    return f;
  }
}
