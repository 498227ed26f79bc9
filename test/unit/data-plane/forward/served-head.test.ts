import assert from "node:assert/strict";
import { atServedHead, isCall } from "../../../../data-plane/src/forward/served-head";
import type { RpcCall } from "../../../../data-plane/src/rpc/parse";
import type { NetworkPool } from "../../../../data-plane/src/upstream/network-pool";
import { type Reply, ReplyKind } from "../../../../data-plane/src/upstream/reply";

/** What served-head.ts uses of a pool: its record, observeHead and a never-decreasing servedHead. */
function pool(served: number, protocol: "EVM" | "SUBSTRATE" = "EVM") {
  const seen: number[] = [];
  let head = served;
  const p = {
    record: { protocol },
    // As NetworkPool.observeHead: a head more than 64 above is not believed.
    observeHead: (n: number) => {
      seen.push(n);
      if (n > head && n <= head + 64) head = n;
    },
    servedHead: () => head,
  };
  return { pool: p as unknown as NetworkPool, seen };
}

const call = (method: string, params?: unknown): RpcCall => ({ method, params, idText: "1" });
const result = (tail: string): Reply => ({ tail, kind: ReplyKind.Result, category: "Success" });
const blockNumber = (n: number) => result(`,"result":"0x${n.toString(16)}"}`);
const block = (n: number) =>
  result(`,"result":{"hash":"0xab","number":"0x${n.toString(16)}","transactions":[]}}`);

describe("data plane: the served head (forward/served-head.ts)", () => {
  it("eth_blockNumber: an answer below the served head is answered with it; one at or above it stands and raises it", () => {
    const { pool: p, seen } = pool(0x100);
    const fixed = atServedHead(call("eth_blockNumber", []), p, blockNumber(0xfe));
    assert.ok(fixed !== undefined && !isCall(fixed));
    assert.equal(fixed.tail, ',"result":"0x100"}');
    assert.equal(atServedHead(call("eth_blockNumber"), p, blockNumber(0x100)), undefined);
    assert.equal(
      atServedHead(call("eth_blockNumber"), p, blockNumber(0x105)),
      undefined,
      "a node ahead: served at once",
    );
    assert.equal(p.servedHead(), 0x105);
    const liar = atServedHead(call("eth_blockNumber"), p, blockNumber(1_000_000_000));
    assert.ok(liar !== undefined && !isCall(liar));
    assert.equal(liar.tail, ',"result":"0x105"}', "a head the pool does not believe is not served");
    assert.deepEqual(seen, [0xfe, 0x100, 0x105, 1_000_000_000]);
  });

  it("a latest block below the served head is fetched again at it; other blocks and calls stand", () => {
    const { pool: p } = pool(255);
    const latest = call("eth_getBlockByNumber", ["latest", true]);
    const again = atServedHead(latest, p, block(250));
    assert.ok(again !== undefined && isCall(again));
    assert.deepEqual(again.params, ["0xff", true]);
    assert.equal(again.idText, "1");
    assert.deepEqual(latest.params, ["latest", true], "the client's call is not changed");
    assert.equal(atServedHead(latest, p, block(255)), undefined);
    for (const c of [
      call("eth_getBlockByNumber", ["0x5", false]),
      call("eth_getBlockByNumber", ["pending", false]),
      call("eth_getBalance", ["0x01", "latest"]),
    ])
      assert.equal(atServedHead(c, p, block(1)), undefined, c.method);
    assert.equal(atServedHead(latest, p, result(',"result":null}')), undefined, "no block: stands");
    assert.equal(atServedHead(latest, pool(255, "SUBSTRATE").pool, block(1)), undefined);
  });
});
