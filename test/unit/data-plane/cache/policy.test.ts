import assert from "node:assert/strict";
import { blockNumber, CacheRule, cacheRule, finalizableBlock } from "../../../../data-plane/src/cache/policy";

describe("data-plane: cache policy, block given by number (finality)", () => {
  it("reads 0x-hex (any digit case, leading zeros), earliest and JSON numbers; nothing else", () => {
    assert.equal(blockNumber("0x100"), 256);
    assert.equal(blockNumber("0x0100"), 256);
    assert.equal(blockNumber("0xAbC"), 0xabc);
    assert.equal(blockNumber("0x0"), 0);
    assert.equal(blockNumber("earliest"), 0);
    assert.equal(blockNumber(42), 42);
    assert.equal(blockNumber("0xfffffffffffff"), 2 ** 52 - 1);
    for (const v of [
      "latest",
      "safe",
      "finalized",
      "pending",
      "0x",
      "0X10",
      "256",
      "0x10g",
      " 0x10",
      "0x10000000000000", // 14 digits: not read
      -1,
      1.5,
      null,
      undefined,
      {},
    ]) {
      assert.equal(blockNumber(v), -1, JSON.stringify(v));
    }
  });

  it("finds the block number argument of each number-addressed method", () => {
    assert.equal(finalizableBlock("eth_getBlockByNumber", ["0x100", false]), 256);
    assert.equal(finalizableBlock("eth_getBlockTransactionCountByNumber", ["0x10"]), 16);
    assert.equal(finalizableBlock("eth_getTransactionByBlockNumberAndIndex", ["0x10", "0x0"]), 16);
    assert.equal(finalizableBlock("eth_getBlockReceipts", ["0x10"]), 16);
    assert.equal(finalizableBlock("eth_getBalance", ["0xab", "0x20"]), 32);
    assert.equal(finalizableBlock("eth_getCode", ["0xab", "0x20"]), 32);
    assert.equal(finalizableBlock("eth_getTransactionCount", ["0xab", "0x20"]), 32);
    assert.equal(finalizableBlock("eth_getStorageAt", ["0xab", "0x0", "0x20"]), 32);
    assert.equal(finalizableBlock("eth_call", [{ to: "0xab", data: "0x" }, "0x20"]), 32);
    assert.equal(finalizableBlock("eth_getProof", ["0xab", [], "0x20"]), 32);
    assert.equal(finalizableBlock("chain_getBlockHash", [7]), 7);
    assert.equal(finalizableBlock("chain_getBlockHash", ["0x7"]), 7);
    // EIP-1898 block object by number.
    assert.equal(finalizableBlock("eth_call", [{ to: "0xab" }, { blockNumber: "0x20" }]), 32);
  });

  it("tags, absent block arguments, hashes and unlisted methods are not finalizable", () => {
    assert.equal(finalizableBlock("eth_getBlockByNumber", ["latest", false]), -1);
    assert.equal(finalizableBlock("eth_getBlockByNumber", ["finalized", false]), -1);
    assert.equal(finalizableBlock("eth_getBalance", ["0xab"]), -1);
    assert.equal(finalizableBlock("eth_getBalance", ["0xab", "safe"]), -1);
    assert.equal(finalizableBlock("eth_call", [{ to: "0xab" }, { blockHash: `0x${"11".repeat(32)}` }]), -1);
    assert.equal(finalizableBlock("eth_blockNumber", []), -1);
    assert.equal(finalizableBlock("eth_getTransactionByHash", [`0x${"11".repeat(32)}`]), -1);
    assert.equal(finalizableBlock("eth_getBlockByNumber", { block: "0x1" }), -1);
    assert.equal(finalizableBlock("eth_getBlockByNumber", undefined), -1);
    assert.equal(finalizableBlock("chain_getBlockHash", [[1, 2]]), -1);
  });

  it("eth_getLogs: both bounds numbers (or earliest); the answer depends on the higher", () => {
    assert.equal(finalizableBlock("eth_getLogs", [{ fromBlock: "0x10", toBlock: "0x20" }]), 32);
    assert.equal(
      finalizableBlock("eth_getLogs", [{ fromBlock: "earliest", toBlock: "0x20", address: "0xab" }]),
      32,
    );
    // An inverted range is the node's to refuse; it is not read as ending at fromBlock's lower block.
    assert.equal(finalizableBlock("eth_getLogs", [{ fromBlock: "0x30", toBlock: "0x20" }]), 48);
    assert.equal(finalizableBlock("eth_getLogs", [{ fromBlock: "0x10" }]), -1, "toBlock absent = latest");
    assert.equal(finalizableBlock("eth_getLogs", [{ toBlock: "0x20" }]), -1, "fromBlock absent = latest");
    assert.equal(finalizableBlock("eth_getLogs", [{ fromBlock: "0x10", toBlock: "latest" }]), -1);
    assert.equal(finalizableBlock("eth_getLogs", [{ fromBlock: "0x10", toBlock: "finalized" }]), -1);
    assert.equal(
      finalizableBlock("eth_getLogs", [
        { blockHash: `0x${"11".repeat(32)}`, fromBlock: "0x1", toBlock: "0x2" },
      ]),
      -1,
    );
    assert.equal(
      finalizableBlock("eth_getLogs", [{ fromBlock: "0x10", toBlock: "0x20", blockHash: null }]),
      32,
    );
    assert.equal(finalizableBlock("eth_getLogs", [{ filter: { fromBlock: "0x1", toBlock: "0x2" } }]), -1);
    assert.equal(finalizableBlock("eth_getLogs", []), -1);
  });

  it("the cache rule of these calls is per-block (the core upgrades them when final); pending is never", () => {
    assert.equal(cacheRule("eth_getBlockByNumber", ["0x100", false]), CacheRule.PerBlock);
    assert.equal(cacheRule("eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x2" }]), CacheRule.PerBlock);
    assert.equal(cacheRule("chain_getBlockHash", [7]), CacheRule.PerBlock);
    assert.equal(cacheRule("chain_getBlockHash", [0]), CacheRule.Permanent);
    assert.equal(cacheRule("eth_getBalance", ["0xab", "pending"]), CacheRule.Never);
  });
});
