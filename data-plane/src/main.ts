import { createLogger } from "../../shared/src/log/logger";
import { loadDataPlaneConfig } from "./config";
import { startDataPlane } from "./data-plane";
import { tuneHeap } from "./memory/heap-tuning";

/** Process entry point: `node dist/data-plane/src/main.js`. SIGTERM/SIGINT drain and exit 0. */
async function main(): Promise<void> {
  const config = loadDataPlaneConfig();
  tuneHeap(config.V8_HEAP_GROWING_PERCENT);
  const logger = createLogger("data-plane", config.LOG_LEVEL);
  const plane = await startDataPlane(config, { logger });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down: draining in-flight requests");
    plane.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, "error during shutdown");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
