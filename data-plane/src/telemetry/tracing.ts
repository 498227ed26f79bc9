import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";

/**
 * Request tracing on the data plane's hot path. uWS has no instrumentation, so the transports open the
 * spans themselves, through this interface, once per request (an HTTP request: server/exchange.ts,
 * nodes/node-http.ts; a WebSocket message: ws/gateway.ts, for network and node sessions alike): `start`
 * decides sampling from the incoming traceparent before anything is built, and an unsampled request (or
 * tracing off: NO_TRACING) gets undefined, so its path holds no span, no closure and no context, only
 * `trace === undefined` checks. The forwarding core (forward/forward.ts) adds the cache and upstream
 * spans, the same for every transport.
 *
 * Spans of one sampled request: the root (`start`, SERVER), children for the steps that already happened
 * synchronously (`step`: key check, limits, cache lookup) and for upstream exchanges (`child`, CLIENT),
 * whose traceparent goes to the node.
 */
export interface RequestTracing {
  /** Whether any request may be sampled: transports read the traceparent header only then. */
  readonly enabled: boolean;
  /**
   * A sampled request's trace, else undefined (nothing allocated: the attributes every transport sets
   * are passed as they are and only read once sampled). `name`: the route (`POST /{network}/rpc`);
   * `traceparent`: the request's header ("" = none; a WebSocket message: the upgrade request's), whose
   * sampled flag decides under a parentbased_* sampler; `startedAt`: when the request arrived
   * (performance.now() ms); `network`: the network slug (or the dedicated node's); `requestId`: the
   * answer's x-request-id / data.requestId.
   */
  start(
    name: string,
    traceparent: string,
    startedAt: number,
    transport: Transport,
    network: string,
    requestId: string,
  ): RequestTrace | undefined;
  /** Flushes the spans still queued (the plane's close). */
  shutdown(): Promise<void>;
}

export type SpanAttributes = Record<string, string | number | boolean>;

/**
 * The attributes of a JSON-RPC answer that is an error object (OpenTelemetry's JSON-RPC conventions): its
 * `error.code` as `rpc.response.status_code` and as `error.type`.
 */
export function jsonRpcError(code: number): SpanAttributes {
  const text = String(code);
  return { "rpc.response.status_code": text, "error.type": text };
}

const ERROR_CODE_RE = /^,"error":\{[\s\S]*?"code":\s*(-?\d+)/;

/**
 * The error code of an answer kept as its JSON tail (upstream/reply.ts: `,"error":{"code":-32000,...}}`),
 * or undefined when it has none. Read only for a sampled request's span.
 */
export function tailErrorCode(tail: string): number | undefined {
  const m = ERROR_CODE_RE.exec(tail);
  return m === null ? undefined : Number(m[1]);
}

/** `gateway.transport` of a request's span. */
export type Transport = "http" | "ws";

export interface RequestTrace {
  /** A child span for a step that ran from `startedAt` (performance.now() ms) until now. */
  step(name: string, startedAt: number, attributes?: SpanAttributes): void;
  /**
   * A child span that runs until its `end` (an upstream exchange). `link`: the traceparent of a span this
   * one waits on without being its parent (the upstream exchange of an identical call in flight that
   * this one joined), recorded as a span link.
   */
  child(name: string, attributes?: SpanAttributes, link?: string): ChildSpan;
  /** Adds attributes to the root span (the method once parsed, the cache verdict). */
  set(attributes: SpanAttributes): void;
  /** Ends the root span; `error` marks it failed (a 5xx, an upstream failure). */
  end(attributes: SpanAttributes, error?: string): void;
  /** The root span's ids for a log line written for this request. */
  logFields(): { trace_id: string; span_id: string };
}

export interface ChildSpan {
  /** The W3C traceparent naming this span as the parent, for the upstream request. */
  readonly traceparent: string;
  /**
   * The call went out in a coalesced upstream batch of `size` calls (upstream/network-pool.ts) whose
   * request carried traceparent `sent`: recorded as `gateway.coalesced_calls`, and as a span link to
   * `sent` when that is another call's span (the node saw that one, not this one).
   */
  coalesced(size: number, sent: string): void;
  end(attributes?: SpanAttributes, error?: string): void;
}

/**
 * Ends a request's span by the dashboard category of its answer (a WebSocket message has no HTTP status):
 * a service or unknown error marks it failed, as a 5xx does over HTTP.
 */
export function endByCategory(t: RequestTrace, category: string, reason?: string): void {
  t.end({ "gateway.category": category }, serverFailure(category) ? reason || category : undefined);
}

/** A batch message's span by its elements' categories: failed when one of them is. */
export function endByCategories(t: RequestTrace, categories: readonly string[]): void {
  let failed: string | undefined;
  for (const c of categories) if (failed === undefined && serverFailure(c)) failed = c;
  t.end({}, failed);
}

/**
 * A request's span by its response status: a 5xx marks it failed. `overWs`: a dedicated node's
 * WebSocket message, answered with what would have been that HTTP status (`gateway.status`).
 */
export function endByStatus(t: RequestTrace, status: number, overWs = false): void {
  t.end(
    overWs ? { "gateway.status": status } : { "http.response.status_code": status },
    status >= 500 ? `HTTP ${status}` : undefined,
  );
}

function serverFailure(category: string): boolean {
  return category === ErrorCategory.ServiceError || category === ErrorCategory.UnknownError;
}

/** Tracing off: nothing sampled, nothing read. */
export const NO_TRACING: RequestTracing = Object.freeze({
  enabled: false,
  start: () => undefined,
  shutdown: () => Promise.resolve(),
});
