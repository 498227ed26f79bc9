import { categoryOfNodeError, ErrorCategory, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { givesHeadHint } from "../cache/policy";
import { hasLogsRange } from "../limits/logs-range";
import { scanReply } from "../rpc/batch-spans";
import type { RpcCall } from "../rpc/parse";
import type { ReplyBody } from "../upstream/upstream";

/**
 * Verbatim batches: a client batch whose every element is forwarded goes upstream as the client's own
 * text, and the node's answer comes back to the client as the node's own bytes. The gateway still validates
 * the batch (rpc/parse.ts scans it as strictly as JSON.parse), polices and counts every element, and
 * reads each element's category from the answer; it skips what costs most per element on the usual path:
 * re-serialising each call with a rewritten id, parsing the answer and re-serialising each result. Ids
 * are the client's own, which is safe because each upstream exchange is its own HTTP request: no other
 * client's ids share it.
 *
 * What the node receives must be what the gateway checked: the parser lets a text go verbatim only when
 * no element repeats a member (JSON.parse keeps the last of repeated keys, a node may keep the first) and
 * every id is echoed as written (ParseResult `verbatim`); the transports pass the text to forwardPlan
 * only then. What is left to check here is per call.
 */

/** Whether a batch of `calls` (every element valid and forwarded, its text `verbatim`) may go upstream as it is. */
export function verbatimEligible(calls: readonly RpcCall[]): boolean {
  const n = calls.length;
  let answered = 0;
  let method: string | undefined;
  for (let i = 0; i < n; i++) {
    const c = calls[i]!;
    // Their answers feed the head tracking (and empty-answer handling), read per element on the usual path.
    if (c.method !== method) {
      method = c.method;
      if (givesHeadHint(method)) return false;
      // The range check reads the filter's fromBlock / toBlock / blockHash as JSON.parse does (the last of
      // repeated keys); a node that keeps the first could be asked a wider range than was checked, so
      // these are re-serialised from what was checked.
      if (hasLogsRange(method)) return false;
    }
    const id = c.idText;
    if (id !== undefined) {
      if (!portableId(id)) return false;
      answered++;
    }
  }
  // A batch of notifications only gets no answer at all, which is no JSON-RPC batch answer.
  return answered > 0;
}

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

/**
 * A node's answer to a verbatim batch: the body for the client (its bytes as the node sent them when every
 * call succeeded, else its text) and each call's dashboard category.
 */
export interface VerbatimReply {
  readonly body: string | Uint8Array;
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
 * Checks a node's answer to a verbatim batch of `calls` and reads each call's category. Whatever is
 * passed on is valid JSON.
 *
 * Fast path (every call succeeded, as in nearly every answer): one scan of the bytes (rpc/batch-spans.ts
 * scanReply, the C addon) finds a valid JSON array of as many objects as calls with an id, each with a
 * "result" and no "error" member; the bytes then go to the client as they are, never decoded. Otherwise
 * the answer is parsed and each error element is matched to its call by id; a call with an id and no
 * answer is upstream_bad_response, as on the usual path (its answer stays missing from the array, which
 * is the node's).
 */
export function readVerbatimReply(
  reply: ReplyBody,
  calls: readonly RpcCall[],
): VerbatimReply | VerbatimRefusal {
  const n = calls.length;
  let answered = 0;
  for (let i = 0; i < n; i++) if (calls[i]!.idText !== undefined) answered++;
  if (scanReply(reply.bytes) === answered) {
    return { body: reply.bytes, categories: new Array<string>(n).fill(ErrorCategory.Success) };
  }
  const text = reply.text;
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
  return { body: text, categories };
}

function idText(id: unknown): string {
  if (id === null || id === undefined) return "null";
  return typeof id === "string" || typeof id === "number" ? JSON.stringify(id) : "";
}
