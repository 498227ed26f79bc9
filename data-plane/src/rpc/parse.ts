import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { MAX_BATCH_SIZE } from "../../../shared/src/jsonrpc/types";
import { rawIds } from "./raw-id";

/**
 * One validated JSON-RPC 2.0 request object. `idText` is the id exactly as JSON text to echo back
 * (numbers beyond 2^53 keep every digit); `undefined` marks a notification.
 */
export interface RpcCall {
  readonly method: string;
  /** undefined (absent), an array or an object. */
  readonly params: unknown;
  readonly idText: string | undefined;
}

/** A batch element that failed validation: answered with `id: null` (or its id when it had a valid one). */
export interface RpcItemError {
  readonly error: ErrorRow;
  readonly idText: string;
}

export type BatchItem = RpcCall | RpcItemError;

export type ParseResult =
  | { ok: true; batch: false; call: RpcCall }
  | { ok: true; batch: true; items: BatchItem[] }
  | { ok: false; error: ErrorRow; idText: string; limit?: number };

export function isItemError(item: BatchItem): item is RpcItemError {
  return (item as RpcItemError).error !== undefined;
}

const NULL_ID = "null";

/** Parses and strictly validates a request body (JSON text). Never throws. */
export function parseRpcBody(text: string): ParseResult {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: GatewayError.ParseError, idText: NULL_ID };
  }
  if (Array.isArray(value)) {
    const n = value.length;
    if (n === 0) return { ok: false, error: GatewayError.EmptyBatch, idText: NULL_ID };
    if (n > MAX_BATCH_SIZE) {
      return { ok: false, error: GatewayError.BatchTooLarge, idText: NULL_ID, limit: MAX_BATCH_SIZE };
    }
    let raw: (string | undefined)[] | undefined;
    const items = new Array<BatchItem>(n);
    for (let i = 0; i < n; i++) {
      const el = value[i];
      const needsRaw = el !== null && typeof el === "object" && hasUnsafeNumberId(el);
      if (needsRaw && raw === undefined) raw = rawIds(text);
      items[i] = validate(el, needsRaw ? raw?.[i] : undefined);
    }
    return { ok: true, batch: true, items };
  }
  const needsRaw = value !== null && typeof value === "object" && hasUnsafeNumberId(value);
  const item = validate(value, needsRaw ? rawIds(text)[0] : undefined);
  if (isItemError(item)) return { ok: false, error: item.error, idText: item.idText };
  return { ok: true, batch: false, call: item };
}

function hasUnsafeNumberId(el: object): boolean {
  const id = (el as { id?: unknown }).id;
  return typeof id === "number" && !Number.isSafeInteger(id);
}

function validate(el: unknown, rawId: string | undefined): BatchItem {
  if (el === null || typeof el !== "object" || Array.isArray(el)) {
    return { error: GatewayError.InvalidRequest, idText: NULL_ID };
  }
  const o = el as Record<string, unknown>;
  const id = o.id;
  let idText: string | undefined;
  if (id === undefined) {
    idText = "id" in o ? NULL_ID : undefined;
  } else if (id === null) {
    idText = NULL_ID;
  } else if (typeof id === "string") {
    idText = JSON.stringify(id);
  } else if (typeof id === "number") {
    idText = rawId ?? String(id);
  } else {
    return { error: GatewayError.InvalidRequest, idText: NULL_ID };
  }
  if (o.jsonrpc !== "2.0") return { error: GatewayError.InvalidRequest, idText: idText ?? NULL_ID };
  const method = o.method;
  if (typeof method !== "string" || method.length === 0) {
    return { error: GatewayError.InvalidRequest, idText: idText ?? NULL_ID };
  }
  const params = o.params;
  if (params !== undefined && (params === null || typeof params !== "object")) {
    return { error: GatewayError.InvalidRequest, idText: idText ?? NULL_ID };
  }
  return { method, params, idText };
}
