import { categoryOfNodeError, ErrorCategory, GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { scanReply } from "../../rpc/batch-spans";
import type { RpcCall } from "../../rpc/parse";
import type { ReplyBody } from "../upstream";

/*
 * A node's answer to a client batch sent as the client's own text (forward/verbatim.ts says when a batch
 * goes so): checked here, where the exchange's reply check runs, before the pool settles the exchange.
 */

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
