import { startProcessTelemetry } from "../../../shared/src/telemetry/telemetry";

/**
 * The worker's first import (worker/main.ts): tracing starts before pg is required, which its
 * instrumentation needs to hook it. Jobs get their spans from tracedProcessor (shared/src/telemetry/jobs.ts).
 */
startProcessTelemetry("rpc-gateway-worker", { instrument: "jobs" });
