import { type ErrorRow } from "../../../shared/src/jsonrpc/errors";
import type { MethodRules } from "../access/access-rules";
import { type CachingDeps, cacheKey, fetchCall, lookup, store } from "../cache/call-cache";
import type { ResponseCache } from "../cache/response-cache";
import { Acquired, type ConcurrencyLimiter, type Flight } from "../limits/concurrency";
import { type MethodPolicy } from "../policy/method-policy";
import { type RpcCall } from "../rpc/parse";
import {
  type ChildSpan,
  jsonRpcError,
  type RequestTrace,
  type SpanAttributes,
  tailErrorCode,
} from "../telemetry/tracing";
import { isHeavy, type NetworkPool } from "../upstream/network-pool";
import { type CallResult, type Reply, ReplyKind } from "../upstream/reply";
import { type BatchPlan, settleBatch } from "./batch-plan";
import type { PoolCalls } from "./pool-calls";
import {
  type ConcurrencyRefusal,
  checkedCall,
  concurrencyRefusal,
  type ElementRefusal,
  elementRefusal,
} from "./refusals";
import { atServedHead, isCall, observeHead } from "./served-head";
import { verbatimEligible } from "./verbatim";

/**
 * The forwarding core: what happens to a parsed call or batch between a transport (HTTP exchange,
 * WebSocket session, dedicated-node endpoint) and the upstream nodes. Transports keep what is theirs
 * (admission, status codes, framing, when to answer, usage records); everything per request object is
 * in one place: the checks before forwarding (refusals.ts: method policy, the app's method rules,
 * eth_getLogs range, concurrency caps), the cache rule, key, lookup, in-flight merge and store
 * (cache/call-cache.ts), batch planning and reassembly (batch-plan.ts: which elements go upstream, answer texts and
 * dashboard categories in request order), the served head (served-head.ts), and here the two entries that
 * hold them together with the tenant's in-flight slots.
 *
 * The two entries every transport uses, as eRPC's Network.Forward: `forwardCall` for a single call and
 * `planBatch` + `forwardPlan` for a batch. A shared network and a dedicated node are both a NetworkPool
 * (a node's has one upstream), so routing, hedging, log splitting and caching apply to both alike.
 *
 * Plain functions over the caller's objects, not a per-request object: the cache-hit path (refusal →
 * cacheKey → lookup) allocates only the cache key string and the outcome.
 */

/** What the core needs from the gateway (a subset of GatewayContext, so tests can pass their own). */
export interface ForwardDeps extends CachingDeps {
  readonly flights: ConcurrencyLimiter;
  /**
   * Calls answered from the pool as a whole rather than by one node (filters, pending nonces, broadcast
   * sends, reading one's own write: forward/pool-calls.ts); absent = every call goes to one node (a
   * dedicated node's endpoint, which is one node).
   */
  readonly poolCalls?: PoolCalls;
}

/** What forwardCall did with a single call. */
export const Outcome = {
  /** Refused before forwarding (method policy, eth_getLogs range): `refusal`. */
  Refused: 0,
  /** Answered from the cache: `reply`. */
  Cached: 1,
  /** Refused by the tenant's concurrency caps, nothing sent: `refusal`. */
  OverCap: 2,
  /** Sent upstream: `result`; `cacheable` says whether it had a cache key (X-Cache: MISS). */
  Forwarded: 3,
} as const;

export type CallOutcome =
  | { readonly kind: typeof Outcome.Refused; readonly refusal: ElementRefusal }
  | { readonly kind: typeof Outcome.Cached; readonly reply: Reply }
  | { readonly kind: typeof Outcome.OverCap; readonly refusal: ConcurrencyRefusal }
  | { readonly kind: typeof Outcome.Forwarded; readonly result: CallResult; readonly cacheable: boolean };

/**
 * The single-call entry: method policy, the app's method rules (`rules`) and range check, the cache (with in-flight merge of identical
 * calls), one of the tenant's in-flight slots (`flight`: the key's tenant and caps, or the client
 * address's) while the upstream call runs, then the answer stored and its head hint observed. A promise
 * only when it has to wait for an upstream.
 *
 * `trace`: a sampled request's trace (data-plane/src/telemetry), which gets the cache lookup and the
 * upstream exchange as child spans, and the upstream request its traceparent. Undefined (not sampled,
 * tracing off) costs one comparison per step.
 */
