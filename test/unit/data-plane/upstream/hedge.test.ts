import assert from "node:assert/strict";
import { HEDGE_BURST, HedgeBudget, hedgeable, hedgeDelayMs } from "../../../../data-plane/src/upstream/hedge";
import { isHeavy } from "../../../../data-plane/src/upstream/network-pool";

const opts = { enabled: true, minDelayMs: 20, maxDelayMs: 1000, maxPercent: 10 };

describe("data plane: hedged reads (which calls, when, how many)", () => {
  it("never hedges sends, filters, node-local state or unknown methods; hedges plain reads", () => {
    for (const m of [
      "eth_sendRawTransaction",
      "eth_sendTransaction",
      "author_submitExtrinsic",
      "author_submitAndWatchExtrinsic",
      "eth_newFilter",
      "eth_getFilterChanges",
      "eth_getFilterLogs",
      "eth_subscribe",
      "txpool_content",
      "personal_sign",
      "eth_sign",
      "some_unknownMethod",
    ]) {
      assert.equal(hedgeable(m), false, m);
    }
    for (const m of [
      "eth_call",
      "eth_getBalance",
      "eth_blockNumber",
      "eth_getTransactionReceipt",
      "state_call",
    ]) {
      assert.equal(hedgeable(m), true, m);
    }
  });

  it("never hedges heavy calls (their time is the call's, not the node's)", () => {
    for (const m of [
      "eth_getLogs",
      "debug_traceTransaction",
      "trace_block",
      "state_getKeysPaged",
      "state_getPairs",
    ]) {
      assert.ok(isHeavy(m), m);
      assert.equal(hedgeable(m), false, m);
    }
  });

  it("waits the best healthy node's p95, within the floor and ceiling", () => {
    assert.equal(hedgeDelayMs(-1, opts), 1000, "nothing known yet: the ceiling");
    assert.equal(hedgeDelayMs(3, opts), 20, "the floor");
    assert.equal(hedgeDelayMs(87.2, opts), 88);
    assert.equal(hedgeDelayMs(5000, opts), 1000, "the ceiling");
  });

  it("caps hedges at maxPercent of exchanges after a burst of HEDGE_BURST", () => {
    const b = new HedgeBudget(10);
    let hedges = 0;
    for (let i = 0; i < 1000; i++) {
      b.earn();
      if (b.take()) hedges++;
    }
    // The burst, then one per 10 exchanges (within float rounding of the earned fractions).
    assert.ok(hedges >= HEDGE_BURST + 99 && hedges <= HEDGE_BURST + 100, `hedges ${hedges}`);
    const none = new HedgeBudget(0);
    let n = 0;
    for (let i = 0; i < 100; i++) {
      none.earn();
      if (none.take()) n++;
    }
    assert.equal(n, 0, "0%: no hedges at all, not even a burst");
  });
});
