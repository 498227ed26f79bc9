/**
 * Request tracing on the data plane's hot path. uWS has no instrumentation, so the transports open the
 * spans themselves, through this interface, once per request: `start` decides sampling from the incoming
 * traceparent before anything is built, and an unsampled request (or tracing off: NO_TRACING) gets
 * undefined, so its path holds no span, no closure and no context, only `trace === undefined` checks.
 *
 * Spans of one sampled request: the root (`start`, SERVER), children for the steps that already happened
 * synchronously (`step`: key check, limits, cache lookup) and for upstream exchanges (`child`, CLIENT),
 * whose traceparent goes to the node.
 */
export interface RequestTracing {
  /** Whether any request may be sampled: transports read the traceparent header only then. */
  readonly enabled: boolean;
  /**
   * A sampled request's trace, else undefined (nothing allocated). `traceparent`: the request's header
   * ("" = none), whose sampled flag decides under a parentbased_* sampler; `startedAt`: when the request
   * arrived (performance.now() ms).
   */
  start(name: string, traceparent: string, startedAt: number): RequestTrace | undefined;
  /** Flushes the spans still queued (the plane's close). */
  shutdown(): Promise<void>;
}

export type SpanAttributes = Record<string, string | number | boolean>;

export interface RequestTrace {
  /** A child span for a step that ran from `startedAt` (performance.now() ms) until now. */
  step(name: string, startedAt: number, attributes?: SpanAttributes): void;
  /** A child span that runs until its `end` (an upstream exchange). */
  child(name: string, attributes?: SpanAttributes): ChildSpan;
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
  end(attributes?: SpanAttributes, error?: string): void;
}

/** Tracing off: nothing sampled, nothing read. */
export const NO_TRACING: RequestTracing = Object.freeze({
  enabled: false,
  start: () => undefined,
  shutdown: () => Promise.resolve(),
});
