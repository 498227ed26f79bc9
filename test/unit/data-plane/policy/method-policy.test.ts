import assert from "node:assert/strict";
import { CacheRule, cacheRule } from "../../../../data-plane/src/cache/policy";
import { SharedNodeMethodPolicy } from "../../../../data-plane/src/policy/method-policy";
import type { NetworkRecord } from "../../../../shared/src/redis/records";

const net = (allowDebug: boolean): NetworkRecord => ({
  slug: "n",
  name: "n",
  protocol: "EVM",
  chainId: 1,
  allowDebug,
  upstreams: [],
});

describe("data-plane method policy", () => {
  const policy = new SharedNodeMethodPolicy();

  it("blocks unsafe methods with a reason", () => {
    for (const m of [
      "author_rotateKeys",
      "author_insertKey",
      "author_removeExtrinsic",
      "author_hasKey",
      "author_hasSessionKeys",
      "admin_addPeer",
      "personal_unlockAccount",
      "miner_start",
      "debug_traceTransaction",
      "system_addReservedPeer",
      "system_removeReservedPeer",
      "system_addLogFilter",
      "system_resetLogFilter",
      "eth_sign",
      "eth_signTransaction",
      "eth_sendTransaction",
      "anvil_setBalance",
      "evm_mine",
      "hardhat_impersonateAccount",
      "offchain_localStorageSet",
    ]) {
      const why = policy.check(m, net(false));
      assert.ok(why?.startsWith(`${m} is not available`), m);
    }
    assert.match(policy.check("author_rotateKeys", net(false))!, /shared nodes: .*use a dedicated node/);
  });

  it("allows safe methods, author submit/watch, and debug_* when the network allows it", () => {
    for (const m of [
      "eth_chainId",
      "eth_sendRawTransaction",
      "eth_accounts",
      "eth_call",
      "author_submitExtrinsic",
      "author_submitAndWatchExtrinsic",
      "author_unwatchExtrinsic",
      "chain_getHeader",
      "system_health",
      "web3_clientVersion",
      "nounderscore",
    ]) {
      assert.equal(policy.check(m, net(false)), undefined, m);
    }
    assert.equal(policy.check("debug_traceTransaction", net(true)), undefined);
  });
});

describe("data-plane cache policy", () => {
  it("classifies methods", () => {
    assert.equal(cacheRule("eth_chainId", undefined), CacheRule.Permanent);
    assert.equal(cacheRule("eth_getBlockByHash", [`0x${"a".repeat(64)}`, false]), CacheRule.Permanent);
    assert.equal(cacheRule("eth_blockNumber", []), CacheRule.PerBlock);
    assert.equal(cacheRule("eth_getBalance", ["0x01", "latest"]), CacheRule.PerBlock);
    assert.equal(cacheRule("eth_getBalance", ["0x01", `0x${"b".repeat(64)}`]), CacheRule.Permanent);
    assert.equal(cacheRule("eth_call", [{}, { blockHash: `0x${"c".repeat(64)}` }]), CacheRule.Permanent);
    assert.equal(cacheRule("eth_getBalance", ["0x01", "pending"]), CacheRule.Never);
    assert.equal(cacheRule("eth_getLogs", [{ fromBlock: "0x1", toBlock: "pending" }]), CacheRule.Never);
    assert.equal(cacheRule("eth_sendRawTransaction", ["0x00"]), CacheRule.Never);
    assert.equal(cacheRule("eth_newFilter", [{}]), CacheRule.Never);
    assert.equal(cacheRule("eth_getFilterChanges", ["0x1"]), CacheRule.Never);
    assert.equal(cacheRule("eth_subscribe", ["newHeads"]), CacheRule.Never);
    assert.equal(cacheRule("unknown_method", []), CacheRule.Never);
    assert.equal(cacheRule("chain_getBlockHash", [0]), CacheRule.Permanent);
    assert.equal(cacheRule("chain_getBlockHash", [5]), CacheRule.PerBlock);
    assert.equal(cacheRule("chain_getBlock", [`0x${"d".repeat(64)}`]), CacheRule.Permanent);
    assert.equal(cacheRule("system_chain", []), CacheRule.Permanent);
  });
});
