import { join } from "node:path";
import { byteAt, isWord, scanState, scanString, scanValue, skipWs } from "./json-scan";

/**
 * The batch scan: one pass over a JSON-RPC batch body's bytes that validates it (what JSON.parse
 * accepts) and records, per element, where the members the gateway reads are, building nothing. Two
 * implementations write the same records: `scanBatchSpansJs` below (the reference) and the C addon in
 * data-plane/native/json_scan.c (built by `npm run build`), which reads 16 bytes a step through strings
 * and is several times faster (docs/benchmarks.md, "Batches"). The unit tests run both on the same fixtures and fuzzed edits and compare their records.
 *
 * Each returns the number of elements, or -1 to leave the text to JSON.parse (invalid JSON, any byte
 * above 0x7f, a key written with an escape, more than `maxElements` elements, or, in C only, containers
 * nested more than 512 deep): giving up is always safe, never accepting what JSON.parse refuses is not.
 */
export type ScanBatchSpans = (body: Uint8Array, out: Int32Array, maxElements: number) => number;

/** Int32 slots per element record: flags, then start/end per member, then the first three params. */
export const RECORD = 12;
/** The element is an object (any other value is an invalid request). */
export const F_OBJECT = 1;
/** A member appears twice (JSON.parse keeps the last; a node might keep the first). */
export const F_REPEATED = 2;
/** Its method's text is the same bytes as the previous element's method (which then has one). */
export const F_SAME_METHOD = 4;
/** The value of member m holds a backslash escape (anywhere, for a container): `F_ESCAPED << m`. */
export const F_ESCAPED = 8;
/**
 * The element has a member other than jsonrpc, id, method and params. The gateway reads only those four,
 * by their exact names; a node may read others as them (Go's encoding/json, in geth, erigon and bor,
 * matches member names without regard to case, with Unicode folding, and keeps the last: to it "METHOD"
 * or "ſ"-spelt names are the method), so such an element never goes upstream as the client wrote it.
 */
export const F_OTHER_MEMBER = 128;

/** Members, by index: their value's start (-1 absent) is at `1 + 2m`, its end at `2 + 2m`. */
export const M_JSONRPC = 0;
export const M_ID = 1;
export const M_METHOD = 2;
export const M_PARAMS = 3;
/** Where params[0..ARGS-1] start (-1: none, or params not an array). */
export const ARG0 = 9;
export const ARGS = 3;

/** Lengths of `"jsonrpc":`, `"id":`, `"method":`, `"params":` (by member). */
const MEMBER_KEY_LENGTHS = [10, 5, 9, 9];

/** The reference scan (see above); the C addon mirrors it function by function. */
export function scanBatchSpansJs(b: Uint8Array, out: Int32Array, maxElements: number): number {
  let i = skipWs(b, 0);
  if (byteAt(b, i) !== 0x5b /* [ */) return -1;
  i = skipWs(b, i + 1);
  if (byteAt(b, i) === 0x5d /* ] */) return -1; // empty (or not a batch): rare, JSON.parse says
  let count = 0;
  for (;;) {
    // Past the limit the rest is left to JSON.parse (which tells invalid JSON from batch_too_large).
    if (count === maxElements) return -1;
    const r = count * RECORD;
    let end: number;
    if (byteAt(b, i) === 0x7b /* { */) {
      end = scanMembers(b, i, out, r);
      if (end >= 0 && count > 0) markSameMethod(b, out, r);
    } else {
      end = scanValue(b, i);
      out[r] = 0;
    }
    if (end < 0) return -1;
    count++;
    i = skipWs(b, end);
    const c = byteAt(b, i);
    if (c === 0x2c /* , */) {
      i = skipWs(b, i + 1);
      continue;
    }
    if (c !== 0x5d) return -1;
    break;
  }
  return skipWs(b, i + 1) === b.length ? count : -1;
}

