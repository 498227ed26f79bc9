import { errorResponse } from "../../../shared/src/jsonrpc/error-object";
import type { ErrorRow } from "../../../shared/src/jsonrpc/errors";

/*
 * A JSON-RPC answer's text as the client gets it, with the client's id spliced in as its raw JSON text.
 * Below the transports and the forwarding core, which both write answers.
 */

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
