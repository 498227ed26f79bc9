import type { ErrorRow } from "./errors";
import type { JsonRpcFailure, JsonRpcId } from "./types";

export interface ErrorExtras {
  requestId?: string;
  retryAfterMs?: number;
  limit?: number;
  /** Overrides the row's message with a more specific one (e.g. why a method is blocked). */
  message?: string;
  [extra: string]: unknown;
}

/** Builds the contract error object: `{code, message, data: {category, reason, requestId, ...}}`. */
export function errorResponse(row: ErrorRow, id: JsonRpcId, extras: ErrorExtras = {}): JsonRpcFailure {
  const { message, ...rest } = extras;
  return {
    jsonrpc: "2.0",
    id,
    error: {
      code: row.code,
      message: message ?? row.message,
      data: { category: row.category, reason: row.reason, ...rest },
    },
  };
}
