import assert from "node:assert/strict";
import { atServedHead, servedHeadReply } from "../../../../data-plane/src/forward/served-head";
import type { RpcCall } from "../../../../data-plane/src/rpc/parse";
import type { NetworkPool } from "../../../../data-plane/src/upstream/network-pool";
import { ReplyKind } from "../../../../data-plane/src/upstream/reply";

/** The two things served-head.ts reads of a pool. */
function pool(head: number, protocol: "EVM" | "SUBSTRATE" = "EVM"): NetworkPool {
  return { record: { protocol }, servedHead: () => head } as unknown as NetworkPool;
}

const call = (method: string, params?: unknown): RpcCall => ({ method, params, idText: "1" });

describe("data plane: the served head (forward/served-head.ts)", () => {
  it("answers eth_blockNumber from the served head on EVM networks, once it is known", () => {
    const r = servedHeadReply(call("eth_blockNumber", []), pool(0x1234));
    assert.deepEqual(r, { tail: ',"result":"0x1234"}', kind: ReplyKind.Result, category: "Success" });
    assert.equal(servedHeadReply(call("eth_blockNumber"), pool(-1)), undefined, "unknown: forwarded");
    assert.equal(servedHeadReply(call("eth_blockNumber"), pool(5, "SUBSTRATE")), undefined);
    assert.equal(servedHeadReply(call("eth_chainId"), pool(5)), undefined);
  });

  it("pins eth_getBlockByNumber(latest) to the served head's number; anything else is left as it is", () => {
    const latest = call("eth_getBlockByNumber", ["latest", true]);
    const pinned = atServedHead(latest, pool(255));
    assert.deepEqual(pinned.params, ["0xff", true]);
    assert.equal(pinned.idText, "1");
    assert.deepEqual(latest.params, ["latest", true], "the client's call is not changed");
    for (const c of [
      call("eth_getBlockByNumber", ["0x5", false]),
      call("eth_getBlockByNumber", ["pending", false]),
      call("eth_getBlockByNumber", ["finalized", false]),
      call("eth_getBlockByNumber", {}),
      call("eth_getBalance", ["0x01", "latest"]),
    ])
      assert.equal(atServedHead(c, pool(255)), c);
    assert.equal(atServedHead(latest, pool(-1)), latest);
    assert.equal(atServedHead(latest, pool(9, "SUBSTRATE")), latest);
  });
});
