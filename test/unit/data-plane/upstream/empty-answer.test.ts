import assert from "node:assert/strict";
import { BY_HASH, emptyAnswerAsk, NOT_RETRIED } from "../../../../data-plane/src/upstream/empty-answer";

const HASH = `0x${"ab".repeat(32)}`;

describe("data plane: which null answers may be a lagging node's", () => {
  it("block lookups by number ask for that block; by hash (blocks, transactions, receipts) BY_HASH", () => {
    assert.equal(emptyAnswerAsk("eth_getBlockByNumber", ["0x10", false]), 16);
    assert.equal(emptyAnswerAsk("eth_getBlockByNumber", ["earliest", false]), 0);
    assert.equal(emptyAnswerAsk("eth_getBlockByHash", [HASH, false]), BY_HASH);
    assert.equal(emptyAnswerAsk("eth_getTransactionByHash", [HASH]), BY_HASH);
    assert.equal(emptyAnswerAsk("eth_getTransactionReceipt", [HASH]), BY_HASH);
    assert.equal(emptyAnswerAsk("eth_getBlockReceipts", ["0x20"]), 32);
    assert.equal(emptyAnswerAsk("eth_getBlockReceipts", [HASH]), BY_HASH);
    assert.equal(emptyAnswerAsk("eth_getBlockReceipts", [{ blockHash: HASH }]), BY_HASH);
    assert.equal(emptyAnswerAsk("eth_getBlockReceipts", [{ blockNumber: "0x21" }]), 33);
    assert.equal(emptyAnswerAsk("eth_getTransactionByBlockNumberAndIndex", ["0x5", "0x0"]), 5);
    assert.equal(emptyAnswerAsk("eth_getTransactionByBlockHashAndIndex", [HASH, "0x0"]), BY_HASH);
    assert.equal(emptyAnswerAsk("eth_getBlockTransactionCountByNumber", ["0x7"]), 7);
    assert.equal(emptyAnswerAsk("chain_getBlockHash", [42]), 42);
    assert.equal(emptyAnswerAsk("chain_getBlock", [HASH]), BY_HASH);
    assert.equal(emptyAnswerAsk("chain_getHeader", [HASH]), BY_HASH);
  });

  it("tags, absent arguments and other methods: a null is final", () => {
    for (const tag of ["latest", "pending", "safe", "finalized"]) {
      assert.equal(emptyAnswerAsk("eth_getBlockByNumber", [tag, false]), NOT_RETRIED, tag);
    }
    assert.equal(emptyAnswerAsk("chain_getBlock", []), NOT_RETRIED);
    assert.equal(emptyAnswerAsk("chain_getHeader", undefined), NOT_RETRIED);
    assert.equal(emptyAnswerAsk("eth_getBlockByNumber", ["0xzz"]), NOT_RETRIED);
    assert.equal(emptyAnswerAsk("chain_getBlockHash", [-1]), NOT_RETRIED);
    assert.equal(emptyAnswerAsk("eth_call", [{}, "0x10"]), NOT_RETRIED);
    assert.equal(emptyAnswerAsk("eth_getFilterChanges", ["0x1"]), NOT_RETRIED);
    assert.equal(emptyAnswerAsk("stub_null", []), NOT_RETRIED);
  });
});
