import assert from "node:assert/strict";
import { CacheRule, cacheRule } from "../../../../data-plane/src/cache/policy";
import {
  reachRefusal,
  readsParams,
  SafeModeMethodPolicy,
  SharedNodeMethodPolicy,
} from "../../../../data-plane/src/policy/method-policy";
import type { NetworkRecord } from "../../../../shared/src/redis/records";

const net = (allowDebug: boolean): NetworkRecord => ({
  slug: "n",
  name: "n",
  protocol: "EVM",
  chainId: 1,
  allowDebug,
  upstreams: [],
});

// Review of issue 13: names were compared as sent, so another spelling of a denied method passed.
const CASE_VARIANTS = [
  "eth_Sign",
  "eth_SIGN",
  "ETH_SIGN",
  "eth_signtypeddata_v4",
  "eth_sendtransaction",
  "eth_sendTransaction ",
  " eth_sendTransaction",
  "eth_sendTransaction\t",
  "eth_SubmitWork",
  "state_getpairs",
  "STATE_QUERYSTORAGE",
  "state_TraceBlock",
  "babe_epochauthorship",
  "system_PEERS",
  "system_dryrun",
  "author_rotatekeys",
  "Admin_nodeInfo",
  "TXPOOL_content",
  "Debug_traceTransaction",
];

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

  // Issue 13: every method the issue names, refused on shared nodes with a message.
  const ISSUE_13_UNSAFE = [
    "txpool_content",
    "txpool_inspect",
    "txpool_status",
    "les_serverInfo",
    "parity_pendingTransactions",
    "parity_netPeers",
    "erigon_getHeaderByNumber",
    "trace_block",
    "trace_replayTransaction",
    "debug_traceTransaction",
    "debug_getRawBlock",
    "eth_sign",
    "eth_signTransaction",
    "eth_signTypedData",
    "eth_signTypedData_v1",
    "eth_signTypedData_v3",
    "eth_signTypedData_v4",
    "eth_signSomethingNew",
    "system_peers",
    "system_networkState",
    "system_unstable_networkState",
    "system_dryRun",
    "state_traceBlock",
    "state_getPairs",
    "state_queryStorage",
    "dev_getBlockStats",
    "dev_newBlock",
    "babe_epochAuthorship",
    "sync_state_genSyncSpec",
    "offchain_localStorageGet",
    "offchain_localStorageSet",
  ];

  it("refuses every method issue 13 names (debug_* and trace_* only where the network disallows them)", () => {
    for (const m of ISSUE_13_UNSAFE) {
      const why = policy.check(m, net(false));
      assert.ok(why !== undefined, `${m} must be refused`);
      assert.ok(why.startsWith(`${m} is not available on`), why);
      assert.match(why, /use a dedicated node/);
      const gated = m.startsWith("debug_") || m.startsWith("trace_");
      assert.equal(policy.check(m, net(true)) === undefined, gated, `${m} with allowDebug`);
    }
    assert.match(policy.check("trace_block", net(false))!, /debug methods are disabled/);
    assert.match(policy.check("txpool_content", net(false))!, /transaction pool/);
  });

  it("refuses unknown namespaces and names without a namespace by default", () => {
    for (const m of [
      "foo_bar",
      "les_x",
      "txpool_content",
      "zzz_anything",
      "nounderscore",
      "_x",
      "Eth_call",
    ]) {
      const why = policy.check(m, net(true));
      assert.ok(why !== undefined, m);
      assert.ok(why.startsWith(`${m} is not available on shared nodes`), why);
    }
    assert.match(policy.check("foo_bar", net(false))!, /namespace is not served on shared nodes/);
  });

  it("allows safe methods, author submit/watch, and debug_* when the network allows it", () => {
    for (const m of [
      "eth_chainId",
      "eth_sendRawTransaction",
      "eth_accounts",
      "eth_call",
      "eth_getLogs",
      "eth_subscribe",
      "eth_unsubscribe",
      "eth_someFutureReadMethod",
      "net_version",
      "web3_clientVersion",
      "rpc_methods",
      "author_submitExtrinsic",
      "author_submitAndWatchExtrinsic",
      "author_unwatchExtrinsic",
      "author_pendingExtrinsics",
      "chain_getHeader",
      "chain_getBlockHash",
      "chain_subscribeNewHeads",
      "chain_unsubscribeFinalizedHeads",
      "subscribe_newHead",
      "unsubscribe_newHead",
      "state_getStorage",
      "state_getMetadata",
      "state_getKeysPaged",
      "state_queryStorageAt",
      "state_subscribeStorage",
      "state_getRuntimeVersion",
      "childstate_getStorage",
      "system_health",
      "system_chain",
      "system_chainType",
      "system_name",
      "system_version",
      "system_properties",
      "system_accountNextIndex",
      "system_syncState",
      "payment_queryInfo",
      "grandpa_roundState",
      "beefy_getFinalizedHead",
      "mmr_root",
      "web3_sha3",
    ]) {
      assert.equal(policy.check(m, net(false)), undefined, m);
    }
    assert.equal(policy.check("debug_traceTransaction", net(true)), undefined);
    assert.equal(policy.check("trace_filter", net(true)), undefined);
  });

  it("extra namespaces open chain-specific namespaces, never the unsafe or debug ones", () => {
    const p = new SharedNodeMethodPolicy({ extraNamespaces: ["bor", "zks_", " ", "txpool", "debug"] });
    assert.equal(p.check("bor_getAuthor", net(false)), undefined);
    assert.equal(p.check("zks_getL1BatchNumber", net(false)), undefined);
    assert.ok(p.check("txpool_content", net(false)) !== undefined);
    assert.ok(p.check("debug_traceTransaction", net(false)) !== undefined);
    assert.ok(p.check("foo_bar", net(false)) !== undefined);
    assert.ok(p.check("eth_sign", net(false)) !== undefined);
  });

  it("refuses other spellings of denied methods (case, surrounding spaces)", () => {
    const p = new SharedNodeMethodPolicy();
    for (const m of CASE_VARIANTS) {
      const why = p.check(m, net(false));
      assert.ok(why?.startsWith(`${m} is not available`), JSON.stringify(m));
    }
    // Allow-only namespaces: an allowed name in another spelling stays allowed, a denied one is refused.
    assert.equal(p.check("system_Health", net(false)), undefined);
    assert.equal(p.check("eth_BlockNumber", net(false)), undefined);
    assert.ok(
      p.check("ETH_blockNumber", net(false)) !== undefined,
      "the namespace allow-list is matched as spelled",
    );
    assert.ok(p.check("author_hasKEY", net(false)) !== undefined);
  });

  it("answers the same for a method seen many times and past the memo bound (hostile method names)", () => {
    const p = new SharedNodeMethodPolicy();
    for (let i = 0; i < 10_000; i++) assert.ok(p.check(`x${i}_y`, net(false)) !== undefined);
    // After the memo is full, new names are still decided correctly.
    assert.equal(p.check("eth_blockNumber", net(false)), undefined);
    assert.ok(p.check("eth_signTypedData_v4", net(false)) !== undefined);
    assert.equal(p.check("debug_x", net(true)), undefined);
    assert.ok(p.check("debug_x", net(false)) !== undefined);
  });
});

