import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { maxLogsBlockRange } from "../../../shared/src/redis/records";
import type { MethodRules } from "../access/access-rules";
import { CacheRule, cacheRule, finalizableBlock, headHint } from "../cache/policy";
import type { ResponseCache } from "../cache/response-cache";
import {
  Acquired,
  type ConcurrencyLimiter,
  concurrencyRefusalMessage,
  type Flight,
} from "../limits/concurrency";
import { checkedFilterParams, checkLogsRange, hasLogsRange } from "../limits/logs-range";
import type { Metrics } from "../metrics/metrics";
import { type MethodPolicy, readsParams } from "../policy/method-policy";
import { type BatchItem, isItemError, type RpcCall } from "../rpc/parse";
import { errorJson, replyJson } from "../rpc/response-json";
import {
  type ChildSpan,
  jsonRpcError,
  type RequestTrace,
  type SpanAttributes,
  tailErrorCode,
} from "../telemetry/tracing";
import { isHeavy, type NetworkPool, type OutgoingCall } from "../upstream/network-pool";
import { type CallResult, type Reply, ReplyKind } from "../upstream/reply";
import type { PoolCalls } from "./pool-calls";
import { atServedHead, isCall } from "./served-head";
import { verbatimEligible } from "./verbatim";

/**
 * The forwarding core: what happens to a parsed call or batch between a transport (HTTP exchange,
 * WebSocket session, dedicated-node endpoint) and the upstream nodes. Transports keep what is theirs
 * (admission, status codes, framing, when to answer, usage records); everything per request object is
 * here, once: method policy and eth_getLogs range, cache rule and key, cache lookup / in-flight merge /
 * store, concurrency slots, batch planning (which elements go upstream) and reassembly (answer texts and
 * dashboard categories in request order), head observation.
 *
 * The two entries every transport uses, as eRPC's Network.Forward: `forwardCall` for a single call and
 * `planBatch` + `forwardPlan` for a batch. A shared network and a dedicated node are both a NetworkPool
 * (a node's has one upstream), so routing, hedging, log splitting and caching apply to both alike.
 *
 * Plain functions over the caller's objects, not a per-request object: the cache-hit path (refusal →
 * cacheKey → lookup) allocates only the cache key string and the outcome.
 */

/** What the core needs from the gateway (a subset of GatewayContext, so tests can pass their own). */
export interface ForwardDeps {
  readonly cache: ResponseCache;
  readonly metrics: Metrics;
  readonly flights: ConcurrencyLimiter;
  readonly config: { readonly CACHE_PER_BLOCK_TTL_MS: number };
  /**
   * Calls answered from the pool as a whole rather than by one node (filters, pending nonces, broadcast
   * sends, reading one's own write: forward/pool-calls.ts); absent = every call goes to one node (a
   * dedicated node's endpoint, which is one node).
   */
  readonly poolCalls?: PoolCalls;
}

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
  observe(pool, call.method, result);
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

