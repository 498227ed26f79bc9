import assert from "node:assert/strict";
import {
  cacheKey,
  dropReorged,
  lookup,
  paramsFromKey,
  store,
} from "../../../../data-plane/src/cache/call-cache";
import { LruResponseCache } from "../../../../data-plane/src/cache/response-cache";
import { type ForwardDeps } from "../../../../data-plane/src/forward/forward";
import { ConcurrencyLimiter } from "../../../../data-plane/src/limits/concurrency";
import { NoopMetrics } from "../../../../data-plane/src/metrics/metrics";
import type { RpcCall } from "../../../../data-plane/src/rpc/parse";
import type { NetworkPool } from "../../../../data-plane/src/upstream/network-pool";
import { type CallResult, ReplyKind } from "../../../../data-plane/src/upstream/reply";
import type { NetworkRecord } from "../../../../shared/src/redis/records";

/** The pool reads of the cache key: `record`, `cacheHead`, `finalizedHead`. */
class FakePool {
  head = 1000;
  finalized = 900;
  constructor(readonly record: NetworkRecord) {}
  cacheHead(): number {
    return this.head;
  }
  finalizedHead(): number {
    return this.finalized;
  }
}

const call = (method: string, params?: unknown): RpcCall => ({ method, params, idText: "1" }) as RpcCall;
const result = (tail: string, kind: ReplyKind = ReplyKind.Result): CallResult => ({
  ok: true,
  reply: { tail, kind, category: "Success" },
});

function setup(ttlMs = 60_000) {
  const pool = new FakePool({ slug: "eth" } as unknown as NetworkRecord);
  const deps: ForwardDeps = {
    cache: new LruResponseCache(1 << 20, "first"),
    metrics: new NoopMetrics(),
    flights: new ConcurrencyLimiter(4, 1),
    config: { CACHE_PER_BLOCK_TTL_MS: ttlMs },
  };
  return { pool, deps, asPool: pool as unknown as NetworkPool };
}

describe("data-plane: finality-aware cache keys", () => {
  it("a block at or below the finalized head gets the `f` tag; above it, the head; tags stay per-head", () => {
    const { pool, deps, asPool } = setup();
    const at = (hex: string) => cacheKey(deps, call("eth_getBlockByNumber", [hex, false]), asPool);
    assert.equal(at("0x384"), 'eth\u0000f\u0000eth_getBlockByNumber\u0000["0x384",false]'); // 900
    assert.equal(at("0x10"), 'eth\u0000f\u0000eth_getBlockByNumber\u0000["0x10",false]');
    assert.equal(at("0x385"), 'eth\u00001000\u0000eth_getBlockByNumber\u0000["0x385",false]'); // 901
    assert.equal(
      cacheKey(deps, call("eth_getBlockByNumber", ["latest", false]), asPool),
      'eth\u00001000\u0000eth_getBlockByNumber\u0000["latest",false]',
    );
    assert.equal(
      cacheKey(deps, call("eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x384" }]), asPool),
      'eth\u0000f\u0000eth_getLogs\u0000[{"fromBlock":"0x1","toBlock":"0x384"}]',
    );
    assert.equal(
      cacheKey(deps, call("eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x385" }]), asPool),
      'eth\u00001000\u0000eth_getLogs\u0000[{"fromBlock":"0x1","toBlock":"0x385"}]',
    );
    const f = at("0x100");
    assert.equal(paramsFromKey(f, "eth", "eth_getBlockByNumber"), '["0x100",false]');
    // The finalized key does not depend on the head, so it survives head changes.
    pool.head = 5000;
    assert.equal(at("0x100"), f);
    // Unknown finalized head (node without the tag, watch off): per block, as without the feature.
    pool.finalized = -1;
    assert.equal(at("0x100"), 'eth\u00005000\u0000eth_getBlockByNumber\u0000["0x100",false]');
    // A finalized block needs no head to be keyed; an unknown head still means no per-block key.
    pool.finalized = 900;
    pool.head = -1;
    assert.equal(at("0x100"), f);
    assert.equal(at("0x385"), "");
    // Pending is never cached, finalized or not.
    assert.equal(cacheKey(deps, call("eth_getBalance", ["0xab", "pending"]), asPool), "");
  });

  it("finalized answers are stored with no TTL; per-block ones with CACHE_PER_BLOCK_TTL_MS; nulls never", async () => {
    const { deps, asPool } = setup(30);
    const fin = cacheKey(deps, call("eth_getBlockByNumber", ["0x100", false]), asPool);
    const per = cacheKey(deps, call("eth_getBlockByNumber", ["0x385", false]), asPool);
    const nul = cacheKey(deps, call("eth_getBlockByNumber", ["0x101", false]), asPool);
    store(deps, asPool, fin, result(',"result":{"number":"0x100"}}'));
    store(deps, asPool, per, result(',"result":{"number":"0x385"}}'));
    store(deps, asPool, nul, result(',"result":null}', ReplyKind.NullResult));
    assert.ok(lookup(deps, asPool, fin));
    assert.ok(lookup(deps, asPool, per));
    assert.equal(
      lookup(deps, asPool, nul),
      undefined,
      "a node without the block yet must not poison the cache",
    );
    await new Promise((r) => setTimeout(r, 60));
    // A set() runs the expiry sweep (as a later store on the miss path does).
    store(deps, asPool, "eth\u0000p\u0000eth_chainId\u0000[]", result(',"result":"0x1"}'));
    assert.ok(lookup(deps, asPool, fin), "finalized entry outlives the per-block TTL");
    assert.equal(lookup(deps, asPool, per), undefined);
  });

  it("dropReorged drops this network's per-block entries keyed at or above the height, nothing else", () => {
    const { deps } = setup();
    const cache = deps.cache as LruResponseCache;
    const keys = {
      below: "eth\u000098\u0000eth_blockNumber\u0000",
      at: "eth\u000099\u0000eth_blockNumber\u0000",
      above: 'eth\u0000100\u0000eth_getBlockByNumber\u0000["0x64",false]',
      finalized: 'eth\u0000f\u0000eth_getBlockByNumber\u0000["0x10",false]',
      permanent: "eth\u0000p\u0000eth_chainId\u0000[]",
      otherNetwork: "eth2\u0000100\u0000eth_blockNumber\u0000",
      prefixNetwork: "et\u0000100\u0000eth_blockNumber\u0000",
    };
    for (const [name, key] of Object.entries(keys)) {
      const perBlock = name !== "finalized" && name !== "permanent";
      const reply = { tail: `,"result":"${name}"}`, kind: ReplyKind.Result, category: "Success" };
      cache.set(key, reply, perBlock ? 60_000 : undefined);
    }
    assert.equal(dropReorged(cache, "eth", 99), 2);
    assert.ok(cache.get(keys.below));
    assert.equal(cache.get(keys.at), undefined);
    assert.equal(cache.get(keys.above), undefined);
    assert.ok(cache.get(keys.finalized));
    assert.ok(cache.get(keys.permanent));
    assert.ok(cache.get(keys.otherNetwork));
    assert.ok(cache.get(keys.prefixNetwork));
    assert.equal(dropReorged(cache, "eth", 99), 0, "already gone");
  });
});