describe("data-plane Safe-mode policy (dedicated nodes)", () => {
  const safe = new SafeModeMethodPolicy();

  it("refuses the known-unsafe methods and namespaces", () => {
    for (const m of [
      "author_rotateKeys",
      "author_insertKey",
      "author_hasSessionKeys",
      "system_addReservedPeer",
      "system_peers",
      "system_networkState",
      "system_unstable_networkState",
      "system_dryRun",
      "state_traceBlock",
      "state_getPairs",
      "state_queryStorage",
      "offchain_localStorageSet",
      "babe_epochAuthorship",
      "sync_state_genSyncSpec",
      "eth_sign",
      "eth_signTypedData_v4",
      "eth_sendTransaction",
      "personal_sign",
      "admin_nodeInfo",
      "txpool_content",
      "dev_getBlockStats",
      "anvil_mine",
    ]) {
      assert.ok(safe.refusal(m) !== undefined, m);
    }
  });

  it("refuses other spellings of the known-unsafe methods (case, surrounding spaces)", () => {
    for (const m of CASE_VARIANTS) {
      assert.ok(safe.refusal(m) !== undefined, JSON.stringify(m));
    }
    assert.equal(safe.refusal("System_Health"), undefined);
  });

  it("lets the node's own namespaces and safe methods through", () => {
    for (const m of [
      "system_health",
      "system_localPeerId",
      "chain_getHeader",
      "state_getStorage",
      "author_submitExtrinsic",
      "author_pendingExtrinsics",
      "customchain_getThing",
      "eth_blockNumber",
    ]) {
      assert.equal(safe.refusal(m), undefined, m);
    }
  });
});

