import { collectDefaultMetrics, type Registry } from "prom-client";

/**
 * The process and runtime series (`process_*`: CPU, resident memory, open files; `nodejs_*`: event-loop
 * lag, heap spaces, GC durations, active handles) on `registry`. Called once per thread by the process
 * entries only (main.ts, threads/supervisor.ts, threads/worker.ts), never by `startDataPlane`, which tests
 * start many times in one process. A serving thread passes its index: its `nodejs_*` series carry
 * `thread`, and threads/metrics.ts keeps the process-wide `process_*` series of the main thread only.
 */
export function collectRuntimeMetrics(registry: Registry, thread?: number): void {
  collectDefaultMetrics({
    register: registry,
    labels: thread === undefined ? undefined : { thread: String(thread) },
  });
}
