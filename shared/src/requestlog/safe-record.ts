import { ErrorCategory } from "../jsonrpc/errors";
import { safeText } from "../text/safe-text";
import { REQUEST_LOG_METHOD_MAX, type RequestLogRecord } from "./contract";

/** Longest value kept for the record's other text fields (the contract's maxima). */
const NETWORK_MAX = 100;
const CATEGORY_MAX = 40;
const REASON_MAX = 60;
const REQUEST_ID_MAX = 100;
const CLIENT_IP_MAX = 60;

/**
 * Makes `r` storable whatever the client sent (text/safe-text.ts): every text field cut to the
 * contract's maximum with control characters and lone surrogates replaced, and the method's original length
 * kept in `methodLength` when it had to change. Values the gateway made itself pass unchanged (and
 * without allocating: printable ASCII within the bound is returned as is). The data plane calls it on
 * every record it logs (RedisRequestLog.record, which every transport's records go through); the worker
 * again on what it reads from the stream, before the schema, so that an entry written by anything else
 * cannot carry what Postgres refuses either. A field that is not a string becomes a default.
 */
export function makeSafe(r: RequestLogRecord): void {
  const method = r.method;
  const safe = safeText(method, REQUEST_LOG_METHOD_MAX);
  if (safe !== method) {
    r.method = safe === "" ? "other" : safe;
    r.methodLength = typeof method === "string" ? method.length : 0;
  } else if (safe === "") {
    r.method = "other";
  }
  r.network = safeText(r.network, NETWORK_MAX) || "unknown";
  r.category = safeText(r.category, CATEGORY_MAX) || ErrorCategory.UnknownError;
  r.reason = safeText(r.reason, REASON_MAX);
  r.requestId = safeText(r.requestId, REQUEST_ID_MAX) || "unknown";
  if (r.clientIp !== null) r.clientIp = safeText(r.clientIp, CLIENT_IP_MAX);
}
