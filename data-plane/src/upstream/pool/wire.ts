import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { type CallResult, parseSingleReply, type Reply, ReplyKind, replyFromValue } from "../reply";
import { INVALID_REPLY, type ReplyBody } from "../upstream";

/**
 * What goes on the wire between the pool and a node: the calls, the request bodies with the pool's own
 * ids, and the checks that read a node's answer (run before the exchange settles, see Upstream.exchange).
 */

export interface OutgoingCall {
  readonly method: string;
  readonly params: unknown;
  /** A sampled request's call only (data-plane/src/telemetry): its upstream span. */
  readonly span?: UpstreamSpan;
  /** params[index] without building the params, when the parser can (rpc/parse.ts RpcCall). */
  param?(index: number): unknown;
}

/**
 * A sampled call's upstream span, as the pool sees it. A call sent alone carries its `traceparent`; one
 * coalesced with other calls into one upstream batch shares that exchange's single traceparent header:
 * the first sampled call's of the batch, and every sampled call in it is told (`coalesced`).
 */
export interface UpstreamSpan {
  /** The W3C traceparent naming this span, for the upstream request's header. */
  readonly traceparent: string;
  /** The call went out in an upstream batch of `size` calls whose request carried traceparent `sent`. */
  coalesced(size: number, sent: string): void;
}

/**
 * Calls whose cost the client chooses (block ranges, traces, whole-storage reads). A timeout of one says
 * nothing about the node's health, and failing it over would only hand the same load to the next node:
 * such a timeout is answered 504 at once and never counts toward a breaker.
 */
const HEAVY = new Set([
  "eth_getLogs",
  "eth_getFilterLogs",
  "state_getPairs",
  "state_getKeys",
  "state_getKeysPaged",
  "state_queryStorage",
  "state_queryStorageAt",
  "state_traceBlock",
]);

export function isHeavy(method: string): boolean {
  return (
    HEAVY.has(method) ||
    method.startsWith("debug_") ||
    method.startsWith("trace_") ||
    method.startsWith("arbtrace_")
  );
}

/** A node answered a batch with one error object: it does not take batches (see parseBatchReply). */
export const REFUSED = Symbol("batch refused");

/** A reply that cannot be used, through no fault of the upstream's (see Failover.exchange). */
export const NOT_BAD = Symbol("unusable, upstream not at fault");

/** A reply that is the node's JSON-RPC rate-limit error (see isRateLimitTail). */
export const RATE_LIMITED = Symbol("rate limited by the node");

/** What a reply check of the pool returns: the answer, or why the reply cannot be used. */
export type Checked<T> = T | typeof INVALID_REPLY | typeof NOT_BAD | typeof RATE_LIMITED;

const NO_CAPABLE_REASON = GatewayError.NoCapableUpstream.reason;

/** Whether a result is the refusal for want of a capable upstream (nothing was sent). */
export function refusedForCapability(r: CallResult | undefined): boolean {
  return r !== undefined && !r.ok && r.error.reason === NO_CAPABLE_REASON;
}

/**
 * A node's JSON-RPC error that means "you are sending too much" (Infura, Alchemy, QuickNode style: -32005
 * with a rate wording, or code 429). -32005 alone is not enough: nodes also use it for per-request limits
 * ("query returned more than 10000 results"), which a client can trigger at will and must not back a node off.
 */
export function isRateLimitTail(tail: string): boolean {
  if (!tail.includes("-32005") && !tail.includes("429")) return false;
  try {
    const e = (JSON.parse(`{${tail.slice(1)}`) as { error?: { code?: unknown; message?: unknown } }).error;
    const code = e?.code;
    const message = typeof e?.message === "string" ? e.message : "";
    if (code === 429) return true;
    return code === -32005 && /\brate\b|rate.?limit|too many requests|throttl|per second/i.test(message);
  } catch {
    return false;
  }
}

/** A probe's answer that is the node's JSON-RPC rate-limit error (throttled, not sick). */
export function isRateLimitReply(text: string): boolean {
  const reply = parseSingleReply(text, 1);
  return reply !== undefined && reply.kind === ReplyKind.Error && isRateLimitTail(reply.tail);
}

/** One JSON-RPC request body for `c` with upstream id `gid`; `paramsJson` its params already serialised. */
export function singleBody(gid: number, c: OutgoingCall, paramsJson: string | undefined): string {
  return c.params === undefined
    ? `{"jsonrpc":"2.0","id":${gid},"method":${JSON.stringify(c.method)}}`
    : `{"jsonrpc":"2.0","id":${gid},"method":${JSON.stringify(c.method)},"params":${paramsJson ?? JSON.stringify(c.params)}}`;
}

/** One JSON-RPC batch body for `calls` with ids base, base + 1, ...; `paramsJson[i]` call i's params serialised. */
export function batchBody(
  base: number,
  calls: readonly OutgoingCall[],
  paramsJson: readonly (string | undefined)[] | undefined,
): string {
  const parts = new Array<string>(calls.length);
  for (let i = 0; i < calls.length; i++) {
    const c = calls[i]!;
    parts[i] =
      c.params === undefined
        ? `{"jsonrpc":"2.0","id":${base + i},"method":${JSON.stringify(c.method)}}`
        : `{"jsonrpc":"2.0","id":${base + i},"method":${JSON.stringify(c.method)},"params":${paramsJson?.[i] ?? JSON.stringify(c.params)}}`;
  }
  return `[${parts.join(",")}]`;
}

/** The reply check of a single call sent with id `gid` (see Failover.exchange). */
export function singleCheck(gid: number): (body: ReplyBody) => Checked<Reply> {
  return (body) => {
    const reply = parseSingleReply(body.text, gid);
    if (reply === undefined) return INVALID_REPLY;
    return reply.kind === ReplyKind.Error && isRateLimitTail(reply.tail) ? RATE_LIMITED : reply;
  };
}

/**
 * A node's answer to a batch sent with ids base .. base + n - 1, in call order: undefined when it is no
 * JSON-RPC answer, REFUSED when it is one error object (the node does not take batches). A call whose
 * answer is missing is upstream_bad_response.
 */
export function parseBatchReply(
  text: string,
  base: number,
  n: number,
): CallResult[] | undefined | typeof REFUSED {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(value)) {
    const isErrorObject = value !== null && typeof value === "object" && "error" in value;
    return isErrorObject ? REFUSED : undefined;
  }
  const out = new Array<CallResult>(n);
  for (const el of value) {
    if (el === null || typeof el !== "object") continue;
    const id = (el as { id?: unknown }).id;
    if (typeof id !== "number") continue;
    const i = id - base;
    if (i < 0 || i >= n) continue;
    const reply: Reply | undefined = replyFromValue(el as Record<string, unknown>);
    if (reply !== undefined) out[i] = { ok: true, reply };
  }
  for (let i = 0; i < n; i++) {
    if (out[i] === undefined) out[i] = { ok: false, error: GatewayError.UpstreamBadResponse };
  }
  return out;
}

/** The pool's upstream request ids: consecutive, wrapping before they leave the small-integer range. */
export class IdSequence {
  private next = 1;

  /** `n` consecutive ids; returns the first. */
  take(n: number): number {
    const base = this.next;
    this.next += n;
    if (this.next > 0x3fffffff) this.next = 1;
    return base;
  }
}
