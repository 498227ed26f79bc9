/** A W3C trace context header's fields (https://www.w3.org/TR/trace-context/#traceparent-header). */
export interface ParentContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
}

const HEX = /^[0-9a-f]+$/;
const ZERO_TRACE = "00000000000000000000000000000000";
const ZERO_SPAN = "0000000000000000";

/**
 * Parses a traceparent header: `{version}-{trace id}-{parent id}-{flags}`, lower-case hex. An invalid one
 * is ignored (undefined), as the spec says: the request then starts a new trace. A future version (not
 * 00, not ff) may carry more fields after the four, which are ignored.
 */
export function parseTraceparent(header: string): ParentContext | undefined {
  const h = header.trim();
  if (h.length < 55 || h[2] !== "-" || h[35] !== "-" || h[52] !== "-") return undefined;
  const version = h.slice(0, 2);
  if (!HEX.test(version) || version === "ff") return undefined;
  if (h.length > 55 && (version === "00" || h[55] !== "-")) return undefined;
  const traceId = h.slice(3, 35);
  const spanId = h.slice(36, 52);
  const flags = h.slice(53, 55);
  if (!HEX.test(traceId) || !HEX.test(spanId) || !HEX.test(flags)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return { traceId, spanId, sampled: (Number.parseInt(flags, 16) & 1) === 1 };
}

/** The traceparent naming span `spanId` of trace `traceId`, sampled. */
export function formatTraceparent(traceId: string, spanId: string): string {
  return `00-${traceId}-${spanId}-01`;
}
