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
  /** Exchanges refused because the budget was spent (for metrics and tests). */
  refused = 0;
  private held = 0;

  constructor(readonly limitBytes: number) {}

  /** Bytes held now (for metrics and tests). */
  get used(): number {
    return this.held;
  }

  /** Takes `n` bytes; false (nothing taken) when that would pass the limit. */
  take(n: number): boolean {
    const next = this.held + n;
    if (next > this.limitBytes) {
      this.refused++;
      return false;
    }
    this.held = next;
    return true;
  }

  /** Whether `n` more bytes fit now (a declared Content-Length), without taking them. */
  fits(n: number): boolean {
    return this.held + n <= this.limitBytes;
  }

  /** Gives back `n` bytes taken earlier. */
  release(n: number): void {
    this.held -= n;
  }
}

/**
 * The same budget shared by every thread of a process (DATA_PLANE_THREADS > 1): UPSTREAM_BUFFER_BUDGET_BYTES
 * bounds the process's memory, not each thread's. `used` lives in a SharedArrayBuffer (one 64-bit cell:
 * the limit may pass 2^31 bytes) updated by compare-and-swap, so a take never passes the limit whatever
 * the threads do at once; `refused` counts this thread's refusals.
 */
export class SharedBufferBudget extends BufferBudget {
  private readonly cell: BigInt64Array;
  private readonly limit: bigint;

  /** `shared`: 8 bytes from `SharedBufferBudget.allocate()`, the same for every thread. */
  constructor(limitBytes: number, shared: SharedArrayBuffer) {
    super(limitBytes);
    this.cell = new BigInt64Array(shared, 0, 1);
    this.limit = BigInt(limitBytes);
  }

  static allocate(): SharedArrayBuffer {
    return new SharedArrayBuffer(8);
  }

  override get used(): number {
    return Number(Atomics.load(this.cell, 0));
  }

  override take(n: number): boolean {
    const add = BigInt(n);
    let cur = Atomics.load(this.cell, 0);
    for (;;) {
      const next = cur + add;
      if (next > this.limit) {
        this.refused++;
        return false;
      }
      const seen = Atomics.compareExchange(this.cell, 0, cur, next);
      if (seen === cur) return true;
      cur = seen;
    }
  }

  override fits(n: number): boolean {
    return Atomics.load(this.cell, 0) + BigInt(n) <= this.limit;
  }

  override release(n: number): void {
    Atomics.sub(this.cell, 0, BigInt(n));
  }
}

/** Default UPSTREAM_BUFFER_BUDGET_BYTES: 256 MiB. */
export const DEFAULT_BUFFER_BUDGET_BYTES = 256 * 1024 * 1024;

/** The budget of pools and gateways built without one (the data plane passes its configured one). */
export const defaultBufferBudget = new BufferBudget(DEFAULT_BUFFER_BUDGET_BYTES);