/** Sets F_SAME_METHOD on record r when its method's bytes are the previous record's method's. */
function markSameMethod(b: Uint8Array, out: Int32Array, r: number): void {
  const p = r - RECORD;
  if ((out[p]! & F_OBJECT) === 0) return;
  const start = out[r + 1 + 2 * M_METHOD]!;
  const prevStart = out[p + 1 + 2 * M_METHOD]!;
  if (start < 0 || prevStart < 0) return;
  const len = out[r + 2 + 2 * M_METHOD]! - start;
  if (out[p + 2 + 2 * M_METHOD]! - prevStart !== len) return;
  for (let k = 0; k < len; k++) if (b[start + k] !== b[prevStart + k]) return;
  out[r] = out[r]! | F_SAME_METHOD;
}

/** The object at `i` (a batch element) into record r; the index past it, or -1. */
function scanMembers(b: Uint8Array, i: number, out: Int32Array, r: number): number {
  out.fill(-1, r + 1, r + RECORD);
  let flags = F_OBJECT;
  i = skipWs(b, i + 1);
  if (byteAt(b, i) === 0x7d /* } */) {
    out[r] = flags;
    return i + 1;
  }
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
      // An escaped key may spell a member ("m\u0065thod"): left to JSON.parse.
      if (scanState.escaped) return -1;
      member = memberOf(b, keyStart, i);
      i = skipWs(b, i);
      if (byteAt(b, i) !== 0x3a /* : */) return -1;
      i = skipWs(b, i + 1);
    }
    const valueStart = i;
    scanState.escaped = false;
    if (member === M_PARAMS) i = scanParams(b, i, out, r + ARG0);
    else if (member === M_JSONRPC && isWord(b, i, '"2.0"')) i += 5;
    else i = scanValue(b, i);
    if (i < 0) return -1;
    if (member >= 0) {
      const at = r + 1 + 2 * member;
      if (out[at] !== -1) flags |= F_REPEATED;
      out[at] = valueStart;
      out[at + 1] = i;
      flags = scanState.escaped ? flags | (F_ESCAPED << member) : flags & ~(F_ESCAPED << member);
    } else {
      flags |= F_OTHER_MEMBER;
    }
    i = skipWs(b, i);
    const c = byteAt(b, i);
    if (c === 0x7d) {
      out[r] = flags;
      return i + 1;
    }
    if (c !== 0x2c) return -1;
    i = skipWs(b, i + 1);
  }
}

/** The params value at `i`; the starts of an array's first three elements go to out[a..a+2]. */
function scanParams(b: Uint8Array, i: number, out: Int32Array, a: number): number {
  out[a] = -1;
  out[a + 1] = -1;
  out[a + 2] = -1;
  if (byteAt(b, i) !== 0x5b /* [ */) return scanValue(b, i);
  i = skipWs(b, i + 1);
  if (byteAt(b, i) === 0x5d) return i + 1;
  for (let k = 0; ; k++) {
    if (k < 3) out[a + k] = i;
    i = scanValue(b, i);
    if (i < 0) return -1;
    i = skipWs(b, i);
    const c = byteAt(b, i);
    if (c === 0x5d) return i + 1;
    if (c !== 0x2c) return -1;
    i = skipWs(b, i + 1);
  }
}

/** The member whose key and colon, written compactly, are at `i` (an opening quote); -1 otherwise. */
function compactMember(b: Uint8Array, i: number): number {
  if (i + 10 > b.length) return -1;
  const c = b[i + 1];
  if (c === 0x69 /* i */) return b[i + 2] === 0x64 && b[i + 3] === 0x22 && b[i + 4] === 0x3a ? M_ID : -1;
  if (c === 0x6d /* m */) return isWord(b, i + 2, 'ethod":') ? M_METHOD : -1;
  if (c === 0x70 /* p */) return isWord(b, i + 2, 'arams":') ? M_PARAMS : -1;
  if (c === 0x6a /* j */) return isWord(b, i + 2, 'sonrpc":') ? M_JSONRPC : -1;
  return -1;
}

