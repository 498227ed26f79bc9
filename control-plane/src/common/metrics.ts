import { Counter, Registry } from "prom-client";

/**
 * The worker's own Prometheus series (one registry per process; whoever serves the worker's metrics port
 * renders it). Counters only: each is a fact about this process since it started.
 */
export const workerRegistry = new Registry();

/**
 * Stream entries set aside to their dead-letter stream after failing INGEST_MAX_ATTEMPTS times while the
 * store answered (common/stream-consumer.ts), by stream label (`usage`, `request-log`).
 */
export const deadLetteredEntries = new Counter({
  name: "rpcgw_worker_stream_dead_letters_total",
  help: "Stream entries set aside to the dead-letter stream after failing the maximum number of attempts",
  labelNames: ["stream"],
  registers: [workerRegistry],
});

/** Webhook jobs whose payload can never run (no such delivery, malformed), set aside instead of retried. */
export const poisonedJobs = new Counter({
  name: "rpcgw_worker_poisoned_jobs_total",
  help: "Queue jobs failed for good at once because their payload can never be processed",
  labelNames: ["queue"],
  registers: [workerRegistry],
});
