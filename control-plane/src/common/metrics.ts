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

/**
 * Failed job attempts per queue (a webhook attempt that will be retried counts too), from each BullMQ
 * worker's `failed` event.
 */
export const queueJobFailures = new Counter({
  name: "rpcgw_worker_queue_job_failures_total",
  help: "BullMQ job attempts that failed, by queue (attempts that will be retried included)",
  labelNames: ["queue"],
  registers: [workerRegistry],
});

/** Webhook deliveries finished, by outcome: `succeeded` (a 2xx) or `failed` (attempts spent, or refused). */
export const webhookDeliveries = new Counter({
  name: "rpcgw_worker_webhook_deliveries_total",
  help: "Webhook deliveries finished, by outcome (succeeded, failed)",
  labelNames: ["outcome"],
  registers: [workerRegistry],
});

/** Webhook POST attempts, by result: `ok` (a 2xx answer) or `error` (anything else, a timeout included). */
export const webhookAttempts = new Counter({
  name: "rpcgw_worker_webhook_attempts_total",
  help: "Webhook delivery attempts (POSTs), by result (ok, error)",
  labelNames: ["result"],
  registers: [workerRegistry],
});

// Every known label value from the start, so a rate() over them has a series before the first event.
for (const outcome of ["succeeded", "failed"]) webhookDeliveries.labels(outcome).inc(0);
for (const result of ["ok", "error"]) webhookAttempts.labels(result).inc(0);
for (const stream of ["usage", "request-log"]) deadLetteredEntries.labels(stream).inc(0);
