import { createLogger } from "../../shared/src/log/logger";
import { loadDataPlaneConfig } from "./config";
import { shutdownBudgetMs, startDataPlane } from "./data-plane";
import { tuneHeap } from "./memory/heap-tuning";

/** Process entry point: `node dist/data-plane/src/main.js`. SIGTERM/SIGINT drain and exit 0. */
async function main(): Promise<void> {
  const config = loadDataPlaneConfig();
  tuneHeap(config.V8_HEAP_GROWING_PERCENT);
  const logger = createLogger("data-plane", config.LOG_LEVEL);
  const plane = await startDataPlane(config, { logger });
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
      () => process.exit(exitCode),
      (err: unknown) => {
        logger.error({ err }, "error during shutdown");
        process.exit(1);
      },
    );
  };
  // Every uWS handler is guarded (server/guard.ts), so what reaches these comes from elsewhere (timers,
  // event emitters, background promise chains).
  // - A rejected promise nobody handled is a forgotten catch on background work (a Redis write, a health
  //   probe): the requests it belongs to have their own error paths, so it is logged, counted and the
  //   process keeps serving instead of dropping every client for one missed catch.
  // - An uncaught exception left a synchronous call chain half done, in unknown state (a counter not
  //   decremented, a map entry not removed): serving on could go on wrong silently. It is logged and
  //   counted, then the process drains (flushing usage, so nothing answered goes uncounted) and exits 1
  //   for its supervisor (`npm start`, compose `restart:`, Kubernetes) to restart it.
  const metrics = plane.context.metrics;
  process.on("unhandledRejection", (reason) => {
    metrics.handlerException("process.unhandledRejection");
    logger.error({ err: reason }, "unhandled promise rejection (kept serving)");
  });
  process.on("uncaughtException", (err) => {
    metrics.handlerException("process.uncaughtException");
    logger.fatal({ err }, "uncaught exception: draining and exiting for a restart");
    stop("uncaughtException", true);
  });
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
