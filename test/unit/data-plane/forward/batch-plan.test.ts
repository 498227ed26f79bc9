import assert from "node:assert/strict";
import { batchJson, planBatch, settleBatch } from "../../../../data-plane/src/forward/batch-plan";
import { elementRefusal } from "../../../../data-plane/src/forward/refusals";
import { type MethodPolicy, reachRefusal } from "../../../../data-plane/src/policy/method-policy";
import type { BatchItem, RpcCall } from "../../../../data-plane/src/rpc/parse";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { blockDebug, call, ok, setup } from "./fakes";

describe("data-plane forward: batch plans", () => {
  it("plans a batch (invalid, refused, local, forwarded) and reassembles it in request order", () => {
    const { pool, asPool } = setup();
    const items: BatchItem[] = [
      call("eth_blockNumber", [], "1"),
      { error: GatewayError.InvalidRequest, idText: "2" } as BatchItem,
      call("debug_traceCall", [], "3"),
      call("eth_subscribe", ["newHeads"], "4"),
      call("eth_chainId", [], null),
      call("eth_getBalance", ["0xab", "latest"], '"six"'),
    ];
    const plan = planBatch(
      items,
      "req-1",
      (c) => elementRefusal(c, asPool, blockDebug),
      (c) => c.method === "eth_subscribe",
    );
    assert.deepEqual(plan.forwardIdx, [0, 4, 5]);
    assert.deepEqual(plan.localIdx, [3]);
    assert.equal(plan.categories[2], GatewayError.MethodBlocked.category);
    assert.match(plan.out[2]!, /^\{"jsonrpc":"2.0","id":3,"error":\{"code":-32601/);
    assert.match(plan.out[1]!, /"id":2,"error"/);
    const anyOk = settleBatch(
      plan,
      [ok(',"result":"0x200"}'), ok(',"result":"0x1"}'), { ok: false, error: GatewayError.UpstreamTimeout }],
      "req-1",
      asPool,
    );
    assert.equal(anyOk, true);
    assert.deepEqual(pool.observed, [0x200], "eth_blockNumber's answer feeds the head");
    assert.equal(plan.out[0], '{"jsonrpc":"2.0","id":1,"result":"0x200"}');
    assert.equal(plan.out[4], undefined, "a notification gets no answer");
    assert.equal(plan.categories[4], "Success");
    assert.match(plan.out[5]!, /^\{"jsonrpc":"2.0","id":"six","error":\{"code":/);
    assert.equal(plan.categories[5], GatewayError.UpstreamTimeout.category);
    plan.out[3] = '{"jsonrpc":"2.0","id":4,"result":"0xs"}';
    const body = JSON.parse(batchJson(plan.out)) as { id: unknown }[];
    assert.deepEqual(
      body.map((r) => r.id),
      [1, 2, 3, 4, "six"],
    );
    assert.equal(batchJson([undefined, undefined]), "");
  });

  it("planBatch: a run of one method takes one verdict, each element keeps its id; range-checked calls are each checked", () => {
    const { asPool } = setup();
    let asked = 0;
    const refuse = (c: RpcCall) => {
      asked++;
      return elementRefusal(c, asPool, blockDebug);
    };
    const items: BatchItem[] = [
      call("debug_traceCall", [], "1"),
      call("debug_traceCall", [], "2"),
      call("debug_traceCall", [], null),
      call("eth_chainId", [], "4"),
      call("eth_chainId", [], "5"),
      call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x10" }], "6"),
      call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x2710" }], "7"),
      call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x11" }], "8"),
      call("debug_traceCall", [], "9"),
    ];
    const plan = planBatch(items, "req", refuse);
    // Once per run of debug_traceCall / eth_chainId, once per eth_getLogs (its range is in its params).
    assert.equal(asked, 1 + 1 + 3 + 1);
    assert.deepEqual(plan.forwardIdx, [3, 4, 5, 7]);
    for (const i of [0, 1, 8])
      assert.match(plan.out[i]!, new RegExp(`^\\{"jsonrpc":"2.0","id":${i + 1},"error"`));
    assert.equal(plan.out[2], undefined, "a refused notification gets no answer");
    assert.equal(plan.categories[2], GatewayError.MethodBlocked.category);
    assert.equal(plan.categories[6], GatewayError.LogsRangeTooLarge.category);
    assert.match(plan.out[6]!, /"id":7,"error"/);
  });

  it("planBatch: a plain anvil_reset does not lend its verdict to a forking one after it (params decide)", () => {
    const { asPool } = setup();
    const nodePolicy: MethodPolicy = {
      check: (method, _n, params) => {
        const why = reachRefusal(method, params);
        return why === undefined ? undefined : why;
      },
    };
    const fork = [{ forking: { jsonRpcUrl: "http://127.0.0.1:1/" } }];
    const items: BatchItem[] = [
      call("anvil_reset", [], "1"),
      call("anvil_reset", fork, "2"),
      call("anvil_reset", [], "3"),
      call("hardhat_reset", fork, "4"),
    ];
    const plan = planBatch(items, "req", (c) => elementRefusal(c, asPool, nodePolicy));
    assert.deepEqual(plan.forwardIdx, [0, 2]);
    assert.match(plan.out[1]!, /"id":2,"error".*fork URL/);
    assert.match(plan.out[3]!, /"id":4,"error".*fork URL/);
  });
});
