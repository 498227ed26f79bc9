import "reflect-metadata";
import "./telemetry/server-tracing";
import { collectDefaultMetrics } from "prom-client";
import { createLogger } from "../../shared/src/log/logger";
import { serveMetrics } from "../../shared/src/metrics/server";
import { currentTelemetry } from "../../shared/src/telemetry/telemetry";
import { loadConfig } from "./config";
import { createControlPlane } from "./server";

/**
 * Control plane process: GraphQL at POST /graphql on CONTROL_PLANE_PORT, Prometheus /metrics on
 * CONTROL_PLANE_METRICS_PORT.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger("control-plane", config.logLevel);
  if (config.adminTokenGenerated) {
    log.warn(
      "ADMIN_TOKEN is not set: generated a random operator token for this process (set ADMIN_TOKEN to fix it)",
    );
  }
  if (config.keyEncryptionSecretIsDefault) {
    log.warn("KEY_ENCRYPTION_SECRET is not set: using the fixed development secret; set it in production");
  }
  const cp = await createControlPlane(config, { log });
  collectDefaultMetrics({ register: cp.metrics.registry });
  const metricsListener = await serveMetrics({
    ...config.controlPlaneMetrics,
    contentType: cp.metrics.registry.contentType,
    render: () => cp.metrics.registry.metrics(),
    logger: log,
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    cp.close()
      .then(() => metricsListener.close())
      // Last: spans of the drain itself are flushed too.
      .then(() => currentTelemetry()?.shutdown())
      .then(
        () => process.exit(0),
        (err) => {
          log.error({ err }, "shutdown failed");
          process.exit(1);
        },
      );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err) => {
  process.stderr.write(
    `control plane failed to start: ${err instanceof Error ? err.message : String(err)}\n`,
  );
  process.exit(1);
});
