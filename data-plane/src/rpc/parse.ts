import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { MAX_BATCH_SIZE } from "../../../shared/src/jsonrpc/types";
import {
  ARG0,
  ARGS,
  F_ESCAPED,
  F_OBJECT,
  F_OTHER_MEMBER,
  F_REPEATED,
  F_SAME_METHOD,
  M_ID,
  M_JSONRPC,
  M_METHOD,
  M_PARAMS,
  RECORD,
  scanBatchSpans,
} from "./batch-spans";
import { valueAt } from "./param-at";
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
  /**
   * params[index], read from the request text without building the params, when the parser kept them
   * as text (batch elements); callers go through paramAt.
   */
  param?(index: number): unknown;
}

/** A batch element that failed validation: answered with `id: null` (or its id when it had a valid one). */
export interface RpcItemError {
  readonly error: ErrorRow;
  readonly idText: string;
}

export type BatchItem = RpcCall | RpcItemError;

export type ParseResult =
  | { ok: true; batch: false; call: RpcCall }
  | {
      ok: true;
      batch: true;
      items: BatchItem[];
      /**
       * Whether the text says to a node exactly what the items say (as far as its syntax goes: see
       * scanBatch), so that it may go upstream as it is (forward/verbatim.ts).
       */
      verbatim: boolean;
    }
  | { ok: false; error: ErrorRow; idText: string; limit?: number };

export function isItemError(item: BatchItem): item is RpcItemError {
  return (item as RpcItemError).error !== undefined;
}

const NULL_ID = "null";

/**
 * Parses and strictly validates a request body (JSON text). Never throws. `bytes`, when the caller has
 * them, are the text's UTF-8 (a batch is scanned in them: scanBatch).
 */
export function parseRpcBody(text: string, bytes?: Uint8Array): ParseResult {
  if (text.charCodeAt(skipWsText(text)) === 0x5b /* [ */) {
    return scanBatch(text, bytes ?? Buffer.from(text, "utf8")) ?? parseViaJsonParse(text);
  }
  return parseViaJsonParse(text);
}

function skipWsText(text: string): number {
  let i = 0;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else return i;
  }
}

/**
 * The same result through JSON.parse and the parsed value: what single calls take (one small object,
 * which JSON.parse builds faster than a scan in JS reads it), and the reference scanBatch is tested
 * against (its batches are never `verbatim`).
 */
