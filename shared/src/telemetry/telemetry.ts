import type { Tracer } from "@opentelemetry/api";
import { loadTelemetryConfig, type TelemetryConfig } from "./config";

/**
 * One process's (or data-plane thread's) tracing: the SDK when OTEL_* turn it on, else nothing at all.
 * The SDK's modules are required only when it starts (sdk.ts), so a process with tracing off loads none
 * of them and its hot paths see a constant `enabled === false`.
 */
export interface Telemetry {
  readonly enabled: boolean;
  readonly config: TelemetryConfig;
  /** The tracer of the gateway's own spans (undefined when off). */
  readonly tracer: Tracer | undefined;
  /** The active span's ids for a log line (pino mixin), undefined when off. */
  readonly logFields: (() => Record<string, string>) | undefined;
  /** Flushes the spans still queued and stops exporting (each process's drain path calls it last). */
  shutdown(): Promise<void>;
}

/**
 * What the process instruments automatically besides the gateway's own spans:
 * - `server`: the control plane (incoming HTTP as the root span, GraphQL resolvers, pg queries);
 * - `jobs`: the worker (pg queries under each job's span; no HTTP server to instrument);
 * - `none`: the data plane (uWS and its hot path: manual spans only, no context manager, see
 *   data-plane/src/telemetry/).
 */
export type Instrumented = "server" | "jobs" | "none";

export interface StartOptions {
  readonly instrument: Instrumented;
  /** Extra resource attributes (e.g. the data-plane thread). */
  readonly attributes?: Record<string, string | number>;
  /**
   * Sample every span the SDK is given: the caller has already decided (the data plane samples before it
   * builds a span, from the same OTEL_TRACES_SAMPLER). Else the SDK's sampler from OTEL_TRACES_SAMPLER.
   */
  readonly presampled?: boolean;
}

export function startTelemetry(
  defaultService: string,
  opts: StartOptions,
  env: NodeJS.ProcessEnv = process.env,
): Telemetry {
  const config = loadTelemetryConfig(defaultService, env);
  if (!config.enabled) return disabledTelemetry(config);
  // Required here, not imported at the top: with tracing off none of the SDK is loaded.
  const { startSdk } = require("./sdk") as typeof import("./sdk");
  return startSdk(config, opts);
}

export function disabledTelemetry(config: TelemetryConfig): Telemetry {
  return {
    enabled: false,
    config,
    tracer: undefined,
    logFields: undefined,
    shutdown: () => Promise.resolve(),
  };
}

let processTelemetry: Telemetry | undefined;

/**
 * Starts the process's tracing once (the entry point's first import, before pg, graphql and http are
 * required, so that their instrumentations can hook them) and returns it; later calls return the same.
 */
export function startProcessTelemetry(defaultService: string, opts: StartOptions): Telemetry {
  processTelemetry ??= startTelemetry(defaultService, opts);
  return processTelemetry;
}

/** The process's tracing, undefined when no entry point started it (tests, CLIs). */
export function currentTelemetry(): Telemetry | undefined {
  return processTelemetry;
}
