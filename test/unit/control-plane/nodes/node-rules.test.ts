import assert from "node:assert/strict";
import { loadNodeConfig } from "../../../../control-plane/src/nodes/node.config";
import type { DedicatedNode } from "../../../../control-plane/src/nodes/node.entity";
import { validatorSteps } from "../../../../control-plane/src/nodes/node.resolver";
import { validExtraArgs } from "../../../../control-plane/src/nodes/node.service";
import { NodeType, RpcMethods, ValidatorStatus } from "../../../../control-plane/src/nodes/node.types";
import { launchArgs } from "../../../../control-plane/src/nodes/providers/provider";
import { safeModeBlocked } from "../../../../data-plane/src/nodes/node-gateway";
import { JobName, nodeJobId } from "../../../../shared/src/queue/names";

describe("dedicated nodes: rules", () => {
  it("job ids are per (operation, node, generation) and BullMQ-safe", () => {
    const id = nodeJobId(JobName.ProvisionNode, "n1", 3);
    assert.equal(id, "provision-node-n1-3");
    assert.ok(!id.includes(":"));
  });

  it("extra launch args: platform-managed flags refused, limits enforced", () => {
    assert.deepEqual(validExtraArgs(["--chain", "kusama"], "polkadot"), ["--chain", "kusama"]);
    assert.deepEqual(validExtraArgs(null, "anvil"), []);
    for (const bad of [
      ["--rpc-methods", "Unsafe"],
      ["--base-path=/"],
      ["a\nb"],
      [""],
      Array(33).fill("--no-mdns"),
    ]) {
      assert.throws(() => validExtraArgs(bad, "polkadot"), /launch|argument|overridden/i);
    }
  });

  it("Substrate launch args carry rpc-methods, base path, validator, archive pruning", () => {
    const base = {
      nodeId: "n",
      workspaceId: "w",
      displayName: "v",
      protocol: "SUBSTRATE" as const,
      imageVersion: "x",
      image: "x",
      rpcPort: 9944,
      region: "local",
      lightningRestore: false,
      extraArgs: ["--chain", "westend"],
      generation: 1,
    };
    const v = launchArgs(
      { ...base, nodeType: NodeType.VALIDATOR, rpcMethods: RpcMethods.SAFE },
      { port: 1, basePath: "/d", dialect: "polkadot" },
    );
    assert.deepEqual(v, [
      "--rpc-port",
      "1",
      "--rpc-methods",
      "Safe",
      "--base-path",
      "/d",
      "--name=v",
      "--validator",
      "--chain=westend",
    ]);
    const a = launchArgs(
      { ...base, nodeType: NodeType.ARCHIVE, rpcMethods: RpcMethods.UNSAFE },
      { port: 1, basePath: "/d", dialect: "polkadot" },
    );
    assert.ok(a.includes("Unsafe") && a.includes("archive") && !a.includes("--validator"));
  });

  it("validator checklist follows the recorded facts", () => {
    const node = {
      syncedAt: new Date(),
      sessionKeysAt: null,
      keysOnChain: false,
      validatorStatus: null,
      rpcMethods: RpcMethods.UNSAFE,
    } as unknown as DedicatedNode;
    const done = () =>
      validatorSteps(node)
        .filter((s) => s.done)
        .map((s) => s.name);
    assert.deepEqual(done(), ["Node synced"]);
    Object.assign(node, {
      sessionKeysAt: new Date(),
      keysOnChain: true,
      validatorStatus: ValidatorStatus.WAITING,
    });
    assert.deepEqual(done(), [
      "Node synced",
      "Session keys generated",
      "Session keys set on chain",
      "Registered as validator",
      "In the waiting list",
    ]);
    Object.assign(node, { validatorStatus: ValidatorStatus.ELECTED, rpcMethods: RpcMethods.SAFE });
    assert.equal(done().length, 7);
  });

  it("SAFE node endpoints refuse unsafe methods, allow reads", () => {
    for (const m of [
      "author_rotateKeys",
      "author_insertKey",
      "author_hasSessionKeys",
      "system_addReservedPeer",
      "eth_sendTransaction",
      "debug_traceTransaction",
    ]) {
      assert.match(safeModeBlocked(m) ?? "", /rpc-methods is Safe/, m);
    }
    for (const m of ["system_health", "state_getStorage", "author_submitExtrinsic", "eth_call"]) {
      assert.equal(safeModeBlocked(m), undefined, m);
    }
  });

  it("config: defaults and NODE_PROVIDER", () => {
    const c = loadNodeConfig({});
    assert.equal(c.provider, "local");
    assert.ok(c.substrateCommand.at(-1)!.endsWith("test/substrate-node/main.js"));
    assert.ok(c.regions.includes("local"));
    const k = loadNodeConfig({
      NODE_PROVIDER: "kubernetes",
      NODE_K8S_SNAPSHOTS: "substrate=snap-a, EVM=snap-b",
    });
    assert.equal(k.provider, "kubernetes");
    assert.deepEqual(k.k8sSnapshots, { SUBSTRATE: "snap-a", EVM: "snap-b" });
    assert.throws(() => loadNodeConfig({ NODE_PROVIDER: "docker" }));
  });
});
