import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { MAX_BATCH_SIZE } from "../../../shared/src/jsonrpc/types";
import { byteAt, scanState, scanString, scanValue, skipWs } from "./json-scan";
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

/** The members of a request object the gateway reads, by index in the element spans below. */
const M_JSONRPC = 0;
const M_ID = 1;
const M_METHOD = 2;
const M_PARAMS = 3;
/** A key with a backslash escape: the scan leaves such an element to JSON.parse. */
const M_ESCAPED = -2;

/** Value spans of the element being scanned: start (-1 = absent) and end per member (reused). */
const starts = new Int32Array(4);
const ends = new Int32Array(4);
/** Per member: whether its value holds a backslash escape (anywhere, for a container). */
const escapes = new Uint8Array(4);
/**
 * Where the first ARGS positional params of the element start (-1: none): the block argument routing
 * reads (index 0 to 2) is then found without walking the params text (ScannedCall.param).
 */
const ARGS = 3;
const args = new Int32Array(ARGS);

/** The params value at `i`, an array's first ARGS elements' starts recorded in `args`. */
function scanParams(b: Uint8Array, i: number): number {
  args[0] = -1;
  args[1] = -1;
  args[2] = -1;
  if (byteAt(b, i) !== 0x5b /* [ */) return scanValue(b, i);
  i = skipWs(b, i + 1);
  if (byteAt(b, i) === 0x5d) return i + 1;
  for (let k = 0; ; k++) {
    if (k < ARGS) args[k] = i;
    i = scanValue(b, i);
    if (i < 0) return -1;
    i = skipWs(b, i);
    const c = byteAt(b, i);
    if (c === 0x5d) return i + 1;
    if (c !== 0x2c) return -1;
    i = skipWs(b, i + 1);
  }
}
/** Whether the element scanMembers last read repeated one of the members above. */
let repeated = false;
/** Whether the id of the element elementItem last read is echoed as the client wrote it. */
let idWritten = true;
/** The method of the batch's previous element and its span (with quotes); undefined at a batch's start. */
let prevMethod: string | undefined;
let prevMethodStart = 0;
let prevMethodEnd = 0;

/**
 * A batch body in one pass over its bytes (json-scan.ts), without JSON.parse: each element object's
 * members are located as spans and only the few strings the gateway reads are made. Undefined when the
 * scan gives up: invalid JSON, any non-ASCII byte, a key or id written with escapes; the caller then
 * parses the text with JSON.parse (parseViaJsonParse), which decides. So whatever the scan accepts,
 * JSON.parse accepts too and reads as the same items (test/unit/data-plane/rpc/parse.test.ts compares
 * the two on hostile inputs); the scan only has to be fast on the batches clients really send.
 *
 * It also tells whether the text may go upstream verbatim (`verbatim`): no element repeats a member
 * (JSON.parse keeps the last of repeated keys, a node may keep the first, and then what the node runs
 * would not be what the gateway checked) and every id's text is the one the gateway echoes (an id
 * written `1e3`, `1.0` or `-0` would come back from the node in another spelling).
 */
function scanBatch(text: string, b: Uint8Array): ParseResult | undefined {
  // Byte offsets are the text's only while both are ASCII: the scan gives up on any other byte, and a
  // text with any other character has more UTF-8 bytes than UTF-16 units.
  if (b.length !== text.length) return undefined;
  let i = skipWs(b, 0);
  if (byteAt(b, i) !== 0x5b) return undefined;
  i = skipWs(b, i + 1);
  if (byteAt(b, i) === 0x5d /* ] */) return undefined; // empty (or not a batch): rare, JSON.parse says
  const items: BatchItem[] = [];
  let verbatim = true;
  prevMethod = undefined;
  for (;;) {
    // Past the limit the rest is left to JSON.parse (which tells invalid JSON from batch_too_large).
    if (items.length === MAX_BATCH_SIZE) return undefined;
    let end: number;
    if (byteAt(b, i) === 0x7b /* { */) {
      end = scanMembers(b, i);
      if (end < 0) return undefined;
      if (repeated) verbatim = false;
      const item = elementItem(text, b);
      if (item === undefined) return undefined;
      if (!idWritten) verbatim = false;
      items.push(item);
    } else {
      end = scanValue(b, i);
      if (end < 0) return undefined;
      items.push(INVALID_NULL_ID);
    }
    i = skipWs(b, end);
    const c = byteAt(b, i);
    if (c === 0x2c /* , */) {
      i = skipWs(b, i + 1);
      continue;
    }
    if (c !== 0x5d) return undefined;
    break;
  }
  if (skipWs(b, i + 1) !== b.length) return undefined;
  return { ok: true, batch: true, items, verbatim };
}