export function parseViaJsonParse(text: string): ParseResult {
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
    return { ok: true, batch: true, items, verbatim: false };
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

/**
 * A batch element's call as the scan found it: the params stay text until something reads them (the
 * range checks, a cache key, a re-serialised forward); most batch elements' never are.
 */
class ScannedCall implements RpcCall {
  private parsed: unknown = UNREAD;

  constructor(
    readonly method: string,
    readonly idText: string | undefined,
    /** The request text, and where the params' value starts and ends in it (-1: no params). */
    private readonly text: string,
    private readonly paramsStart: number,
    private readonly paramsEnd: number,
    /** Where the params' first three elements start (-1: none). */
    private readonly arg0: number,
    private readonly arg1: number,
    private readonly arg2: number,
  ) {}

  get params(): unknown {
    let v = this.parsed;
    if (v === UNREAD) {
      // Valid JSON (the scan checked it), so this cannot throw.
      v = this.paramsStart < 0 ? undefined : JSON.parse(this.text.slice(this.paramsStart, this.paramsEnd));
      this.parsed = v;
    }
    return v;
  }

  param(index: number): unknown {
    if (this.parsed !== UNREAD || this.paramsStart < 0 || index >= ARGS) {
      const p = this.params;
      return Array.isArray(p) ? p[index] : undefined;
    }
    const start = index === 0 ? this.arg0 : index === 1 ? this.arg1 : this.arg2;
    return start < 0 ? undefined : valueAt(this.text, start);
  }
}

const UNREAD: unknown = Symbol("unread");

const INVALID_NULL_ID: RpcItemError = Object.freeze({ error: GatewayError.InvalidRequest, idText: NULL_ID });

/** Records of the batch being scanned (reused: a batch is read in one go, never across awaits). */
const records = new Int32Array(MAX_BATCH_SIZE * RECORD);
/** Whether the id of the element elementItem last read is echoed as the client wrote it. */
let idWritten = true;
/** The method string of the batch's previous element; undefined when it had none. */
let prevMethod: string | undefined;

/**
 * A batch body in one pass over its bytes (batch-spans.ts), without JSON.parse: each element object's
 * members are located as spans and only the few strings the gateway reads are made. Undefined when the
 * scan gives up: invalid JSON, any non-ASCII byte, a key or id written with escapes; the caller then
 * parses the text with JSON.parse (parseViaJsonParse), which decides. So whatever the scan accepts,
 * JSON.parse accepts too and reads as the same items (test/unit/data-plane/rpc/parse.test.ts compares
 * the two on hostile inputs); the scan only has to be fast on the batches clients really send.
 *
 * It also tells whether the text may go upstream verbatim (`verbatim`): every element's members are
 * exactly jsonrpc, id, method and params, none repeated (JSON.parse keeps the last of repeated keys, a
 * node may keep the first; Go's decoder reads "METHOD" or "Params" as the member it checks: then what the
 * node runs would not be what the gateway checked), and every id's text is the one the gateway echoes
 * (an id written `1e3`, `1.0` or `-0` would come back from the node in another spelling). Any other
 * element is re-serialised from the values checked, which drops every other member.
 */
function scanBatch(text: string, b: Uint8Array): ParseResult | undefined {
  // Byte offsets are the text's only while both are ASCII: the scan gives up on any other byte, and a
  // text with any other character has more UTF-8 bytes than UTF-16 units.
  if (b.length !== text.length) return undefined;
  const count = scanBatchSpans(b, records, MAX_BATCH_SIZE);
  if (count < 0) return undefined;
  const items = new Array<BatchItem>(count);
  let verbatim = true;
  prevMethod = undefined;
  for (let k = 0, r = 0; k < count; k++, r += RECORD) {
    const flags = records[r]!;
    // The previous element's method string when this one's is the same text (so most of a batch's
    // elements share one string); elementItem sets prevMethod again if it reads this element's method.
    const same = (flags & F_SAME_METHOD) !== 0 ? prevMethod : undefined;
    prevMethod = undefined;
    if ((flags & F_OBJECT) === 0) {
      items[k] = INVALID_NULL_ID;
      continue;
    }
    if ((flags & (F_REPEATED | F_OTHER_MEMBER)) !== 0) verbatim = false;
    const item = elementItem(text, b, r, flags, same);
    if (item === undefined) return undefined;
    if (!idWritten) verbatim = false;
    items[k] = item;
  }
  return { ok: true, batch: true, items, verbatim };
}

/**
 * A new string of the ASCII bytes b[start, end). Not text.slice: V8 makes a slice of 13 characters or
 * more a view that keeps the whole text alive, and a method name outlives its request (usage rows until
 * their flush, the method policy's memo for good): each distinct name would pin the body it came in.
 */
function ownString(b: Uint8Array, start: number, end: number): string {
  return Buffer.from(b.buffer, b.byteOffset + start, end - start).toString("latin1");
}

/**
 * The item of the element whose record starts at records[r], with the checks and in the order of
 * validate; undefined to leave the batch to JSON.parse (an id or method written with escapes).
 * `sameMethod` is the previous element's method string when this element's method is the same text.
 */
function elementItem(
  text: string,
  b: Uint8Array,
  r: number,
  flags: number,
  sameMethod: string | undefined,
): BatchItem | undefined {
  idWritten = true;
  let idText: string | undefined;
  const idStart = records[r + 1 + 2 * M_ID]!;
  if (idStart >= 0) {
    const idEnd = records[r + 2 + 2 * M_ID]!;
    const c = b[idStart]!;
    if (c === 0x22) {
      // Without escapes (and ASCII), JSON.stringify of the value is the text as written.
      if ((flags & (F_ESCAPED << M_ID)) !== 0) return undefined;
      idText = text.slice(idStart, idEnd);
    } else if (c === 0x6e /* null */) {
      idText = NULL_ID;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      idText = smallId(b, idStart, idEnd);
      if (idText === undefined) {
        const raw = text.slice(idStart, idEnd);
        idText = numberIdText(raw);
        idWritten = idText === raw;
      }
    } else {
      return INVALID_NULL_ID;
    }
  }
  const orNull = idText ?? NULL_ID;
  const rpcStart = records[r + 1 + 2 * M_JSONRPC]!;
  if (
    rpcStart < 0 ||
    records[r + 2 + 2 * M_JSONRPC]! - rpcStart !== 5 ||
    b[rpcStart + 1] !== 0x32 ||
    b[rpcStart + 2] !== 0x2e ||
    b[rpcStart + 3] !== 0x30 ||
    b[rpcStart + 4] !== 0x22
  ) {
    // Not "2.0" as written; "2\u002e0" is, to JSON.parse.
    if (rpcStart >= 0 && (flags & (F_ESCAPED << M_JSONRPC)) !== 0) return undefined;
    return { error: GatewayError.InvalidRequest, idText: orNull };
  }
  const methodStart = records[r + 1 + 2 * M_METHOD]!;
  if (methodStart < 0 || b[methodStart] !== 0x22)
    return { error: GatewayError.InvalidRequest, idText: orNull };
  const methodEnd = records[r + 2 + 2 * M_METHOD]!;
  if ((flags & (F_ESCAPED << M_METHOD)) !== 0) return undefined;
  if (methodEnd - methodStart === 2) return { error: GatewayError.InvalidRequest, idText: orNull };
  const method = sameMethod ?? ownString(b, methodStart + 1, methodEnd - 1);
  prevMethod = method;
  const paramsStart = records[r + 1 + 2 * M_PARAMS]!;
  if (paramsStart >= 0) {
    const c = b[paramsStart];
    if (c !== 0x5b && c !== 0x7b) return { error: GatewayError.InvalidRequest, idText: orNull };
  }
  return new ScannedCall(
    method,
    idText,
    text,
    paramsStart,
    records[r + 2 + 2 * M_PARAMS]!,
    records[r + ARG0]!,
    records[r + ARG0 + 1]!,
    records[r + ARG0 + 2]!,
  );
}

/** Texts of the ids 0..SMALL_IDS-1 (clients number a batch's elements from 0 or 1): no string per id. */
const SMALL_IDS = 1024;
const SMALL_ID_TEXT = Array.from({ length: SMALL_IDS }, (_, i) => String(i));

/** The text of an id of at most 4 digits below SMALL_IDS, undefined for any other. */
function smallId(b: Uint8Array, start: number, end: number): string | undefined {
  if (end - start > 4) return undefined;
  let n = 0;
  for (let i = start; i < end; i++) {
    const d = b[i]! - 0x30;
    if (d < 0 || d > 9) return undefined;
    n = n * 10 + d;
  }
  // "0" alone is the only number with a leading zero the scan let through.
  return n < SMALL_IDS ? SMALL_ID_TEXT[n] : undefined;
}

/** The id text of a number id as validate makes it: String(value) for safe integers, else as written. */
function numberIdText(raw: string): string {
  // Digits only, at most 15 of them (the grammar allows no leading zero): String(value) is the text.
  if (raw.length <= 15 && allDigits(raw)) return raw;
  const n = Number(raw);
  return Number.isSafeInteger(n) ? String(n) : raw;
}

function allDigits(raw: string): boolean {
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}
