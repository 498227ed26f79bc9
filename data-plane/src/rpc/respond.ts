// The answer texts themselves are in response-json.ts (the forwarding core writes them too).
export { type ErrorDetail, errorJson, replyJson } from "./response-json";

/** HTTP status lines for every status the data plane sends. */
export const STATUS: Record<number, string> = {
  200: "200 OK",
  204: "204 No Content",
  400: "400 Bad Request",
  401: "401 Unauthorized",
  403: "403 Forbidden",
  404: "404 Not Found",
  405: "405 Method Not Allowed",
  413: "413 Payload Too Large",
  415: "415 Unsupported Media Type",
  429: "429 Too Many Requests",
  500: "500 Internal Server Error",
  502: "502 Bad Gateway",
  503: "503 Service Unavailable",
  504: "504 Gateway Timeout",
};

const REQUEST_ID_PREFIX = Math.floor(Math.random() * 0xffffffff)
  .toString(16)
  .padStart(8, "0");
let requestCounter = 0;

/**
 * Unique per process run: random prefix + counter (no crypto call per request). Each serving thread
 * (DATA_PLANE_THREADS > 1) loads this module anew: its own prefix.
 */
export function nextRequestId(): string {
  requestCounter++;
  return `${REQUEST_ID_PREFIX}-${requestCounter.toString(36)}`;
}
