import assert from "node:assert/strict";
import {
  canonicalJson,
  FAMILY_UNSUBSCRIBE,
  isSubscriptionMethod,
  newSubscriptionId,
  normaliseParams,
  SUBSCRIBE,
  UNSUBSCRIBE,
} from "../../../../data-plane/src/ws/methods";

describe("ws subscription methods", () => {
  it("canonical JSON sorts object keys at every depth and drops undefined members", () => {
    assert.equal(
      canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: undefined } }),
      '{"a":{"d":[1,{"y":2,"z":1}]},"b":1}',
    );
    assert.equal(
      canonicalJson(["logs", { topics: ["0x1"], address: "0xa" }]),
      canonicalJson(["logs", { address: "0xa", topics: ["0x1"] }]),
    );
    assert.equal(canonicalJson(undefined), "null");
  });

  it("normalises logs filter hex case so equivalent filters merge", () => {
    const a = normaliseParams("eth_subscribe", ["logs", { address: "0xABC", topics: [["0xDEF"], null] }]);
    assert.deepEqual(a, ["logs", { address: "0xabc", topics: [["0xdef"], null] }]);
    assert.deepEqual(normaliseParams("eth_subscribe", ["newHeads"]), ["newHeads"]);
    assert.deepEqual(normaliseParams("state_subscribeStorage", [["0xAB"]]), [["0xAB"]]);
  });

  it("subscription ids: EVM 0x + 16 random bytes, Substrate strings, unique", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const e = newSubscriptionId(true);
      assert.match(e, /^0x[0-9a-f]{32}$/);
      const s = newSubscriptionId(false);
      assert.match(s, /^[A-Za-z0-9_-]{22}$/);
      seen.add(e);
      seen.add(s);
    }
    assert.equal(seen.size, 4000);
  });

  it("every subscribe family has an upstream unsubscribe method and its client-side aliases", () => {
    for (const spec of SUBSCRIBE.values()) assert.ok(FAMILY_UNSUBSCRIBE[spec.family], spec.family);
    for (const family of UNSUBSCRIBE.values()) assert.ok(FAMILY_UNSUBSCRIBE[family], family);
    assert.equal(SUBSCRIBE.get("author_submitAndWatchExtrinsic")?.merged, false);
    assert.equal(SUBSCRIBE.get("chain_subscribeNewHeads")?.replayLast, true);
    assert.equal(SUBSCRIBE.get("eth_subscribe")?.replayLast, false);
    assert.ok(isSubscriptionMethod("chain_unsubscribeNewHead"));
    assert.ok(!isSubscriptionMethod("eth_blockNumber"));
  });
});