export function forwardCall(
  deps: ForwardDeps,
  pool: NetworkPool,
  policy: MethodPolicy,
  flight: Flight,
  call: RpcCall,
  rules?: MethodRules,
  trace?: RequestTrace,
): CallOutcome | Promise<CallOutcome> {
  call = checkedCall(call);
  const refusal = elementRefusal(call, pool, policy, rules);
  if (refusal !== undefined) return { kind: Outcome.Refused, refusal };
  let key = cacheKey(deps, call, pool);
  if (key !== "") {
    const t0 = trace === undefined ? 0 : performance.now();
    const hit = lookup(deps, pool, key);
    trace?.step("cache.lookup", t0, { "gateway.cache.hit": hit !== undefined });
    if (hit !== undefined) {
      const fixed = atServedHead(call, pool, hit);
      if (fixed === undefined) return { kind: Outcome.Cached, reply: hit };
      if (!isCall(fixed)) return { kind: Outcome.Cached, reply: fixed };
      // A cached `latest` block below the served head: that block is fetched instead (uncached).
      call = fixed;
      key = "";
    }
  }
  const heavy = isHeavy(call.method) ? 1 : 0;
  const flights = deps.flights;
  const got = flights.acquireFor(flight, 1, heavy);
  if (got !== Acquired.Ok) {
    return { kind: Outcome.OverCap, refusal: concurrencyRefusal(flight, got, heavy) };
  }
  return sendCall(deps, pool, flight, heavy, call, key, trace);
}

async function sendCall(
  deps: ForwardDeps,
  pool: NetworkPool,
  flight: Flight,
  heavy: number,
  call: RpcCall,
  key: string,
  trace: RequestTrace | undefined,
): Promise<CallOutcome> {
  let result: CallResult;
  const span = trace === undefined ? undefined : upstreamSpan(trace, deps.cache, pool, call, key);
  try {
    const pc = deps.poolCalls;
    result = pc?.handles(pool, call)
      ? await pc.answer(pool, flight.id, call)
      : await fetchCall(
          span === undefined ? call : { method: call.method, params: call.params, span },
          pool,
          key,
          deps.cache,
        );
    if (result.ok) {
      const fixed = atServedHead(call, pool, result.reply);
      if (fixed !== undefined)
        result = isCall(fixed)
          ? await atHeadBlock(fixed, pool, deps.cache, result)
          : { ok: true, reply: fixed };
    }
  } finally {
    deps.flights.releaseFor(flight, 1, heavy);
  }
  span?.end(upstreamAttributes(result), result.ok ? undefined : result.error.reason);
  store(deps, pool, key, result);
  observeHead(pool, call.method, result);
  return { kind: Outcome.Forwarded, result, cacheable: key !== "" };
}

/**
 * The served head's block (served-head.ts) instead of `behind`, a `latest` block below it; `behind` still
 * when no node has that block yet (it came from another instance, or from a node that lost it in a
 * reorg): an older block beats no block.
 */
async function atHeadBlock(
  pinned: RpcCall,
  pool: NetworkPool,
  cache: ResponseCache,
  behind: CallResult,
): Promise<CallResult> {
  const r = await fetchCall(pinned, pool, "", cache);
  return r.ok && r.reply.kind === ReplyKind.Result ? r : behind;
}

/**
 * A sampled call's upstream span. A call that joins an identical one already in flight (the cache's
 * in-flight merge) sends nothing itself: its span says so (`gateway.merged`) and links to the upstream
 * span of the call it waits on when that one was sampled too (its traceparent is the one the node got).
 */
function upstreamSpan(
  trace: RequestTrace,
  cache: ResponseCache,
  pool: NetworkPool,
  call: RpcCall,
  key: string,
): ChildSpan {
  const joined = key === "" ? undefined : cache.joining(key);
  const attributes: SpanAttributes = {
    "rpc.system.name": "jsonrpc",
    "rpc.method": call.method,
    "gateway.network": pool.record.slug,
  };
  if (joined === undefined) return trace.child("upstream.call", attributes);
  attributes["gateway.merged"] = true;
  return trace.child("upstream.call", attributes, joined === "" ? undefined : joined);
}

/** What forwardPlan did with a batch plan's forwarded elements. */
export interface PlanOutcome {
  /** The tenant's concurrency caps refused them: nothing was sent and the plan is untouched. */
  readonly overCap?: ConcurrencyRefusal;
  /** results[j] answers plan.forward[j] (empty when nothing was sent). */
  readonly results: readonly CallResult[];
  /** At least one element was forwarded and none got a node's answer: the first failure's row. */
  readonly failure?: ErrorRow;
}

