import { errorResponse } from "../../../shared/src/jsonrpc/error-object";
import type { ErrorRow } from "../../../shared/src/jsonrpc/errors";

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

export interface ErrorDetail {
  requestId: string;
  limit?: number;
  message?: string;
  /** 429s: `data.retryAfterMs`. */
  retryAfterMs?: number;
}

/** A contract error object as JSON text, with the id spliced in as raw JSON text. */
export function errorJson(row: ErrorRow, idText: string, detail: ErrorDetail): string {
  const extras: Record<string, unknown> = { requestId: detail.requestId };
  if (detail.retryAfterMs !== undefined) extras.retryAfterMs = detail.retryAfterMs;
  if (detail.limit !== undefined) extras.limit = detail.limit;
  if (detail.message !== undefined) extras.message = detail.message;
  const obj = errorResponse(row, null, extras);
  return `{"jsonrpc":"2.0","id":${idText},"error":${JSON.stringify(obj.error)}}`;
}

/** Success (or passed-through node error) as JSON text: client id + the node's reply tail. */
export function replyJson(idText: string, tail: string): string {
  return `{"jsonrpc":"2.0","id":${idText}${tail}`;
}

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