/** The object at `i` (a batch element): records its members' value spans in starts / ends. */
function scanMembers(b: Uint8Array, i: number): number {
  starts[0] = -1;
  starts[1] = -1;
  starts[2] = -1;
  starts[3] = -1;
  args[0] = -1;
  args[1] = -1;
  args[2] = -1;
  repeated = false;
  i = skipWs(b, i + 1);
  if (byteAt(b, i) === 0x7d /* } */) return i + 1;
  for (;;) {
    if (byteAt(b, i) !== 0x22) return -1;
    // The four names with their colon, as every client writes them (compact), are matched in one go.
    let member = compactMember(b, i);
    if (member >= 0) {
      i = skipWs(b, i + MEMBER_KEY_LENGTHS[member]!);
    } else {
      const keyStart = i;
      scanState.escaped = false;
      i = scanString(b, i);
      if (i < 0) return -1;
      member = memberOf(b, keyStart, i);
      if (member === M_ESCAPED) return -1;
      i = skipWs(b, i);
      if (byteAt(b, i) !== 0x3a /* : */) return -1;
      i = skipWs(b, i + 1);
    }
    const valueStart = i;
    scanState.escaped = false;
    if (member === M_PARAMS) i = scanParams(b, i);
    else if (member === M_JSONRPC && isVersion(b, i)) i += 5;
    else i = scanValue(b, i);
    if (i < 0) return -1;
    if (member >= 0) {
      if (starts[member] !== -1) repeated = true;
      starts[member] = valueStart;
      ends[member] = i;
      escapes[member] = scanState.escaped ? 1 : 0;
    }
    i = skipWs(b, i);
    const c = byteAt(b, i);
    if (c === 0x7d) return i + 1;
    if (c !== 0x2c) return -1;
    i = skipWs(b, i + 1);
  }
}

/** Lengths of `"jsonrpc":`, `"id":`, `"method":`, `"params":` (by member index). */
const MEMBER_KEY_LENGTHS = [10, 5, 9, 9];

/**
 * The member whose key and colon, written without spaces or escapes, are at `i` (an opening quote), -1
 * for anything else (the general path reads it).
 */
function compactMember(b: Uint8Array, i: number): number {
  if (i + 10 > b.length) return -1;
  const c = b[i + 1];
  if (c === 0x69 /* i */) return b[i + 2] === 0x64 && b[i + 3] === 0x22 && b[i + 4] === 0x3a ? M_ID : -1;
  if (c === 0x6d /* m */) {
    return b[i + 2] === 0x65 &&
      b[i + 3] === 0x74 &&
      b[i + 4] === 0x68 &&
      b[i + 5] === 0x6f &&
      b[i + 6] === 0x64 &&
      b[i + 7] === 0x22 &&
      b[i + 8] === 0x3a
      ? M_METHOD
      : -1;
  }
  if (c === 0x70 /* p */) {
    return b[i + 2] === 0x61 &&
      b[i + 3] === 0x72 &&
      b[i + 4] === 0x61 &&
      b[i + 5] === 0x6d &&
      b[i + 6] === 0x73 &&
      b[i + 7] === 0x22 &&
      b[i + 8] === 0x3a
      ? M_PARAMS
      : -1;
  }
  if (c === 0x6a /* j */) {
    return b[i + 2] === 0x73 &&
      b[i + 3] === 0x6f &&
      b[i + 4] === 0x6e &&
      b[i + 5] === 0x72 &&
      b[i + 6] === 0x70 &&
      b[i + 7] === 0x63 &&
      b[i + 8] === 0x22 &&
      b[i + 9] === 0x3a
      ? M_JSONRPC
      : -1;
  }
  return -1;
}

/** Whether `"2.0"` is at `i`. */
function isVersion(b: Uint8Array, i: number): boolean {
  return (
    i + 5 <= b.length &&
    b[i] === 0x22 &&
    b[i + 1] === 0x32 &&
    b[i + 2] === 0x2e &&
    b[i + 3] === 0x30 &&
    b[i + 4] === 0x22
  );
}

/**
 * Which read member the key b[start, end) (quotes included, just scanned) names: an index, -1 for any
 * other key, M_ESCAPED for one with an escape (it may spell a member: "m\u0065thod" is "method").
 */