describe("data-plane: methods that reach past the node, refused on every endpoint", () => {
  const FORK = [{ forking: { jsonRpcUrl: "http://127.0.0.1:1/", blockNumber: 1 } }];

  it("Safe mode refuses debug_* whatever its spelling (as docs/dedicated-nodes.md says)", () => {
    const safe = new SafeModeMethodPolicy();
    for (const m of [
      "debug_traceTransaction",
      "Debug_traceBlockByNumber",
      " DEBUG_setHead ",
      "debug_getRawBlock",
    ]) {
      assert.ok(safe.refusal(m) !== undefined, m);
    }
  });

  it("refuses the connecting, listening and host-file methods by name, any spelling", () => {
    for (const m of [
      "anvil_setRpcUrl",
      "ANVIL_SETRPCURL",
      " hardhat_setRpcUrl",
      "admin_addPeer",
      "admin_addTrustedPeer",
      "system_addReservedPeer",
      "admin_startHTTP",
      "admin_startWS",
      "admin_startRPC",
      "admin_exportChain",
      "debug_writeMemProfile",
      "debug_startCPUProfile",
    ]) {
      assert.ok(reachRefusal(m, []) !== undefined, m);
    }
    for (const m of [
      "anvil_mine",
      "evm_mine",
      "anvil_setBalance",
      "debug_setHead",
      "admin_nodeInfo",
      "eth_call",
    ]) {
      assert.equal(reachRefusal(m, []), undefined, m);
    }
  });

  it("anvil_reset / hardhat_reset: plain resets pass, anything with params that could fork is refused", () => {
    for (const m of ["anvil_reset", "hardhat_reset", "Anvil_Reset", " hardhat_reset"]) {
      assert.ok(readsParams(m), m);
      for (const plain of [undefined, null, [], [null], [{}]]) {
        assert.equal(reachRefusal(m, plain), undefined, `${m} ${JSON.stringify(plain)}`);
      }
      for (const forking of [
        FORK,
        { forking: { jsonRpcUrl: "http://127.0.0.1:1/" } },
        [{ Forking: { JsonRpcUrl: "http://127.0.0.1:1/" } }],
        [{ forking: null }],
        [null, FORK[0]],
        ["http://127.0.0.1:1/"],
        [[]],
      ]) {
        assert.match(reachRefusal(m, forking) ?? "", /fork URL/, `${m} ${JSON.stringify(forking)}`);
      }
    }
    for (const m of ["eth_call", "anvil_mine", "hardhat_mine", "", " "])
      assert.equal(readsParams(m), false, m);
  });

  it("shared nodes refuse them too, debug ones even where the network allows debug_*; and debug_setHead", () => {
    const shared = new SharedNodeMethodPolicy();
    for (const m of ["debug_writeMemProfile", "debug_startCPUProfile", "debug_setHead", "admin_addPeer"]) {
      assert.ok(shared.check(m, net(true)) !== undefined, m);
    }
    assert.match(shared.check("debug_writeBlockProfile", net(true)) ?? "", /not available on any endpoint/);
    assert.equal(shared.check("debug_traceTransaction", net(true)), undefined);
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
