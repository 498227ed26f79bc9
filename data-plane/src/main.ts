import { createLogger } from "../../shared/src/log/logger";
import { loadTelemetryConfig } from "../../shared/src/telemetry/config";
import { type DataPlaneConfig, dataPlaneThreads, loadDataPlaneConfig, shutdownBudgetMs } from "./config";
import { tuneHeap } from "./memory/heap-tuning";
import { DATA_PLANE_SERVICE } from "./telemetry/create";
import { installFaultPolicy } from "./threads/fault-policy";
import { runThreads } from "./threads/supervisor";

/**
 * Process entry point: `node dist/data-plane/src/main.js`. SIGTERM/SIGINT drain and exit 0. With
 * DATA_PLANE_THREADS > 1 (the default on a machine with several CPUs) the planes run in worker threads
 * (threads/supervisor.ts); with 1, in this thread, as below.
 */
async function main(): Promise<void> {
  const config = loadDataPlaneConfig();
  // Each thread starts its own SDK from the same OTEL_*: checked here first, so that an invalid value
  // fails the process once, before any thread, like any other setting.
  loadTelemetryConfig(DATA_PLANE_SERVICE);
  // V8 flags are process-wide: set here, before any worker thread's heap exists, it applies to every one.
  tuneHeap(config.V8_HEAP_GROWING_PERCENT, config.V8_ALLOCATION_SITE_PRETENURING);
  const threads = dataPlaneThreads(config);
  if (threads > 1) return runThreads(config, threads);
  return singleThread(config);
}

async function singleThread(config: DataPlaneConfig): Promise<void> {
  // Loaded here, not at the top: the main thread of several serves nothing and skips the plane's modules.
  const { startDataPlane } = require("./data-plane") as typeof import("./data-plane");
  const { PromMetrics } = require("./metrics/metrics") as typeof import("./metrics/metrics");
  const { serveMetrics } =
    require("../../shared/src/metrics/server") as typeof import("../../shared/src/metrics/server");
  const { collectRuntimeMetrics } = require("./metrics/runtime") as typeof import("./metrics/runtime");
  const logger = createLogger("data-plane", config.LOG_LEVEL);
  const metrics = new PromMetrics();
  collectRuntimeMetrics(metrics.registry);
  const plane = await startDataPlane(config, { logger, metrics });
  // After the plane (its checks, e.g. the native uWS binding, come first); a metrics port already taken
  // fails the start like a taken public port: exit 1 with the reason.
  const metricsListener = await serveMetrics({
    host: config.METRICS_HOST,
    port: config.METRICS_PORT,
    contentType: metrics.contentType,
    render: () => metrics.render(),
    logger,
  });
  let stopping = false;
  let exitCode = 0;
  let forceExitArmed = false;
  const stop = (signal: string, failed = false) => {
    if (failed) {
      // Whatever the shutdown state (an exception during a SIGTERM drain too): the exit code says the
      // process failed, and the drain must not hang a broken process (its supervisor restarts it).
      exitCode = 1;
      if (!forceExitArmed) {
        forceExitArmed = true;
        setTimeout(() => process.exit(1), shutdownBudgetMs(config)).unref();
      }
    }
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down: draining in-flight requests");
    plane.close().then(
      // Scrapes are answered through the drain; the listener goes with the process.
      () => metricsListener.close().then(() => process.exit(exitCode)),
      (err: unknown) => {
        logger.error({ err }, "error during shutdown");
        process.exit(1);
      },
    );
  };
  installFaultPolicy(logger, plane.context.metrics, () => stop("uncaughtException", true));
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