function memberOf(b: Uint8Array, start: number, end: number): number {
  const len = end - start - 2;
  const k = start + 1;
  // Byte by byte: the four names are every key of a usual element, so this runs four times per element.
  if (len === 2) {
    if (b[k] === 0x69 && b[k + 1] === 0x64) return M_ID;
  } else if (len === 6) {
    const c = b[k];
    if (c === 0x6d) {
      if (
        b[k + 1] === 0x65 &&
        b[k + 2] === 0x74 &&
        b[k + 3] === 0x68 &&
        b[k + 4] === 0x6f &&
        b[k + 5] === 0x64
      ) {
        return M_METHOD;
      }
    } else if (c === 0x70) {
      if (
        b[k + 1] === 0x61 &&
        b[k + 2] === 0x72 &&
        b[k + 3] === 0x61 &&
        b[k + 4] === 0x6d &&
        b[k + 5] === 0x73
      ) {
        return M_PARAMS;
      }
    }
  } else if (len === 7) {
    if (
      b[k] === 0x6a &&
      b[k + 1] === 0x73 &&
      b[k + 2] === 0x6f &&
      b[k + 3] === 0x6e &&
      b[k + 4] === 0x72 &&
      b[k + 5] === 0x70 &&
      b[k + 6] === 0x63
    ) {
      return M_JSONRPC;
    }
  }
  return scanState.escaped ? M_ESCAPED : -1;
}

/**
 * A new string of the ASCII bytes b[start, end). Not text.slice: V8 makes a slice of 13 characters or
 * more a view that keeps the whole text alive, and a method name outlives its request (usage rows until
 * their flush, the method policy's memo for good): each distinct name would pin the body it came in.
 */
function ownString(b: Uint8Array, start: number, end: number): string {
  return Buffer.from(b.buffer, b.byteOffset + start, end - start).toString("latin1");
}

function sameBytes(b: Uint8Array, a: number, c: number, len: number): boolean {
  for (let k = 0; k < len; k++) if (b[a + k] !== b[c + k]) return false;
  return true;
}

/**
 * The item of the element whose spans scanMembers recorded, with the checks and in the order of
 * validate; undefined to leave the batch to JSON.parse (an id or method written with escapes).
 */
function elementItem(text: string, b: Uint8Array): BatchItem | undefined {
  idWritten = true;
  let idText: string | undefined;
  const idStart = starts[M_ID]!;
  if (idStart >= 0) {
    const idEnd = ends[M_ID]!;
    const c = b[idStart]!;
    if (c === 0x22) {
      // Without escapes (and ASCII), JSON.stringify of the value is the text as written.
      if (escapes[M_ID] !== 0) return undefined;
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
  const rpcStart = starts[M_JSONRPC]!;
  if (
    rpcStart < 0 ||
    ends[M_JSONRPC]! - rpcStart !== 5 ||
    b[rpcStart + 1] !== 0x32 ||
    b[rpcStart + 2] !== 0x2e ||
    b[rpcStart + 3] !== 0x30 ||
    b[rpcStart + 4] !== 0x22
  ) {
    // Not "2.0" as written; "2\u002e0" is, to JSON.parse.
    if (rpcStart >= 0 && escapes[M_JSONRPC] !== 0) return undefined;
    return { error: GatewayError.InvalidRequest, idText: orNull };
  }
  const methodStart = starts[M_METHOD]!;
  if (methodStart < 0 || b[methodStart] !== 0x22)
    return { error: GatewayError.InvalidRequest, idText: orNull };
  const methodEnd = ends[M_METHOD]!;
  if (escapes[M_METHOD] !== 0) return undefined;
  if (methodEnd - methodStart === 2) return { error: GatewayError.InvalidRequest, idText: orNull };
  // A batch mostly repeats its methods: the previous element's string when the bytes are the same.
  let method = prevMethod;
  const len = methodEnd - methodStart;
  if (
    method === undefined ||
    prevMethodEnd - prevMethodStart !== len ||
    !sameBytes(b, prevMethodStart, methodStart, len)
  ) {
    method = ownString(b, methodStart + 1, methodEnd - 1);
    prevMethod = method;
    prevMethodStart = methodStart;
    prevMethodEnd = methodEnd;
  }
  const paramsStart = starts[M_PARAMS]!;
  if (paramsStart >= 0) {
    const c = b[paramsStart];
    if (c !== 0x5b && c !== 0x7b) return { error: GatewayError.InvalidRequest, idText: orNull };
  }
  return new ScannedCall(method, idText, text, paramsStart, ends[M_PARAMS]!, args[0]!, args[1]!, args[2]!);
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
