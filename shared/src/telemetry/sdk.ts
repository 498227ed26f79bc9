import { type Span, trace } from "@opentelemetry/api";
import { GraphQLInstrumentation } from "@opentelemetry/instrumentation-graphql";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import { PgInstrumentation } from "@opentelemetry/instrumentation-pg";
import { NodeSDK, resources } from "@opentelemetry/sdk-node";
import { AlwaysOnSampler } from "@opentelemetry/sdk-trace-base";
import type { TelemetryConfig } from "./config";
import type { Instrumented, StartOptions, Telemetry } from "./telemetry";

/** Probes and scrapes: not requests anyone traces, and they come every few seconds. */
const UNTRACED_PATHS = new Set(["/healthz", "/readyz", "/metrics"]);

/** Loaded only when tracing is on (telemetry.ts): starts the SDK for this process or thread. */
export function startSdk(config: TelemetryConfig, opts: StartOptions): Telemetry {
  const sdk = new NodeSDK({
    serviceName: config.serviceName,
    // Merged with OTEL_RESOURCE_ATTRIBUTES and the host / process detectors.
    resource:
      opts.attributes === undefined
        ? undefined
        : resources.defaultResource().merge(resources.resourceFromAttributes(opts.attributes)),
    instrumentations: instrumentations(opts.instrument),
    sampler: opts.presampled ? new AlwaysOnSampler() : undefined,
    // Traces only: the SDK would otherwise also export metrics and logs over OTLP by default.
    metricReaders: [],
    logRecordProcessors: [],
    // The data plane passes its contexts by hand and reads and writes traceparent itself: no context
    // manager (AsyncLocalStorage's promise hooks would cost every promise of the thread once enabled), no
    // propagator. null = "register none" (NodeSDK's setupContextManager; its type says undefined only).
    ...(opts.instrument === "none"
      ? { contextManager: null as unknown as undefined, textMapPropagator: null }
      : {}),
  });
  sdk.start();
  const tracer = trace.getTracer("rpc-gateway");
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    config,
    tracer,
    logFields: traceLogFields,
    shutdown: () => {
      stopped ??= sdk.shutdown().catch(() => undefined);
      return stopped;
    },
  };
}

function instrumentations(kind: Instrumented) {
  if (kind === "none") return [];
  const pg = new PgInstrumentation({ requireParentSpan: true });
  if (kind === "jobs") return [pg];
  return [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.has((req.url ?? "").split("?")[0]!),
      // Outgoing calls are the exporter's and the webhook deliveries'; only those inside a request.
      requireParentforOutgoingSpans: true,
    }),
    new GraphQLInstrumentation({ ignoreTrivialResolveSpans: true, mergeItems: true }),
    pg,
  ];
}

/**
 * pino `mixin`: a line logged while a span is active carries its ids, so logs and traces join on
 * trace_id. Active = the context manager's (control plane, worker); the data plane adds its ids itself.
 */
export function traceLogFields(): Record<string, string> {
  const span: Span | undefined = trace.getActiveSpan();
  if (span === undefined) return {};
  const c = span.spanContext();
  return { trace_id: c.traceId, span_id: c.spanId, trace_flags: c.traceFlags === 1 ? "01" : "00" };
}
