import type { Metrics } from "../../metrics/metrics";
import type { Need } from "../capabilities";
import type { CallResult } from "../reply";
import type { UpstreamEvents } from "../upstream";
import { refusedForCapability } from "./wire";

/**
 * Every metric the pool writes, in one place, under the network's current slug (a networks update may
 * rename it). The pool's parts write through these hooks only, so a new series for the pool goes here.
 */
export class PoolMetricHooks {
  /** Breaker openings and back-offs, handed to each Upstream of the pool. */
  readonly upstreamEvents: UpstreamEvents;

  constructor(
    private readonly metrics: Metrics,
    private readonly slugOf: () => string,
  ) {
    this.upstreamEvents = {
      breakerOpened: (u, cause) => this.metrics.upstreamBreakerOpened(this.slugOf(), u.id, cause),
      backedOff: (u, ms) => this.metrics.upstreamBackoff(this.slugOf(), u.id, ms),
    };
  }

  /** One settled exchange with upstream `id`. */
  request(id: string, outcome: "ok" | "error" | "timeout" | "cancelled", seconds: number): void {
    this.metrics.upstreamRequest(this.slugOf(), id, outcome, seconds);
  }

  hedge(outcome: "won" | "lost" | "capped"): void {
    this.metrics.upstreamHedge(this.slugOf(), outcome);
  }

  overBudget(id: string, elements: number): void {
    this.metrics.upstreamOverBudget(this.slugOf(), id, elements);
  }

  emptyRetry(outcome: "found" | "empty" | "failed"): void {
    this.metrics.upstreamEmptyRetry(this.slugOf(), outcome);
  }

  logsSplit(subCalls: number, halvings: number): void {
    this.metrics.logsSplit(this.slugOf(), subCalls, halvings);
  }

  health(id: string, healthy: boolean, head: number, latencyMs: number): void {
    this.metrics.upstreamHealth(this.slugOf(), id, healthy, head, latencyMs);
  }

  oldestState(id: string, block: number): void {
    this.metrics.upstreamOldestState(this.slugOf(), id, block);
  }

  finalized(height: number): void {
    this.metrics.networkFinalized(this.slugOf(), height);
  }

  /** Counts a call that had a need in the capability metrics (routed, or refused for want of one). */
  counted(need: Need, r: CallResult): CallResult {
    const kind = need.block < 0 ? "family" : need.families === 0 ? "state" : "state_family";
    this.metrics.capabilityRouting(this.slugOf(), kind, refusedForCapability(r) ? "refused" : "routed");
    return r;
  }
}
