import {
  type Context,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { SamplerConfig } from "../../../shared/src/telemetry/config";
import type { Telemetry } from "../../../shared/src/telemetry/telemetry";
import { formatTraceparent, type ParentContext, parseTraceparent } from "./traceparent";
import type { ChildSpan, RequestTrace, RequestTracing, SpanAttributes, Transport } from "./tracing";

/**
 * Request tracing over the OpenTelemetry SDK of this thread (started with `presampled`: the decision is
 * taken here, before any span object exists, from the same OTEL_TRACES_SAMPLER the SDK would use).
 */
export class OtelTracing implements RequestTracing {
  readonly enabled = true;
  private readonly tracer: Tracer;
  private readonly sampler: SamplerConfig;

  constructor(private readonly telemetry: Telemetry) {
    this.tracer = telemetry.tracer!;
    this.sampler = telemetry.config.sampler;
  }

  start(
    name: string,
    traceparent: string,
    startedAt: number,
    transport: Transport,
    network: string,
    requestId: string,
  ): RequestTrace | undefined {
    // The common case first: no incoming context and not drawn: nothing parsed, nothing built.
    if (traceparent === "" && !rootSampled(this.sampler)) return undefined;
    const parent = traceparent === "" ? undefined : parseTraceparent(traceparent);
    if (traceparent !== "" && !sampled(this.sampler, parent)) return undefined;
    const parentCtx =
      parent === undefined
        ? ROOT_CONTEXT
        : trace.setSpanContext(ROOT_CONTEXT, {
            traceId: parent.traceId,
            spanId: parent.spanId,
            traceFlags: parent.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
            isRemote: true,
          });
    const root = this.tracer.startSpan(
      name,
      {
        kind: SpanKind.SERVER,
        startTime: startedAt,
        attributes: {
          "rpc.system.name": "jsonrpc",
          "gateway.network": network,
          "gateway.request_id": requestId,
          "gateway.transport": transport,
        },
      },
      parentCtx,
    );
    // Only POSTs carry JSON-RPC (an OPTIONS preflight is answered before any span).
    if (transport === "http") root.setAttribute("http.request.method", "POST");
    return new OtelRequestTrace(this.tracer, root);
  }

  shutdown(): Promise<void> {
    return this.telemetry.shutdown();
  }
}

/** Whether a request with `parent` (undefined: none, or an invalid header) is sampled. */
export function sampled(s: SamplerConfig, parent: ParentContext | undefined): boolean {
  if (parent !== undefined && s.parentBased) return parent.sampled;
  return rootSampled(s);
}

/** The root sampler's draw (traceidratio: a fraction of the traces that start here). */
function rootSampled(s: SamplerConfig): boolean {
  if (s.root === "always_on") return true;
  if (s.root === "always_off") return false;
  return Math.random() < s.ratio;
}

class OtelRequestTrace implements RequestTrace {
  private readonly ctx: Context;
  /** error.type is set (a JSON-RPC error code): a failure status keeps it. */
  private errorTyped = false;

  constructor(
    private readonly tracer: Tracer,
    private readonly root: Span,
  ) {
    this.ctx = trace.setSpan(ROOT_CONTEXT, root);
  }

  step(name: string, startedAt: number, attributes?: SpanAttributes): void {
    // An explicit end: a span given its startTime ends at Date.now() otherwise (the SDK's Span._getTime),
    // whole milliseconds against a sub-millisecond start.
    this.tracer.startSpan(name, { startTime: startedAt, attributes }, this.ctx).end(performance.now());
  }

  child(name: string, attributes?: SpanAttributes, link?: string): ChildSpan {
    const linked = link === undefined ? undefined : parseTraceparent(link);
    const span = this.tracer.startSpan(
      name,
      {
        kind: SpanKind.CLIENT,
        attributes,
        links: linked === undefined ? undefined : [{ context: sampledContext(linked) }],
      },
      this.ctx,
    );
    const c = span.spanContext();
    const traceparent = formatTraceparent(c.traceId, c.spanId);
    return {
      traceparent,
      coalesced: (size, sent) => {
        span.setAttribute("gateway.coalesced_calls", size);
        const other = sent === traceparent ? undefined : parseTraceparent(sent);
        if (other !== undefined) span.addLink({ context: sampledContext(other) });
      },
      end: (attrs, error) => finish(span, attrs, error),
    };
  }

  set(attributes: SpanAttributes): void {
    if (attributes["error.type"] !== undefined) this.errorTyped = true;
    this.root.setAttributes(attributes);
  }

  end(attributes: SpanAttributes, error?: string): void {
    finish(this.root, attributes, error, this.errorTyped);
  }

  logFields(): { trace_id: string; span_id: string } {
    const c = this.root.spanContext();
    return { trace_id: c.traceId, span_id: c.spanId };
  }
}

/** A span of this gateway's (sampled, since it was made) named by its traceparent's ids. */
function sampledContext(p: ParentContext): SpanContext {
  return { traceId: p.traceId, spanId: p.spanId, traceFlags: TraceFlags.SAMPLED };
}

function finish(
  span: Span,
  attributes: SpanAttributes | undefined,
  error: string | undefined,
  typed = false,
): void {
  if (attributes !== undefined) span.setAttributes(attributes);
  if (error !== undefined) {
    // A JSON-RPC error code already recorded as error.type (jsonRpcError) names the failure better.
    if (!typed && attributes?.["error.type"] === undefined) span.setAttribute("error.type", error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error });
  }
  // performance.now() as in step: the root span has its startTime given.
  span.end(performance.now());
}