const NOTHING_FORWARDED: PlanOutcome = Object.freeze({ results: [] });

/**
 * The batch entry, after planBatch: forwards the plan's elements together (NetworkPool.callBatch spreads
 * them over upstreams and reassembles them in order), holding the tenant's slots while they run (one
 * per upstream exchange, see batchSlots), and settles their answers into the plan. A batch is never
 * answered from the cache. `text`: the client's body (or its UTF-8 bytes), given only when the parser
 * found it may go upstream as it is (ParseResult `verbatim`, forward/verbatim.ts).
 */
export async function forwardPlan(
  deps: ForwardDeps,
  pool: NetworkPool,
  flight: Flight,
  plan: BatchPlan,
  requestId: string,
  text?: string | Uint8Array,
  trace?: RequestTrace,
): Promise<PlanOutcome> {
  const forward = plan.forward;
  if (forward.length === 0) return NOTHING_FORWARDED;
  const flights = deps.flights;
  // Calls PoolCalls answers (filters, pending nonces, sends, own reads) are answered there, the others sent
  // together as any batch (forwardMixed); such a batch never goes verbatim.
  const pc = deps.poolCalls;
  const mixed = pc !== undefined && forward.some((c) => pc.handles(pool, c)) ? pc : undefined;
  // The client's text itself, when every element goes upstream in one exchange (a batch spread over
  // several upstreams is re-serialised per part, and so is one with calls handled on their own: old
  // state, a method family, a split eth_getLogs) and nothing in it needs a per-element look at the answer
  // (forward/verbatim.ts).
  const verbatim =
    mixed === undefined &&
    text !== undefined &&
    forward.length === plan.out.length &&
    pool.chunksFor(forward.length) === 1 &&
    verbatimEligible(forward) &&
    !pool.sendsApart(forward);
  const heavy = heavyCount(forward);
  const slots = verbatim ? 1 : batchSlots(pool, forward, mixed);
  const got = flights.acquireFor(flight, slots, heavy);
  if (got !== Acquired.Ok) {
    return { overCap: concurrencyRefusal(flight, got, heavy), results: [] };
  }
  if (verbatim && text !== undefined) {
    let r: Awaited<ReturnType<NetworkPool["callVerbatim"]>>;
    const span = trace?.child("upstream.batch", batchAttributes(pool, forward.length, true));
    try {
      r = await pool.callVerbatim(text, forward, span?.traceparent);
    } finally {
      flights.releaseFor(flight, slots, heavy);
    }
    span?.end(undefined, r.ok ? undefined : r.error.reason);
    if (r.ok) {
      plan.whole = r.value.body;
      for (let j = 0; j < forward.length; j++) plan.categories[plan.forwardIdx[j]!] = r.value.categories[j]!;
      return NOTHING_FORWARDED;
    }
    const failed: CallResult = { ok: false, error: r.error };
    const results = forward.map(() => failed);
    settleBatch(plan, results, requestId, undefined);
    return { results, failure: r.error };
  }
  let results: CallResult[];
  const span = trace?.child("upstream.batch", batchAttributes(pool, forward.length, false));
  try {
    results =
      mixed === undefined
        ? await pool.callBatch(forward, span?.traceparent)
        : await forwardMixed(mixed, pool, flight, forward, span?.traceparent);
    const fixing = resultsAtServedHead(forward, results, pool);
    if (fixing !== undefined) await fixing;
  } finally {
    flights.releaseFor(flight, slots, heavy);
  }
  span?.end(undefined, firstFailure(results)?.reason);
  const anyOk = settleBatch(plan, results, requestId, pool);
  return anyOk ? { results } : { results, failure: firstFailure(results) };
}

/**
 * Batch answers checked against the served head (served-head.ts), in place: an `eth_blockNumber` below it
 * replaced, `latest` blocks below it fetched again at it (together, in one batch). A promise only when
 * something has to be fetched.
 */
