/**
 * Process-wide budget of bytes buffered from upstream answers (UPSTREAM_BUFFER_BUDGET_BYTES), shared by every
 * network pool and the dedicated-node endpoint. UPSTREAM_MAX_RESPONSE_BYTES caps one answer; this caps their
 * sum, which tenant concurrency would otherwise multiply (MAX_IN_FLIGHT_PER_KEY calls x the cap per key).
 *
 * Invariant: `used` is the sum of what every live exchange took and has not yet given back; each exchange
 * gives back exactly what it took, once, however it ends, so `used` is never negative and is 0 when
 * nothing is in flight. Hot path: one add and one compare per chunk.
 */
export class BufferBudget {
  /** Bytes held now (for metrics and tests). */
  used = 0;
  /** Exchanges refused because the budget was spent (for metrics and tests). */
  refused = 0;

  constructor(readonly limitBytes: number) {}

  /** Takes `n` bytes; false (nothing taken) when that would pass the limit. */
  take(n: number): boolean {
    const next = this.used + n;
    if (next > this.limitBytes) {
      this.refused++;
      return false;
    }
    this.used = next;
    return true;
  }

  /** Whether `n` more bytes fit now (a declared Content-Length), without taking them. */
  fits(n: number): boolean {
    return this.used + n <= this.limitBytes;
  }

  /** Gives back `n` bytes taken earlier. */
  release(n: number): void {
    this.used -= n;
  }
}

/** Default UPSTREAM_BUFFER_BUDGET_BYTES: 256 MiB. */
export const DEFAULT_BUFFER_BUDGET_BYTES = 256 * 1024 * 1024;

/** The budget of pools and gateways built without one (the data plane passes its configured one). */
export const defaultBufferBudget = new BufferBudget(DEFAULT_BUFFER_BUDGET_BYTES);