/** Answers every forwarded element of a plan with a concurrency refusal (a transport that answers per element). */
export function refuseForwarded(plan: BatchPlan, r: ConcurrencyRefusal, requestId: string): void {
  const forward = plan.forward;
  for (let j = 0; j < forward.length; j++) {
    const idText = forward[j]!.idText;
    const text = idText === undefined ? undefined : errorJson(r.row, idText, { requestId, ...r });
    setElement(plan, plan.forwardIdx[j]!, text, r.row.category);
  }
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

/** A refused element's error response text (the client's id, the row, `data.requestId` and extras). */
export function refusalJson(r: ElementRefusal, idText: string, requestId: string): string {
  return errorJson(r.row, idText, { requestId, limit: r.limit, message: r.message });
}

/**
 * The cache key of a single call on this pool now, "" when it must not be cached: caching off, a
 * method the cache rules never keep, or a per-block answer while the head is unknown. Layout
 * `{slug}\0{tag}\0{method}\0{params JSON}` (paramsFromKey reads the params back), the tag being:
 * - `p`: permanent by method (chain id, data addressed by hash);
 * - `f`: a per-block method about a block given by number at or below the pool's finalized head
 *   (finalizableBlock, NetworkPool.finalizedHead): final, so permanent, whatever the head does later;
 * - the head height (decimal): per block, valid while the pool's cacheHead is that height.
 */
export function cacheKey(deps: ForwardDeps, call: RpcCall, pool: NetworkPool): string {
  const cache = deps.cache;
  if (!cache.enabled) return "";
  const rule = cacheRule(call.method, call.params);
  if (rule === CacheRule.Never) return "";
  let tag: number | string = "p";
  if (rule === CacheRule.PerBlock) {
    const finalized = pool.finalizedHead();
    const n = finalized >= 0 ? finalizableBlock(call.method, call.params) : -1;
    if (n >= 0 && n <= finalized) {
      tag = "f";
    } else {
      const head = pool.cacheHead();
      if (head < 0) return "";
      tag = head;
    }
  }
  return `${pool.record.slug}\u0000${tag}\u0000${call.method}\u0000${paramsText(call.params)}`;
}

/** The params JSON inside a cache key made by cacheKey for `method` on network `slug`. */
export function paramsFromKey(key: string, slug: string, method: string): string {
  const tagEnd = key.indexOf("\u0000", slug.length + 1);
  return key.slice(tagEnd + 2 + method.length);
}

/** Whether a cache key holds a per-block answer (its tag is a head height, not "p" or "f"). */
function perBlock(key: string, slug: string): boolean {
  const c = key.charCodeAt(slug.length + 1);
  return c >= 48 && c <= 57; // a decimal digit
}

/**
 * After a reorg on network `slug` (NetworkPool's chain watch): drops its per-block entries keyed to a
 * head at or above `fromHeight`, the only per-block entries a lookup can reach again (lookups use the
 * current head, and the head is now below or at `fromHeight`). Permanent (`p`) and finalized (`f`) entries
 * stay: finality means no reorg there. Returns how many entries were dropped.
 */
export function dropReorged(cache: ResponseCache, slug: string, fromHeight: number): number {
  const start = slug.length + 1;
  return cache.dropTimed((key) => {
    if (key.length <= start || key.charCodeAt(slug.length) !== 0 || !key.startsWith(slug)) return false;
    let head = 0;
    let i = start;
    for (; i < key.length; i++) {
      const c = key.charCodeAt(i);
      if (c === 0) break;
      if (c < 48 || c > 57) return false; // "p" / "f": not per-block
      head = head * 10 + (c - 48);
    }
    return i > start && head >= fromHeight;
  });
}

/** The cached reply under `key` (counted as a hit or a miss in the cache metrics). */
export function lookup(deps: ForwardDeps, pool: NetworkPool, key: string): Reply | undefined {
  const hit = deps.cache.get(key);
  deps.metrics.cache(pool.record.slug, hit !== undefined);
  return hit;
}

/**
 * Sends a single call upstream: through the in-flight merge when it has a cache key (concurrent
 * identical calls share one upstream call), straight to the pool otherwise. The caller stores the
 * result with `store` once it has it (no extra promise here).
 */
export function fetchCall(
  call: OutgoingCall,
  pool: NetworkPool,
  key: string,
  cache: ResponseCache,
): Promise<CallResult> {
  if (key === "") return pool.call(call);
  const params = paramsFromKey(key, pool.record.slug, call.method);
  return cache.merge(key, () => pool.call(call, params), call.span?.traceparent);
}

/**
 * Keeps a single call's answer under its key: only real results (never errors or nulls: a node that has
 * not got the block yet answers null, which must not be kept, least of all under a finalized key),
 * per-block ones for CACHE_PER_BLOCK_TTL_MS, permanent and finalized ones until evicted.
 */
export function store(deps: ForwardDeps, pool: NetworkPool, key: string, r: CallResult): void {
  if (key === "" || !r.ok || r.reply.kind !== ReplyKind.Result) return;
  const ttl = perBlock(key, pool.record.slug) ? deps.config.CACHE_PER_BLOCK_TTL_MS : undefined;
  deps.cache.set(key, r.reply, ttl);
}

/** Feeds a result's head hint (eth_blockNumber, receipts, blocks) to the pool's head tracking. */
function observe(pool: NetworkPool, method: string, r: CallResult): void {
  if (!r.ok || r.reply.kind !== ReplyKind.Result) return;
  const n = headHint(method, r.reply.tail);
  if (n !== undefined) pool.observeHead(n);
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

/** One forwarded element's answer text (undefined for a notification) and dashboard category. */
export function resultJson(idText: string | undefined, r: CallResult, requestId: string): string | undefined {
  if (idText === undefined) return undefined;
  return r.ok ? replyJson(idText, r.reply.tail) : errorJson(r.error, idText, { requestId });
}

/** The dashboard category of a forwarded element's result. */
export function resultCategory(r: CallResult): string {
  return r.ok ? r.reply.category : r.error.category;
}

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
    if (pool !== undefined) observe(pool, call.method, r);
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

/** Params as JSON text for cache keys and forwarding ("" when absent); `[]` (common: eth_chainId) without a stringify. */
export function paramsText(params: unknown): string {
  if (params === undefined) return "";
  if (Array.isArray(params) && params.length === 0) return "[]";
  return JSON.stringify(params);
}
