/**
 * An upstream's recent answer latencies as a log-bucketed histogram, for quantiles (the hedge delay is the
 * best node's p95, selection weighs each node's p90). Recording is one Math.log and one array increment: no sample list, no sort, no allocation.
 *
 * Buckets grow by 20% from 0.1 ms (bucket i holds [0.1 * 1.2^i, 0.1 * 1.2^(i+1)) ms; the last holds
 * everything from about an hour up), so a quantile is known to within 20%. It is read as the bucket's
 * upper edge: a delay derived from it errs towards waiting a little longer, never shorter.
 *
 * "Recent": two generations of counts, the current one and the previous one. The current one is retired
 * once it holds WINDOW_SAMPLES samples or is WINDOW_MS old, so the quantile covers between one and two
 * windows of traffic: a node that became slow (or fast again) is seen within a window. A node that gets
 * no traffic (selection steers away from a slow one) has its generations retired by `expire`, which the
 * health checks call: its quantiles become unknown within two windows, selection falls back to the
 * probes' latency, and a node that recovered earns traffic back.
 */
const BASE_MS = 0.1;
const GROWTH = 1.2;
const BUCKETS = 96;
const LOG_GROWTH = Math.log(GROWTH);
/** Samples per generation. */
const WINDOW_SAMPLES = 1024;
/** Longest life of a generation, in ms. */
export const WINDOW_MS = 10_000;
/** Fewer samples than this (both generations together) and the quantile is unknown. */
export const MIN_SAMPLES = 20;
/** The cached quantile is recomputed after this many new samples (a scan of the buckets per 16 samples). */
const RECOMPUTE_EVERY = 16;

export class LatencyWindow {
  private current = new Uint32Array(BUCKETS);
  private previous = new Uint32Array(BUCKETS);
  private currentCount = 0;
  private previousCount = 0;
  private currentSinceMs: number;
  private sinceRecompute = 0;
  /** Cached p95 and p90 in ms; -1 = unknown (too few samples). */
  private p95Ms = -1;
  private p90Ms = -1;

  constructor(nowMs: number = performance.now()) {
    this.currentSinceMs = nowMs;
  }

  /** Records one latency in ms; `nowMs` is performance.now() (the caller has it already). */
  record(ms: number, nowMs: number): void {
    if (this.currentCount >= WINDOW_SAMPLES || nowMs - this.currentSinceMs > WINDOW_MS) this.rotate(nowMs);
    this.current[bucketOf(ms)]!++;
    this.currentCount++;
    if (++this.sinceRecompute >= RECOMPUTE_EVERY || this.p95Ms < 0) this.recompute();
  }

  /** The 95th percentile over the window in ms (a bucket's upper edge); -1 while fewer than MIN_SAMPLES. */
  p95(): number {
    return this.p95Ms;
  }

  /** The 90th percentile, as p95 (selection's tail latency: see NetworkPool score). */
  p90(): number {
    return this.p90Ms;
  }

  /** Retires the current generation if it is older than WINDOW_MS, though it got no sample since (see above). */
  expire(nowMs: number): void {
    if (nowMs - this.currentSinceMs <= WINDOW_MS) return;
    this.rotate(nowMs);
    this.recompute();
  }

  /** Samples in the window (both generations). */
  get count(): number {
    return this.currentCount + this.previousCount;
  }

  /** The `q` quantile (0..1) over the window in ms, as the upper edge of its bucket; -1 when unknown. */
  quantile(q: number): number {
    const total = this.currentCount + this.previousCount;
    if (total < MIN_SAMPLES) return -1;
    // The rank of the q quantile, 1-based: the sample that at least q of all samples do not exceed.
    const rank = Math.max(1, Math.ceil(q * total));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.current[i]! + this.previous[i]!;
      if (seen >= rank) return upperEdge(i);
    }
    return upperEdge(BUCKETS - 1);
  }

  private rotate(nowMs: number): void {
    const old = this.previous;
    old.fill(0);
    this.previous = this.current;
    this.previousCount = this.currentCount;
    this.current = old;
    this.currentCount = 0;
    this.currentSinceMs = nowMs;
  }

  private recompute(): void {
    this.sinceRecompute = 0;
    this.p95Ms = this.quantile(0.95);
    this.p90Ms = this.quantile(0.9);
  }
}

function bucketOf(ms: number): number {
  if (!(ms > BASE_MS)) return 0;
  const i = Math.floor(Math.log(ms / BASE_MS) / LOG_GROWTH);
  return i >= BUCKETS ? BUCKETS - 1 : i;
}

function upperEdge(i: number): number {
  return BASE_MS * GROWTH ** (i + 1);
}

/** Health probes kept by ProbeLatencies. Odd, so the median is one of them. */
const PROBES_KEPT = 5;

/**
 * The latencies of an upstream's last few answered health probes, read as their median. Probes are one
 * sample every HEALTH_CHECK_INTERVAL_MS, fired by a timer together with the other upstreams' probes, so a
 * single one can carry the gateway's own scheduling delay (tens of ms on a loaded host) rather than the
 * node's: the median of five ignores up to two such outliers, where an EWMA of them stays raised for many
 * intervals. Selection compares two nodes by it unless both have a recent window of answers (selector.ts).
 */
export class ProbeLatencies {
  private readonly ring = new Float64Array(PROBES_KEPT);
  private readonly sorted = new Float64Array(PROBES_KEPT);
  private count = 0;
  private next = 0;
  private medianMs = -1;

  record(ms: number): void {
    this.ring[this.next] = ms;
    this.next = (this.next + 1) % PROBES_KEPT;
    if (this.count < PROBES_KEPT) this.count++;
    // Once per probe (seconds apart): a sort of at most five numbers.
    const view = this.sorted.subarray(0, this.count);
    view.set(this.ring.subarray(0, this.count));
    view.sort();
    this.medianMs = view[(this.count - 1) >> 1]!;
  }

  /** The median of the probes kept (the lower middle of an even count), in ms; -1 before the first. */
  median(): number {
    return this.medianMs;
  }
}
