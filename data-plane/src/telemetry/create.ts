import { startTelemetry } from "../../../shared/src/telemetry/telemetry";
import { NO_TRACING, type RequestTracing } from "./tracing";

/** OTEL_SERVICE_NAME's default for the data plane. */
export const DATA_PLANE_SERVICE = "rpc-gateway-data-plane";

/**
 * This thread's request tracing: the SDK (one per data-plane thread: each is its own isolate, with its
 * own exporter and batch queue) when OTEL_* turn tracing on, else NO_TRACING, and no SDK module loaded.
 */
export function createTracing(threadId: number, env: NodeJS.ProcessEnv = process.env): RequestTracing {
  const telemetry = startTelemetry(
    DATA_PLANE_SERVICE,
    { instrument: "none", presampled: true, attributes: { "thread.id": threadId } },
    env,
  );
  if (!telemetry.enabled) return NO_TRACING;
  const { OtelTracing } = require("./otel-tracing") as typeof import("./otel-tracing");
  return new OtelTracing(telemetry);
}