/** Which member the key b[start, end) (quotes included, no escapes) names; -1 for any other key. */
function memberOf(b: Uint8Array, start: number, end: number): number {
  const len = end - start - 2;
  const k = start + 1;
  if (len === 2) return isWord(b, k, "id") ? M_ID : -1;
  if (len === 6) return isWord(b, k, "method") ? M_METHOD : isWord(b, k, "params") ? M_PARAMS : -1;
  if (len === 7) return isWord(b, k, "jsonrpc") ? M_JSONRPC : -1;
  return -1;
}

/**
 * A node's answer to a verbatim batch (forward/verbatim.ts): its number of elements when it is a valid
 * JSON array whose every element is an object with a "result" member and no "error" member (every call
 * succeeded); -1 for anything else (the caller then parses it to decide). Keys written with escapes and
 * bytes above 0x7f also give -1. The reference for the C addon's scanReply.
 */
export function scanReplyJs(b: Uint8Array): number {
  let i = skipWs(b, 0);
  if (byteAt(b, i) !== 0x5b /* [ */) return -1;
  i = skipWs(b, i + 1);
  if (byteAt(b, i) === 0x5d) return skipWs(b, i + 1) === b.length ? 0 : -1;
  let count = 0;
  for (;;) {
    if (byteAt(b, i) !== 0x7b /* { */) return -1;
    i = skipWs(b, i + 1);
    let result = false;
    while (byteAt(b, i) !== 0x7d /* } */) {
      if (byteAt(b, i) !== 0x22) return -1;
      const keyStart = i;
      scanState.escaped = false;
      i = scanString(b, i);
      if (i < 0 || scanState.escaped) return -1;
      const len = i - keyStart - 2;
      if (len === 5 && isWord(b, keyStart + 1, "error")) return -1;
      if (len === 6 && isWord(b, keyStart + 1, "result")) result = true;
      i = skipWs(b, i);
      if (byteAt(b, i) !== 0x3a /* : */) return -1;
      i = scanValue(b, skipWs(b, i + 1));
      if (i < 0) return -1;
      i = skipWs(b, i);
      if (byteAt(b, i) === 0x2c /* , */) {
        i = skipWs(b, i + 1);
        if (byteAt(b, i) !== 0x22) return -1;
      } else if (byteAt(b, i) !== 0x7d) {
        return -1;
      }
    }
    if (!result) return -1;
    count++;
    i = skipWs(b, i + 1);
    const c = byteAt(b, i);
    if (c === 0x2c) {
      i = skipWs(b, i + 1);
      continue;
    }
    if (c !== 0x5d) return -1;
    return skipWs(b, i + 1) === b.length ? count : -1;
  }
}

/** Where `npm run build` puts the addon (this file runs compiled, from dist/data-plane/src/rpc). */
const ADDON_PATH = join(__dirname, "../../../../data-plane/native/build/Release/json_scan.node");

export type ScanReply = (body: Uint8Array) => number;

/** The C scans, or undefined when the addon was not built or does not load here (the reason kept). */
export function loadNativeScan(): { scan?: ScanBatchSpans; scanReply?: ScanReply; error?: string } {
  try {
    const addon = require(ADDON_PATH) as { scanBatchSpans?: ScanBatchSpans; scanReply?: ScanReply };
    if (typeof addon.scanBatchSpans !== "function" || typeof addon.scanReply !== "function")
      return { error: `${ADDON_PATH}: no scanBatchSpans or scanReply` };
    return { scan: addon.scanBatchSpans, scanReply: addon.scanReply };
  } catch (e) {
    return { error: (e as Error).message.split("\n")[0] };
  }
}

const native = loadNativeScan();

/** The scan batches go through: the C one when it loads, else the reference (same records, slower). */
export const scanBatchSpans: ScanBatchSpans = native.scan ?? scanBatchSpansJs;

/** The scan of a verbatim batch's answer: the C one when it loads, else the reference. */
export const scanReply: ScanReply = native.scanReply ?? scanReplyJs;

/** Which scan is in use, and why not the C one (logged at start-up). */
export const batchScanner: { kind: "native" | "js"; error?: string } = native.scan
  ? { kind: "native" }
  : { kind: "js", error: native.error };
