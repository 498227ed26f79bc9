import "reflect-metadata";
import "../telemetry/worker-tracing";
import { collectDefaultMetrics } from "prom-client";
import { createLogger } from "../../../shared/src/log/logger";
import { type MetricsListener, serveMetrics } from "../../../shared/src/metrics/server";
import { currentTelemetry } from "../../../shared/src/telemetry/telemetry";
import { loadConfig } from "../config";
import { startWorker } from "./worker";

/** Worker process: `node dist/control-plane/src/worker/main.js`; Prometheus /metrics on WORKER_METRICS_PORT. */
async function main(): Promise<void> {
  // The worker authenticates nobody (no ADMIN_TOKEN) but opens webhook signing secrets: in production it
  // needs KEY_ENCRYPTION_SECRET.
  const config = loadConfig(process.env, { worker: true });
  const log = createLogger("control-plane-worker", config.logLevel);
  // Signals are handled from the start: one arriving while the worker is still starting closes it once
  // started (a default SIGTERM would kill it mid-start with exit code null).
  const started = startWorker(config, log);
  let metricsListener: MetricsListener | undefined;
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "worker shutting down");
    started
      .then((w) => w.close())
      .then(() => metricsListener?.close())
      .then(() => currentTelemetry()?.shutdown())
      .then(
        () => process.exit(0),
        (err) => {
          log.error({ err }, "worker shutdown failed");
          process.exit(1);
        },
      );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  const w = await started;
  collectDefaultMetrics({ register: w.metrics });
  metricsListener = await serveMetrics({
    ...config.workerMetrics,
    contentType: w.metrics.contentType,
    render: () => w.metrics.metrics(),
    logger: log,
  });
}

main().catch((err) => {
  process.stderr.write(`worker failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
