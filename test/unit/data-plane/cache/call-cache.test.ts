import assert from "node:assert/strict";
import {
  cacheKey,
  fetchCall,
  lookup,
  paramsFromKey,
  store,
} from "../../../../data-plane/src/cache/call-cache";
import { ReplyKind } from "../../../../data-plane/src/upstream/reply";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { call, ok, setup } from "../forward/fakes";

describe("data-plane cache: the call cache (key, lookup, in-flight merge, store)", () => {
  it("cache keys: permanent vs per head, none when the head is unknown, caching off or the method never cached", () => {
    const { pool, asPool, deps } = setup();
    assert.equal(cacheKey(deps, call("eth_chainId", []), asPool), "eth\u0000p\u0000eth_chainId\u0000[]");
    assert.equal(cacheKey(deps, call("eth_blockNumber"), asPool), "eth\u0000100\u0000eth_blockNumber\u0000");
    const k = cacheKey(deps, call("eth_getBalance", ["0xab", "latest"]), asPool);
    assert.equal(k, 'eth\u0000100\u0000eth_getBalance\u0000["0xab","latest"]');
    assert.equal(paramsFromKey(k, "eth", "eth_getBalance"), '["0xab","latest"]');
    assert.equal(cacheKey(deps, call("eth_sendRawTransaction", ["0x00"]), asPool), "");
    pool.head = -1;
    assert.equal(cacheKey(deps, call("eth_blockNumber"), asPool), "");
    assert.equal(cacheKey(deps, call("eth_chainId", []), asPool), "eth\u0000p\u0000eth_chainId\u0000[]");
    const off = setup(false);
    assert.equal(cacheKey(off.deps, call("eth_chainId", []), off.asPool), "");
  });

  it("a miss goes upstream once for concurrent identical calls, is stored, and the next lookup hits", async () => {
    const { pool, asPool, deps, metrics } = setup();
    const c = call("eth_getBalance", ["0xab", "latest"]);
    const key = cacheKey(deps, c, asPool);
    assert.equal(lookup(deps, asPool, key), undefined);
    const [a, b] = await Promise.all([
      fetchCall(c, asPool, key, deps.cache),
      fetchCall(c, asPool, key, deps.cache),
    ]);
    assert.equal(pool.calls.length, 1, "in-flight merge: one upstream call");
    assert.equal(pool.calls[0]!.paramsJson, '["0xab","latest"]', "params passed on, not serialised twice");
    assert.deepEqual(a, b);
    store(deps, asPool, key, a);
    assert.equal(lookup(deps, asPool, key)?.tail, ',"result":"0x1"}');
    assert.deepEqual(metrics.seen, [false, true]);
  });

  it("stores only real results (not nulls, node errors or failures); no key = no merge", async () => {
    const { pool, asPool, deps } = setup();
    const c = call("eth_getBalance", ["0xab", "latest"]);
    const key = cacheKey(deps, c, asPool);
    store(deps, asPool, key, ok(',"result":null}', ReplyKind.NullResult));
    store(deps, asPool, key, ok(',"error":{"code":-32000,"message":"x"}}', ReplyKind.Error));
    store(deps, asPool, key, { ok: false, error: GatewayError.UpstreamTimeout });
    assert.equal(deps.cache.get(key), undefined);
    await Promise.all([fetchCall(c, asPool, "", deps.cache), fetchCall(c, asPool, "", deps.cache)]);
    assert.equal(pool.calls.length, 2);
    assert.equal(pool.calls[0]!.paramsJson, undefined);
  });
});
