import { AggregatorRegistry } from "prom-client";
import type { MetricsSnapshot } from "../metrics/metrics";

/** One serving thread's series for a scrape of the whole process. */
export interface ThreadSnapshot {
  /** 1..threads */
  readonly index: number;
  readonly metrics: MetricsSnapshot;
  /** False when the thread did not answer this scrape and its previous snapshot stands in. */
  readonly fresh: boolean;
}

type SnapshotMetric = MetricsSnapshot[number];

function series(
  name: string,
  help: string,
  type: "counter" | "gauge",
  values: { labels: Record<string, string>; value: number }[],
): SnapshotMetric {
  return { name, help, type, values, aggregator: "sum" } as unknown as SnapshotMetric;
}

/**
 * /metrics of the whole process: every thread's series merged by prom-client's `AggregatorRegistry.aggregate`
 * (counters and histograms summed by labels; gauges by their `aggregator`, see metrics/metrics.ts), with
 * the main thread's own (its process-level fault counts), plus three series about the threads themselves:
 * `rpcgw_data_plane_threads`, `rpcgw_thread_up{thread}` and `rpcgw_thread_requests_total{thread}` (how
 * the kernel spread the load: each thread's request objects answered).
 *
 * A thread that did not answer in time (busy, or already stopped during a shutdown) is represented by its
 * last snapshot, so the process's counters never go backwards between scrapes (which Prometheus would read
 * as a restart), and `rpcgw_thread_up` says 0 for it.
 */
export async function renderProcessMetrics(
  own: MetricsSnapshot,
  threads: readonly ThreadSnapshot[],
  configured: number,
): Promise<string> {
  const up: { labels: Record<string, string>; value: number }[] = [];
  const perThread: { labels: Record<string, string>; value: number }[] = [];
  for (const t of threads) {
    const labels = { thread: String(t.index) };
    up.push({ labels, value: t.fresh ? 1 : 0 });
    const requests = t.metrics.find((m) => m.name === "rpcgw_requests_total");
    let n = 0;
    for (const v of requests?.values ?? []) n += v.value;
    perThread.push({ labels, value: n });
  }
  const about: MetricsSnapshot = [
    series("rpcgw_data_plane_threads", "Serving threads configured (DATA_PLANE_THREADS)", "gauge", [
      { labels: {}, value: configured },
    ]),
    series(
      "rpcgw_thread_up",
      "1 when the thread answered this scrape; 0 when its last snapshot stands in (stopped or busy)",
      "gauge",
      up,
    ),
    series(
      "rpcgw_thread_requests_total",
      "JSON-RPC request objects answered, by serving thread (rpcgw_requests_total split by thread)",
      "counter",
      perThread,
    ),
  ];
  // process_* (CPU, resident memory, open files) are the whole process's whichever thread reads them: the
  // main thread's stand; each thread's nodejs_* (its own heap, event loop, GC) carry its `thread` label.
  const serving = threads.map((t) => t.metrics.filter((m) => !m.name.startsWith("process_")));
  return AggregatorRegistry.aggregate([own, ...serving, about]).metrics();
}
