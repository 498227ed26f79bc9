import { categoryOfNodeError, ErrorCategory, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { givesHeadHint } from "../cache/policy";
import { hasLogsRange } from "../limits/logs-range";
import type { RpcCall } from "../rpc/parse";

/**
 * Verbatim batches: a client batch whose every element is forwarded goes upstream as the client's own
 * text, and the node's answer comes back to the client as the node's text. The gateway still parses and
 * validates the batch (JSON.parse), polices and counts every element, and reads each element's category
 * from the answer; it skips what costs most per element on the usual path: re-serialising each call
 * with a rewritten id, parsing the answer and re-serialising each result. Ids are the client's own,
 * which is safe because each upstream exchange is its own HTTP request: no other client's ids share it.
 *
 * What the node receives must be what the gateway checked. JSON.parse keeps the last of repeated keys,
 * and a node may keep the first, so a body whose elements could repeat `method` or `params` (the members
 * the policy and the range checks read) is not sent verbatim: every valid element has one literal
 * `"method"` key (with no `\u` escape anywhere in the body, a key cannot be spelt another way), so a body
 * with exactly n occurrences of `"method"` has no repeated method, and one with at most n of `"params"`
 * no repeated params (counted only when a range check reads them: each count is a scan of the body).
 */

/** Whether `text`, a batch of `calls` (every element valid and forwarded), may go upstream as it is. */
export function verbatimEligible(text: string, calls: readonly RpcCall[]): boolean {
  const n = calls.length;
  let answered = 0;
  let paramsRead = false;
  for (let i = 0; i < n; i++) {
    const c = calls[i]!;
    // Their answers feed the head tracking (and empty-answer handling), read per element on the usual path.
    if (givesHeadHint(c.method)) return false;
    const id = c.idText;
    if (id !== undefined) {
      if (!portableId(id)) return false;
      answered++;
    }
    if (hasLogsRange(c.method)) paramsRead = true;
  }
  // A batch of notifications only gets no answer at all, which is no JSON-RPC batch answer.
  if (answered === 0) return false;
  if (text.includes("\\u") || NON_CANONICAL_ID.test(text)) return false;
  if (occurrences(text, '"method"', n + 1) !== n) return false;
  // Params are read before forwarding only by the range checks: only then can a repeat matter.
  return !paramsRead || occurrences(text, '"params"', n + 1) <= n;
}

/**
 * A number id written in a form JSON.parse turns into another text (`1e3`, `1.0`, `-0`: idText holds
 * String(value)), or negative. Also matches `"id"` keys inside params, which only sends such a batch the
 * usual way.
 */
const NON_CANONICAL_ID = /"id"\s*:\s*(?:-|[0-9]+[.eE])/;

/**
 * Ids every node takes as they are: the usual path sends its own small integers, so the client's ids must
 * be ones no node refuses or rewrites (jsonrpsee nodes, Substrate's and anvil, take only u64 numbers,
 * strings and null): null, an integer of at most 15 digits, or a string without escapes.
 */
function portableId(id: string): boolean {
  const c = id.charCodeAt(0);
  if (c === 0x22 /* " */) return !id.includes("\\");
  if (id === "null") return true;
  if (id.length > 15) return false;
  for (let i = 0; i < id.length; i++) {
    const d = id.charCodeAt(i);
    if (d < 0x30 || d > 0x39) return false;
  }
  return true;
}

/** Occurrences of `needle` in `text`, counting stops at `max`. */
function occurrences(text: string, needle: string, max: number): number {
  let count = 0;
  let at = text.indexOf(needle);
  while (at >= 0 && count < max) {
    count++;
    at = text.indexOf(needle, at + needle.length);
  }
  return count;
}

/** A node's answer to a verbatim batch: its text for the client, and each call's dashboard category. */
export interface VerbatimReply {
  readonly text: string;
  readonly categories: string[];
}

/** Why a node's answer to a verbatim batch cannot be passed on (see readVerbatimReply). */
export const VerbatimRefusal = {
  /** Not a JSON-RPC batch answer: a failed exchange (the pool fails over). */
  Invalid: 0,
  /** One error object for the whole batch: the node does not take batches. */
  BatchesRefused: 1,
} as const;
export type VerbatimRefusal = (typeof VerbatimRefusal)[keyof typeof VerbatimRefusal];

/**
 * Checks a node's answer to a verbatim batch of `calls` and reads each call's category.
 *
 * Fast path (geth, anvil, reth, erigon, substrate write compact JSON): an array holding one
 * `"jsonrpc":"2.0"` per call with an id and no `"error"` anywhere: every call succeeded, nothing is
 * parsed. Otherwise the answer is parsed (so what is passed on is valid JSON) and each error element is
 * matched to its call by id; a call with an id and no answer is upstream_bad_response, as on the usual
 * path (its answer stays missing from the array, which is the node's).
 */
export function readVerbatimReply(text: string, calls: readonly RpcCall[]): VerbatimReply | VerbatimRefusal {
  const n = calls.length;
  let answered = 0;
  for (let i = 0; i < n; i++) if (calls[i]!.idText !== undefined) answered++;
  const first = firstNonSpace(text);
  if (text.charCodeAt(first) === 0x5b /* [ */ && text.charCodeAt(lastNonSpace(text)) === 0x5d /* ] */) {
    if (!text.includes('"error"') && occurrences(text, '"jsonrpc":"2.0"', answered + 1) === answered) {
      return { text, categories: new Array<string>(n).fill(ErrorCategory.Success) };
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return VerbatimRefusal.Invalid;
  }
  if (!Array.isArray(value)) {
    const isErrorObject = value !== null && typeof value === "object" && "error" in value;
    return isErrorObject ? VerbatimRefusal.BatchesRefused : VerbatimRefusal.Invalid;
  }
  // Calls by their id's JSON text (the parse rounds ids beyond 2^53: those calls stay unmatched, and are
  // counted as bad answers, which the usual path would have sent them anyway: it rewrites ids).
  const byId = new Map<string, number[]>();
  for (let i = 0; i < n; i++) {
    const id = calls[i]!.idText;
    if (id === undefined) continue;
    const list = byId.get(id);
    if (list === undefined) byId.set(id, [i]);
    else list.push(i);
  }
  const categories = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    categories[i] =
      calls[i]!.idText === undefined ? ErrorCategory.Success : GatewayError.UpstreamBadResponse.category;
  }
  for (const el of value) {
    if (el === null || typeof el !== "object") return VerbatimRefusal.Invalid;
    const o = el as { id?: unknown; error?: unknown; result?: unknown };
    const list = byId.get(idText(o.id));
    const i = list?.shift();
    if (i === undefined) continue;
    if (o.error !== undefined && o.error !== null && typeof o.error === "object") {
      const code = (o.error as { code?: unknown }).code;
      categories[i] = typeof code === "number" ? categoryOfNodeError(code) : ErrorCategory.NodeError;
    } else if ("result" in o) {
      categories[i] = ErrorCategory.Success;
    }
  }
  return { text, categories };
}

function idText(id: unknown): string {
  if (id === null || id === undefined) return "null";
  return typeof id === "string" || typeof id === "number" ? JSON.stringify(id) : "";
}

function firstNonSpace(text: string): number {
  let i = 0;
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

function lastNonSpace(text: string): number {
  let i = text.length - 1;
  while (i >= 0 && isSpace(text.charCodeAt(i))) i--;
  return i;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
