import type { Registry } from "prom-client";

type SnapshotMetric = Awaited<ReturnType<Registry["getMetricsAsJSON"]>>[number];
/** One value of a prom-client JSON series; a histogram's carry their series name (`_bucket`, `_sum`, `_count`). */
export type SnapshotValue = SnapshotMetric["values"][number] & { metricName?: string };

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A histogram kept in a typed array: observe() is a short loop and two adds, no label hashing. */
export class HotHistogram {
  readonly counts = new Float64Array(LATENCY_BUCKETS.length);
  sum = 0;
  count = 0;

  /** `n` observations of `v`. */
  observe(v: number, n = 1): void {
    this.sum += v * n;
    this.count += n;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      if (v <= LATENCY_BUCKETS[i]!) {
        this.counts[i]! += n;
        return;
      }
    }
  }

  /** The same series as `render`, as prom-client JSON values (`le` as text, like `render` writes it). */
  values(name: string, labels: Record<string, string>, out: SnapshotValue[]): void {
    let cum = 0;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      cum += this.counts[i]!;
      out.push({
        metricName: `${name}_bucket`,
        labels: { ...labels, le: String(LATENCY_BUCKETS[i]) },
        value: cum,
      });
    }
    out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: "+Inf" }, value: this.count });
    out.push({ metricName: `${name}_sum`, labels, value: this.sum });
    out.push({ metricName: `${name}_count`, labels, value: this.count });
  }

  render(name: string, labels: string, out: string[]): void {
    let cum = 0;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      cum += this.counts[i]!;
      out.push(`${name}_bucket{${labels},le="${LATENCY_BUCKETS[i]}"} ${cum}`);
    }
    out.push(`${name}_bucket{${labels},le="+Inf"} ${this.count}`);
    out.push(`${name}_sum{${labels}} ${this.sum}`);
    out.push(`${name}_count{${labels}} ${this.count}`);
  }
}
