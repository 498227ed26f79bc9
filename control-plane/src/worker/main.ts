import "reflect-metadata";
import "../telemetry/worker-tracing";
import { createLogger } from "../../../shared/src/log/logger";
import { currentTelemetry } from "../../../shared/src/telemetry/telemetry";
import { loadConfig } from "../config";
import { startWorker } from "./worker";

/** Worker process: `node dist/control-plane/src/worker/main.js`. */
async function main(): Promise<void> {
  // The worker authenticates nobody (no ADMIN_TOKEN) but opens webhook signing secrets: in production it
  // needs KEY_ENCRYPTION_SECRET.
  const config = loadConfig(process.env, { worker: true });
  const log = createLogger("control-plane-worker", config.logLevel);
  // Signals are handled from the start: one arriving while the worker is still starting closes it once
  // started (a default SIGTERM would kill it mid-start with exit code null).
  const started = startWorker(config, log);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "worker shutting down");
    started
      .then((w) => w.close())
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
  await started;
}

main().catch((err) => {
  process.stderr.write(`worker failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
