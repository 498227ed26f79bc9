import type { Metrics } from "../metrics/metrics";
import type { RpcCall } from "../rpc/parse";
import type { NetworkPool, OutgoingCall } from "../upstream/network-pool";
import { type CallResult, type Reply, ReplyKind } from "../upstream/reply";
import { CacheRule, cacheRule, finalizableBlock } from "./policy";
import type { ResponseCache } from "./response-cache";

/*
 * The response cache as single calls use it (the forwarding core, for every transport), with one
 * cache-key function as MetaMask's eth-json-rpc-middleware has: the key of a call on a pool now, the
 * lookup, the in-flight merge of identical calls, what is kept and for how long, and what a reorg drops.
 */

/** What the call cache needs from the gateway (part of the forwarding core's ForwardDeps). */
export interface CachingDeps {
  readonly cache: ResponseCache;
  readonly metrics: Metrics;
  readonly config: { readonly CACHE_PER_BLOCK_TTL_MS: number };
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
export function cacheKey(deps: CachingDeps, call: RpcCall, pool: NetworkPool): string {
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
export function lookup(deps: CachingDeps, pool: NetworkPool, key: string): Reply | undefined {
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
export function store(deps: CachingDeps, pool: NetworkPool, key: string, r: CallResult): void {
  if (key === "" || !r.ok || r.reply.kind !== ReplyKind.Result) return;
  const ttl = perBlock(key, pool.record.slug) ? deps.config.CACHE_PER_BLOCK_TTL_MS : undefined;
  deps.cache.set(key, r.reply, ttl);
}

/** Params as JSON text for cache keys and forwarding ("" when absent); `[]` (common: eth_chainId) without a stringify. */
export function paramsText(params: unknown): string {
  if (params === undefined) return "";
  if (Array.isArray(params) && params.length === 0) return "[]";
  return JSON.stringify(params);
}
