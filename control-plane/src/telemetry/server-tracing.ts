import { startProcessTelemetry } from "../../../shared/src/telemetry/telemetry";

/**
 * The control plane's first import (main.ts): tracing starts before http, graphql and pg are required,
 * which their instrumentations need to hook them. Off unless OTEL_* turn it on (shared/src/telemetry).
 */
startProcessTelemetry("rpc-gateway-control-plane", { instrument: "server" });
