/**
 * The closed table of gateway errors (docs/contracts.md#errors, kept equal to this by
 * test/unit/docs/contracts.test.ts: a new row needs its line there).
 * Every error the gateway produces is one of these rows; the hot path returns a row, it never throws.
 * `httpStatus` is the status of a whole-request failure; inside a batch the same row becomes a
 * per-element error object in a 200 response.
 */
export const ErrorCategory = {
  Success: "Success",
  ServiceError: "Service Error",
  NodeError: "Node Error",
  ClientError: "Client Error",
  TooManyRequests: "Too Many Requests",
  UnknownError: "Unknown Error",
} as const;
export type ErrorCategory = (typeof ErrorCategory)[keyof typeof ErrorCategory];

export interface ErrorRow {
  readonly httpStatus: number;
  readonly code: number;
  readonly category: ErrorCategory;
  /** Stable machine-readable cause, sent as `data.reason`. */
  readonly reason: string;
  readonly message: string;
}

function row(
  httpStatus: number,
  code: number,
  category: ErrorCategory,
  reason: string,
  message: string,
): ErrorRow {
  return Object.freeze({ httpStatus, code, category, reason, message });
}

export const GatewayError = Object.freeze({
  ParseError: row(
    400,
    -32700,
    ErrorCategory.ClientError,
    "parse_error",
    "Parse error: body is not valid JSON",
  ),
  InvalidRequest: row(400, -32600, ErrorCategory.ClientError, "invalid_request", "Invalid request"),
  EmptyBatch: row(400, -32600, ErrorCategory.ClientError, "empty_batch", "Invalid request: empty batch"),
  BatchTooLarge: row(
    400,
    -32600,
    ErrorCategory.ClientError,
    "batch_too_large",
    "Invalid request: batch too large",
  ),
  BodyTooLarge: row(
    413,
    -32600,
    ErrorCategory.ClientError,
    "body_too_large",
    "Invalid request: body too large",
  ),
  UnsupportedMediaType: row(
    415,
    -32600,
    ErrorCategory.ClientError,
    "unsupported_media_type",
    "Invalid request: Content-Type must be application/json",
  ),
  MethodNotAllowed: row(405, -32600, ErrorCategory.ClientError, "http_method", "Invalid request: use POST"),
  MissingKey: row(401, -32016, ErrorCategory.ClientError, "missing_key", "Unauthorized: API key missing"),
  UnknownKey: row(401, -32016, ErrorCategory.ClientError, "unknown_key", "Unauthorized: API key unknown"),
  OriginNotAllowed: row(
    403,
    -32016,
    ErrorCategory.ClientError,
    "origin_not_allowed",
    "Forbidden: origin not allowed",
  ),
  IpNotAllowed: row(
    403,
    -32016,
    ErrorCategory.ClientError,
    "ip_not_allowed",
    "Forbidden: IP address not allowed",
  ),
  /** The app lists allowed User-Agent patterns and the request's `User-Agent` matches none. */
  UserAgentNotAllowed: row(
    403,
    -32016,
    ErrorCategory.ClientError,
    "user_agent_not_allowed",
    "Forbidden: User-Agent not allowed",
  ),
  /**
   * The app requires a JWT and the request carries none (`Authorization: Bearer <jwt>`; WebSocket also
   * `?jwt=`). The JWT rows share the unauthorized code; `data.reason` says why, the message too.
   */
  JwtMissing: row(
    401,
    -32016,
    ErrorCategory.ClientError,
    "jwt_missing",
    "Unauthorized: JWT missing (send it as Authorization: Bearer)",
  ),
  /** Not a compact JWS, a header or payload that is not JSON, an algorithm other than RS256 / ES256, no `exp`. */
  JwtMalformed: row(401, -32016, ErrorCategory.ClientError, "jwt_malformed", "Unauthorized: JWT malformed"),
  /** The token's `kid` names none of the app's registered keys. */
  JwtUnknownKey: row(
    401,
    -32016,
    ErrorCategory.ClientError,
    "jwt_unknown_key",
    "Unauthorized: JWT signed with a key (kid) the app did not register",
  ),
  /** The signature does not verify with the key its `kid` names (without `kid`: with any of them). */
  JwtBadSignature: row(
    401,
    -32016,
    ErrorCategory.ClientError,
    "jwt_bad_signature",
    "Unauthorized: JWT signature invalid",
  ),
  JwtExpired: row(401, -32016, ErrorCategory.ClientError, "jwt_expired", "Unauthorized: JWT expired"),
  /** `nbf` later than now plus the leeway (JWT_NBF_LEEWAY_S). */
  JwtNotYetValid: row(
    401,
    -32016,
    ErrorCategory.ClientError,
    "jwt_not_yet_valid",
    "Unauthorized: JWT not valid yet (nbf)",
  ),
  JwtWrongAudience: row(
    401,
    -32016,
    ErrorCategory.ClientError,
    "jwt_wrong_audience",
    "Unauthorized: JWT audience (aud) is not the app's",
  ),
  JwtWrongSubject: row(
    401,
    -32016,
    ErrorCategory.ClientError,
    "jwt_wrong_subject",
    "Unauthorized: JWT subject (sub) is not the app's",
  ),
  /**
   * Too many failed JWT verifications from the client's address or for the app in the current window
   * (JWT_FAILURE_WINDOW_MS, JWT_MAX_FAILURES_PER_ADDRESS / _PER_APP); refused before any signature check.
   */
  JwtThrottled: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "jwt_throttled",
    "Too many requests: too many failed JWT verifications",
  ),
  NotFound: row(404, -32601, ErrorCategory.ClientError, "not_found", "Not found: unknown network or path"),
  MethodBlocked: row(200, -32601, ErrorCategory.ClientError, "method_blocked", "Method not allowed"),
  /** A method the app's access rules refuse (not on its allow-list, or on its deny-list); per element. */
  MethodNotAllowedByApp: row(
    200,
    -32601,
    ErrorCategory.ClientError,
    "method_not_allowed_by_app",
    "Method not allowed by the app's access rules",
  ),
  RateLimited: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "rate_limit",
    "Too many requests: rate limit exceeded",
  ),
  DailyLimit: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "daily_limit",
    "Too many requests: daily limit reached",
  ),
  MonthlyLimit: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "monthly_limit",
    "Too many requests: monthly limit reached",
  ),
  /** The app's own per-second cap (access rules), lower than the plan's, would be passed. */
  AppRateLimited: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "app_rate_limit",
    "Too many requests: the app's per-second cap exceeded",
  ),
  /** The app's own daily cap (access rules) would be passed; resets at 00:00 UTC. */
  AppDailyLimit: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "app_daily_limit",
    "Too many requests: the app's daily cap reached",
  ),
  UpstreamUnreachable: row(
    502,
    -32603,
    ErrorCategory.NodeError,
    "upstream_unreachable",
    "Upstream node unreachable",
  ),
  NoUpstream: row(503, -32603, ErrorCategory.NodeError, "no_upstream", "No healthy upstream node available"),
  UpstreamTimeout: row(504, -32603, ErrorCategory.NodeError, "upstream_timeout", "Upstream node timed out"),
  UpstreamBadResponse: row(
    502,
    -32603,
    ErrorCategory.NodeError,
    "upstream_bad_response",
    "Upstream node answered with an invalid response",
  ),
  /** WebSocket only: the connection has too many requests in flight (WS_MAX_IN_FLIGHT_PER_CONNECTION). */
  WsInFlightLimit: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "ws_in_flight_limit",
    "Too many requests: too many requests in flight on this connection",
  ),
  /** WebSocket only: the connection has too many subscriptions (WS_MAX_SUBSCRIPTIONS_PER_CONNECTION). */
  WsSubscriptionLimit: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "ws_subscription_limit",
    "Too many requests: too many subscriptions on this connection",
  ),
  /** WebSocket only: the network has no upstream WebSocket to carry subscriptions. */
  NoUpstreamWebSocket: row(
    503,
    -32603,
    ErrorCategory.NodeError,
    "no_upstream_websocket",
    "Subscriptions are not available on this network (no upstream WebSocket)",
  ),
  /** A dedicated node that is not running or not synced (yet). */
  NodeUnavailable: row(
    503,
    -32603,
    ErrorCategory.NodeError,
    "node_unavailable",
    "Dedicated node is not available",
  ),
  Internal: row(500, -32603, ErrorCategory.ServiceError, "internal", "Internal gateway error"),
  /** WebSocket upgrade refused: the key's app (node) has WS_MAX_CONNECTIONS_PER_KEY sockets open. */
  WsConnectionLimit: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "ws_connection_limit",
    "Too many requests: too many WebSocket connections for this API key",
  ),
  /** WebSocket upgrade refused: the client address (IPv6: its /64) has WS_MAX_CONNECTIONS_PER_IP open. */
  WsIpConnectionLimit: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "ws_ip_connection_limit",
    "Too many requests: too many WebSocket connections from this address",
  ),
  /** A subscribe that would open one more upstream subscription past WS_MAX_UPSTREAM_SUBSCRIPTIONS_PER_WORKSPACE. */
  WsUpstreamSubscriptionLimit: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "ws_upstream_subscription_limit",
    "Too many requests: too many upstream subscriptions for this workspace on this network",
  ),
  /** Every upstream tried answered 429 (or a JSON-RPC rate-limit error) and is backed off. */
  UpstreamRateLimited: row(
    503,
    -32603,
    ErrorCategory.NodeError,
    "upstream_rate_limited",
    "Upstream nodes are rate limiting the gateway; retry shortly",
  ),
  /**
   * eth_getLogs / eth_newFilter over more blocks than the network's maxLogsBlockRange (`data.limit`); the
   * message names the range asked for and the limit.
   */
  LogsRangeTooLarge: row(
    400,
    -32602,
    ErrorCategory.ClientError,
    "logs_range_too_large",
    "eth_getLogs block range too large",
  ),
  /**
   * Every healthy upstream carries its share of heavy calls (UPSTREAM_HEAVY_SHARE_PERCENT of its
   * connections): a heavy call (eth_getLogs, debug_*, trace_*, ...) is refused rather than queued.
   */
  UpstreamBusy: row(
    503,
    -32603,
    ErrorCategory.NodeError,
    "upstream_busy",
    "Upstream nodes are busy with heavy calls; retry shortly",
  ),
  /**
   * The client address presented KEY_LOOKUP_MAX_FAILURES unknown keys within KEY_LOOKUP_WINDOW_MS: a key
   * that is not cached is refused before Redis is asked, until the window ends (`Retry-After`).
   */
  KeyLookupThrottled: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "key_lookup_throttled",
    "Too many requests: too many unknown API keys from this address",
  ),
  /** The app key (or public client IP) has MAX_IN_FLIGHT_PER_KEY upstream calls in flight (`data.limit`). */
  ConcurrencyLimit: row(
    429,
    -32005,
    ErrorCategory.TooManyRequests,
    "concurrency_limit",
    "Too many requests: too many calls in flight for this key",
  ),
  /**
   * The gateway instance is shutting down: a request that arrived on a kept-alive connection after the
   * drain, refused before any work (no key lookup, nothing forwarded); retry, another instance answers.
   * Service Error: the gateway's side, not the node's.
   */
  ShuttingDown: row(
    503,
    -32603,
    ErrorCategory.ServiceError,
    "shutting_down",
    "Gateway instance is shutting down; retry the request",
  ),
  /**
   * An upstream or dedicated-node answer above UPSTREAM_MAX_RESPONSE_BYTES: the client's heavy call fails, the
   * node is not marked unhealthy. The data plane sends it with the cap in the message (responseTooLargeRow).
   */
  UpstreamResponseTooLarge: row(
    502,
    -32603,
    ErrorCategory.NodeError,
    "upstream_response_too_large",
    "Upstream node answer is larger than the gateway's response size cap",
  ),
  /**
   * The upstream node refused the request itself (HTTP 400 / 413 / 414 / 431: too large for the node, or
   * content it reads as invalid). Not failed over and no breaker count: the request, not the node, is at fault.
   */
  UpstreamRequestRefused: row(
    502,
    -32603,
    ErrorCategory.NodeError,
    "upstream_request_refused",
    "Upstream node refused the request (too large or invalid for the node); make it smaller or split it",
  ),
  /**
   * The answers being read from upstream nodes and dedicated nodes together fill the gateway instance's
   * UPSTREAM_BUFFER_BUDGET_BYTES: the call whose next chunk did not fit fails (its connection is dropped),
   * with no failover and no breaker count. Retry shortly; a smaller request helps.
   */
  UpstreamBufferFull: row(
    503,
    -32603,
    ErrorCategory.NodeError,
    "upstream_buffer_full",
    "Gateway is buffering too many large upstream answers; retry shortly",
  ),
  /**
   * No healthy upstream of the network can serve the call: none keeps the state at the block it names
   * (archive vs pruned nodes), or none declares the method family (`debug_*`, `trace_*`) while others do.
   * The message says what was needed (noCapableUpstreamRow). Nothing was sent: no breaker counts it.
   * HTTP 200 and -32000, as a node without that data answers: retrying the same call cannot help.
   */
  NoCapableUpstream: row(
    200,
    -32000,
    ErrorCategory.NodeError,
    "no_capable_upstream",
    "No upstream node of this network can serve this call",
  ),
  /**
   * eth_getFilterChanges / eth_getFilterLogs with a filter id this app does not have: never installed,
   * uninstalled, expired (FILTER_TTL_MS without a poll), or another app's. geth's own answer (HTTP 200,
   * -32000, "filter not found"), so that clients re-create the filter.
   */
  FilterNotFound: row(200, -32000, ErrorCategory.ClientError, "filter_not_found", "filter not found"),
  /**
   * eth_newFilter / eth_newBlockFilter / eth_newPendingTransactionFilter while the app already has
   * MAX_FILTERS_PER_APP live filters; the message names the cap (filterLimitRow).
   */
  FilterLimit: row(
    200,
    -32005,
    ErrorCategory.ClientError,
    "filter_limit",
    "Too many filters for this app: uninstall one (eth_uninstallFilter) or let one expire",
  ),
  /**
   * eth_newFilter whose filter object (address, topics, bounds) is over 16 KiB of JSON: it is kept in
   * Redis for as long as the filter lives, so its size is bounded (MAX_FILTER_CRITERIA_BYTES).
   */
  FilterTooLarge: row(
    200,
    -32602,
    ErrorCategory.ClientError,
    "filter_too_large",
    "Filter too large: its JSON (addresses, topics) may be at most 16384 bytes",
  ),
  /** The filters' store (Redis) could not be read or written: the filter call is not answered; retry. */
  FilterStoreUnavailable: row(
    503,
    -32603,
    ErrorCategory.ServiceError,
    "filter_store_unavailable",
    "Filter store unavailable; retry shortly",
  ),
});

/** FilterLimit with the cap in its message (built once per data plane). */
export function filterLimitRow(max: number): ErrorRow {
  const r = GatewayError.FilterLimit;
  return Object.freeze({ ...r, message: `${r.message} (at most ${max} filters)` });
}

/** NoCapableUpstream with what was needed in its message ("no upstream serves trace_*"). */
export function noCapableUpstreamRow(detail: string): ErrorRow {
  const r = GatewayError.NoCapableUpstream;
  return Object.freeze({ ...r, message: `${r.message}: ${detail}` });
}

/** UpstreamResponseTooLarge with the cap in its message (built once per upstream / gateway, not per call). */
export function responseTooLargeRow(maxBytes: number): ErrorRow {
  const r = GatewayError.UpstreamResponseTooLarge;
  return Object.freeze({ ...r, message: `${r.message} of ${maxBytes} bytes` });
}
export type GatewayErrorName = keyof typeof GatewayError;

/** Category of a JSON-RPC error object answered by a node and passed through unchanged. */
export function categoryOfNodeError(code: number): ErrorCategory {
  if (code === -32700 || (code >= -32602 && code <= -32600)) return ErrorCategory.ClientError;
  return ErrorCategory.NodeError;
}
