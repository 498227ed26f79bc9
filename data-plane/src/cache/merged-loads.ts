import { InFlightMap } from "../memory/in-flight-map";
import type { CallResult } from "../upstream/reply";

/**
 * This thread's loads in flight by cache key: a second ask for a key joins the first load's promise
 * instead of starting another. Each cache (per-thread or shared between threads) merges through one.
 */
export class MergedLoads {
  private readonly inFlight = new InFlightMap<string, Promise<CallResult>>();
  /** The traceparents of the in-flight loads of sampled requests (only those: unsampled ones add nothing). */
  private readonly traces = new Map<string, string>();

  /** The load in flight for `key`, or the one `start` begins (forgotten once it settles). */
  merge(key: string, start: () => Promise<CallResult>, traceparent?: string): Promise<CallResult> {
    const existing = this.inFlight.get(key);
    if (existing !== undefined) return existing;
    const p = start().then(
      (r) => {
        this.inFlight.delete(key);
        if (traceparent !== undefined) this.traces.delete(key);
        return r;
      },
      (err: unknown) => {
        this.inFlight.delete(key);
        if (traceparent !== undefined) this.traces.delete(key);
        throw err;
      },
    );
    this.inFlight.set(key, p);
    if (traceparent !== undefined) this.traces.set(key, traceparent);
    return p;
  }

  /** A load of `key` in flight on this thread: its traceparent ("" when unsampled); undefined: none. */
  joining(key: string): string | undefined {
    if (this.inFlight.get(key) === undefined) return undefined;
    return this.traces.get(key) ?? "";
  }
}
