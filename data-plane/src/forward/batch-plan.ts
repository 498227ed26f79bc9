import { hasLogsRange } from "../limits/logs-range";
import { readsParams } from "../policy/method-policy";
import type { BatchItem } from "../rpc/parse";
import { isItemError, type RpcCall } from "../rpc/parse";
import { errorJson, replyJson } from "../rpc/response-json";
import type { NetworkPool } from "../upstream/network-pool";
import type { CallResult } from "../upstream/reply";
import { type ConcurrencyRefusal, checkedCall, type ElementRefusal, refusalJson } from "./refusals";
import { observeHead } from "./served-head";

/*
 * A batch as the forwarding core handles it: planned (invalid and refused elements answered at once, the
 * transport's own elements set apart, the rest to forward together), then settled with the forwarded
 * elements' results, and turned into the response body and its quota units.
 */

/**
 * A batch split by the core: per element its answer text (undefined = no answer: a notification, or
 * not known yet) and category, and the elements still to forward (`forward[j]` is `items[forwardIdx[j]]`)
 * or to answer by the transport itself (`localIdx`, e.g. WebSocket subscriptions).
 */
export interface BatchPlan {
  /**
   * The node's answer text for the whole batch, when it went upstream verbatim (forward/verbatim.ts):
   * then it is the response body, and `out` holds nothing.
   */
  whole?: string | Uint8Array;
  readonly out: (string | undefined)[];
  readonly categories: string[];
  readonly forwardIdx: number[];
  readonly forward: RpcCall[];
  readonly localIdx: number[];
}

/**
 * Plans a batch: invalid elements and elements refused by `refuse` (see elementRefusal) are answered
 * here; elements `local` claims are left to the transport; the rest are to be forwarded together.
 * As elementRefusal, `refuse` reads a call's params only for methods with a block range (hasLogsRange):
 * a run of elements of one other method takes the run's first verdict.
 */
export function planBatch(
  items: readonly BatchItem[],
  requestId: string,
  refuse: (call: RpcCall) => ElementRefusal | undefined,
  local?: (call: RpcCall) => boolean,
): BatchPlan {
  const n = items.length;
  const out = new Array<string | undefined>(n);
  const categories = new Array<string>(n);
  const forwardIdx: number[] = [];
  const forward: RpcCall[] = [];
  const localIdx: number[] = [];
  let runMethod: string | undefined;
  let runRefusal: ElementRefusal | undefined;
  for (let i = 0; i < n; i++) {
    const element = items[i]!;
    if (isItemError(element)) {
      out[i] = errorJson(element.error, element.idText, { requestId });
      categories[i] = element.error.category;
      continue;
    }
    // A run's method never has a filter object (runMethod is unset for those), so only the first element of
    // a run needs checkedCall.
    let item: RpcCall = element;
    let refused: ElementRefusal | undefined;
    if (item.method === runMethod) {
      refused = runRefusal;
    } else {
      item = checkedCall(element);
      refused = refuse(item);
      runMethod = hasLogsRange(item.method) || readsParams(item.method) ? undefined : item.method;
      runRefusal = refused;
    }
    if (refused !== undefined) {
      categories[i] = refused.row.category;
      if (item.idText !== undefined) out[i] = refusalJson(refused, item.idText, requestId);
      continue;
    }
    if (local?.(item)) {
      localIdx.push(i);
      continue;
    }
    forwardIdx.push(i);
    forward.push(item);
  }
  return { out, categories, forwardIdx, forward, localIdx };
}

/**
 * Reassembles the forwarded elements' results (results[j] answers plan.forward[j]) into the plan, feeding
 * head hints to `pool`. Returns whether any forwarded element got an answer from a node.
 */
export function settleBatch(
  plan: BatchPlan,
  results: readonly CallResult[],
  requestId: string,
  pool: NetworkPool | undefined,
): boolean {
  let anyOk = false;
  for (let j = 0; j < results.length; j++) {
    const r = results[j]!;
    const i = plan.forwardIdx[j]!;
    const call = plan.forward[j]!;
    if (r.ok) anyOk = true;
    if (pool !== undefined) observeHead(pool, call.method, r);
    plan.categories[i] = resultCategory(r);
    plan.out[i] = resultJson(call.idText, r, requestId);
  }
  return anyOk;
}

/** Sets one element's answer from a transport-made text and category (local elements, refusals). */
export function setElement(plan: BatchPlan, i: number, text: string | undefined, category: string): void {
  plan.out[i] = text;
  plan.categories[i] = category;
}

/** A settled plan's response body: the node's text of a verbatim batch, else the answers in request order. */
export function planBody(plan: BatchPlan): string | Uint8Array {
  return plan.whole ?? batchJson(plan.out);
}

/** Response objects a settled plan answers (the quota's response units): every element with an id. */
export function planUnits(plan: BatchPlan, items: readonly BatchItem[]): number {
  let units = 0;
  if (plan.whole !== undefined) {
    for (const it of items) if (it.idText !== undefined) units++;
    return units;
  }
  for (const s of plan.out) if (s !== undefined) units++;
  return units;
}

/** The batch response body: the answers in request order, "" when there is none (all notifications). */
export function batchJson(out: readonly (string | undefined)[]): string {
  let body = "";
  for (let i = 0; i < out.length; i++) {
    const s = out[i];
    if (s === undefined) continue;
    body = body === "" ? `[${s}` : `${body},${s}`;
  }
  return body === "" ? "" : `${body}]`;
}

/** One forwarded element's answer text (undefined for a notification) and dashboard category. */
export function resultJson(idText: string | undefined, r: CallResult, requestId: string): string | undefined {
  if (idText === undefined) return undefined;
  return r.ok ? replyJson(idText, r.reply.tail) : errorJson(r.error, idText, { requestId });
}

/** The dashboard category of a forwarded element's result. */
export function resultCategory(r: CallResult): string {
  return r.ok ? r.reply.category : r.error.category;
}

/** Answers every forwarded element of a plan with a concurrency refusal (a transport that answers per element). */
export function refuseForwarded(plan: BatchPlan, r: ConcurrencyRefusal, requestId: string): void {
  const forward = plan.forward;
  for (let j = 0; j < forward.length; j++) {
    const idText = forward[j]!.idText;
    const text = idText === undefined ? undefined : errorJson(r.row, idText, { requestId, ...r });
    setElement(plan, plan.forwardIdx[j]!, text, r.row.category);
  }
}