function resultsAtServedHead(
  calls: readonly RpcCall[],
  results: CallResult[],
  pool: NetworkPool,
): Promise<void> | undefined {
  let again: { j: number; call: RpcCall }[] | undefined;
  for (let j = 0; j < results.length; j++) {
    const r = results[j]!;
    if (!r.ok) continue;
    const fixed = atServedHead(calls[j]!, pool, r.reply);
    if (fixed === undefined) continue;
    if (isCall(fixed)) {
      again ??= [];
      again.push({ j, call: fixed });
    } else results[j] = { ok: true, reply: fixed };
  }
  if (again === undefined) return undefined;
  const todo = again;
  return pool.callBatch(todo.map((a) => a.call)).then((rs) => {
    for (let k = 0; k < rs.length; k++) {
      const r = rs[k]!;
      if (r.ok && r.reply.kind === ReplyKind.Result) results[todo[k]!.j] = r;
    }
  });
}

/**
 * A batch with calls PoolCalls answers (filters, pending nonces, sends, own reads): those answered there,
 * the others sent together as any batch, all at once; results in the order of `forward`.
 */
async function forwardMixed(
  pc: PoolCalls,
  pool: NetworkPool,
  flight: Flight,
  forward: readonly RpcCall[],
  traceparent: string | undefined,
): Promise<CallResult[]> {
  const results = new Array<CallResult>(forward.length);
  const restIdx: number[] = [];
  const rest: RpcCall[] = [];
  const own: Promise<void>[] = [];
  for (let j = 0; j < forward.length; j++) {
    const c = forward[j]!;
    if (pc.handles(pool, c)) {
      own.push(
        pc.answer(pool, flight.id, c).then((r) => {
          results[j] = r;
        }),
      );
    } else {
      restIdx.push(j);
      rest.push(c);
    }
  }
  const batch = rest.length === 0 ? Promise.resolve([]) : pool.callBatch(rest, traceparent);
  const [restResults] = await Promise.all([batch, ...own]);
  for (let k = 0; k < restIdx.length; k++) results[restIdx[k]!] = restResults[k]!;
  return results;
}

/** An upstream call's outcome on its span: the category, and the JSON-RPC error code of an error answer. */
function upstreamAttributes(r: CallResult): SpanAttributes {
  if (!r.ok) return { "gateway.category": r.error.category, ...jsonRpcError(r.error.code) };
  const code = r.reply.kind === ReplyKind.Error ? tailErrorCode(r.reply.tail) : undefined;
  const attributes: SpanAttributes = { "gateway.category": r.reply.category };
  return code === undefined ? attributes : { ...attributes, ...jsonRpcError(code) };
}

function batchAttributes(pool: NetworkPool, elements: number, verbatim: boolean): SpanAttributes {
  return {
    "rpc.system.name": "jsonrpc",
    "gateway.network": pool.record.slug,
    "gateway.batch.size": elements,
    "gateway.batch.verbatim": verbatim,
  };
}

function firstFailure(results: readonly CallResult[]): ErrorRow | undefined {
  for (const r of results) if (!r.ok) return r.error;
  return undefined;
}

/**
 * The in-flight slots a forwarded batch holds: one per upstream exchange it starts (NetworkPool.exchangesFor:
 * a chunk per upstream it is spread over, an exchange for the elements that need a particular upstream, one
 * per split eth_getLogs), plus one per element PoolCalls answers on its own (`mixed`). A node works
 * through one exchange's elements on one connection, so a batch of 100 sent in one exchange costs it one
 * connection, not 100: weighed as 100 single calls, 50 concurrent batches of 100 would need a cap of
 * 5,000. Failover and retries are not counted ahead (a single call's failover holds its one slot too).
 */
function batchSlots(pool: NetworkPool, forward: readonly RpcCall[], mixed: PoolCalls | undefined): number {
  if (mixed === undefined) return pool.exchangesFor(forward);
  const rest: RpcCall[] = [];
  let own = 0;
  for (const c of forward) {
    if (mixed.handles(pool, c)) own++;
    else rest.push(c);
  }
  return own + (rest.length === 0 ? 0 : pool.exchangesFor(rest));
}

/** Heavy calls among `calls` (eth_getLogs, debug_*, trace_*, ...), for the heavy cap: one slot each. */
function heavyCount(calls: readonly RpcCall[]): number {
  let heavy = 0;
  // A batch mostly repeats its methods: a run of one method is looked up once.
  let method: string | undefined;
  let is = false;
  for (let i = 0; i < calls.length; i++) {
    const m = calls[i]!.method;
    if (m !== method) {
      method = m;
      is = isHeavy(m);
    }
    if (is) heavy++;
  }
  return heavy;
}
