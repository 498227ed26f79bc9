import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { maxLogsBlockRange } from "../../../shared/src/redis/records";
import type { MethodRules } from "../access/access-rules";
import { Acquired, concurrencyRefusalMessage, type Flight } from "../limits/concurrency";
import { checkedFilterParams, checkLogsRange, hasLogsRange } from "../limits/logs-range";
import { type MethodPolicy, readsParams } from "../policy/method-policy";
import type { RpcCall } from "../rpc/parse";
import { errorJson } from "../rpc/response-json";
import type { NetworkPool } from "../upstream/network-pool";

/*
 * What refuses a request object before it goes upstream, for every entry of the forwarding core: the
 * per-element checks (method policy, the app's method rules, the eth_getLogs range) on the call as it
 * will be sent (checkedCall), and the tenant's concurrency caps.
 */

/** A request object refused before anything is forwarded: its row and the error's `data` extras. */
export interface ElementRefusal {
  readonly row: ErrorRow;
  readonly message?: string;
  readonly limit?: number;
}

/**
 * Per-element checks before forwarding, in this order: the endpoint's method policy (shared-node
 * namespaces, a node key's Safe mode), then the app's own method rules (access rules: allow- or
 * deny-list, `method_not_allowed_by_app`), then the network's eth_getLogs / eth_newFilter block range
 * (tags resolved against the pool's head). Undefined = forward it.
 */
export function elementRefusal(
  call: RpcCall,
  pool: NetworkPool,
  policy: MethodPolicy,
  rules?: MethodRules,
): ElementRefusal | undefined {
  const network = pool.record;
  const blocked = policy.check(call.method, network, readsParams(call.method) ? call.params : undefined);
  if (blocked !== undefined) return { row: GatewayError.MethodBlocked, message: blocked };
  if (rules !== undefined) {
    const refused = rules.refusal(call.method);
    if (refused !== undefined) return { row: GatewayError.MethodNotAllowedByApp, message: refused };
  }
  if (hasLogsRange(call.method)) {
    const max = maxLogsBlockRange(network);
    if (max > 0) return checkLogsRange(call.method, call.params, pool.cacheHead(), max);
  }
  return undefined;
}

/**
 * The call as it is checked and sent: for a method with a filter object (eth_getLogs, eth_newFilter) the
 * filter rebuilt from the members the range check reads (checkedFilterParams), every other call as it is.
 * Every entry applies it before the checks, so that what the node runs is what was checked.
 */
export function checkedCall(call: RpcCall): RpcCall {
  if (!hasLogsRange(call.method)) return call;
  const params = call.params;
  const checked = checkedFilterParams(params);
  return checked === params ? call : { method: call.method, params: checked, idText: call.idText };
}

/** A refused element's error response text (the client's id, the row, `data.requestId` and extras). */
export function refusalJson(r: ElementRefusal, idText: string, requestId: string): string {
  return errorJson(r.row, idText, { requestId, limit: r.limit, message: r.message });
}

/**
 * Retry hint on a concurrency refusal: slots free up as calls end (at most UPSTREAM_TIMEOUT_MS), usually
 * much sooner. Whole seconds, for Retry-After.
 */
const CONCURRENCY_RETRY_AFTER_MS = 1000;

/** The error details of a refusal by the tenant's concurrency caps (its plan's, else the defaults). */
export interface ConcurrencyRefusal {
  readonly row: ErrorRow;
  readonly limit: number;
  readonly message: string | undefined;
  readonly retryAfterMs: number;
}

export function concurrencyRefusal(flight: Flight, got: Acquired, heavy: number): ConcurrencyRefusal {
  return {
    row: GatewayError.ConcurrencyLimit,
    limit: got !== Acquired.OverTotal ? flight.maxHeavy : flight.max,
    message: concurrencyRefusalMessage(got, heavy, flight.maxHeavy),
    retryAfterMs: CONCURRENCY_RETRY_AFTER_MS,
  };
}
