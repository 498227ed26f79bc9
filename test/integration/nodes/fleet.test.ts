import assert from "node:assert/strict";
import { join } from "node:path";
import { pidsWithArgument } from "../../helpers/process";
import { describeOverRedis } from "../../helpers/redis";
import { ADMIN_TOKEN, code, createApp, type Json } from "../control-plane/harness";
import {
  DEPLOY,
  FAST_SUBSTRATE,
  gatewayUrl,
  internalUrl,
  type NodesEnv,
  pidAlive,
  providerPid,
  rpcPost,
  setPlan,
  startNodesEnv,
  waitNode,
} from "./env";

function input(over: Json = {}): Json {
  return {
    displayName: "node",
    network: "dot-test",
    nodeType: "FULL",
    region: "local",
    lightningRestore: false,
    launchArgs: { rpcMethods: "SAFE", extra: FAST_SUBSTRATE },
    ...over,
  };
}

describeOverRedis(
  "dedicated nodes: EVM on anvil, isolation, plan limit, sync and failures",
  function (redis) {
    this.timeout(120_000);
    let env: NodesEnv;
    let owner: { token: string; workspaceId: string };
    let other: { token: string; workspaceId: string };
    let evm: Json;
    let full: Json;

    before(async () => {
      env = await startNodesEnv({ redis: redis() });
      owner = await env.h.signUp();
      other = await env.h.signUp();
      await setPlan(env.h, owner.workspaceId, "growth");
      await setPlan(env.h, other.workspaceId, "growth");
    });
    after(async () => {
      await env?.close();
    });

    it("lists image versions and regions; validates input", async () => {
      const d = await env.h.ok<{ imageVersions: Json[]; regions: string[] }>(
        `{ imageVersions(network: "evm-test") { version image latest } regions }`,
        {},
        owner.token,
      );
      assert.equal(d.imageVersions[0].latest, true);
      assert.ok(d.regions.includes("local"));
      for (const [over, field] of [
        [{ network: "nope" }, "network"],
        [{ region: "mars-1" }, "region"],
        [{ imageVersion: "v0.0.1" }, "imageVersion"],
        [{ network: "evm-test", nodeType: "VALIDATOR" }, "nodeType"],
        [{ launchArgs: { rpcMethods: "SAFE", extra: ["--rpc-port=1"] } }, "launchArgs"],
      ] as const) {
        const r = await env.h.gql(DEPLOY, { i: input(over) }, owner.token);
        assert.equal(code(r), "BAD_USER_INPUT", JSON.stringify(r.errors));
        assert.equal(r.errors?.[0]?.extensions?.field, field);
      }
    });

    it("free plan: no dedicated nodes (clear error)", async () => {
      const free = await env.h.signUp();
      const r = await env.h.gql(DEPLOY, { i: input() }, free.token);
      assert.equal(code(r), "FORBIDDEN");
      assert.match(r.errors![0]!.message, /plan "free" allows 0 dedicated node/);
    });

    it("deploys an EVM node on anvil through the same path; SAFE blocks account methods", async () => {
      const d = await env.h.ok<{ deployDedicatedNode: Json }>(
        DEPLOY,
        {
          i: input({
            displayName: "evm",
            network: "evm-test",
            launchArgs: { rpcMethods: "SAFE", extra: [] },
          }),
        },
        owner.token,
      );
      evm = d.deployDedicatedNode;
      const n = await waitNode(env.h, owner.token, evm.id, (x) => x.status === "SYNCED");
      assert.equal(n.network.protocol, "EVM");
      const url = gatewayUrl(env, evm.id, evm.apiKey);
      const r = await rpcPost(url, { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
      assert.equal(r.status, 200);
      assert.equal(r.json.result, "0x7a69");
      const s = await rpcPost(url, { jsonrpc: "2.0", id: 2, method: "eth_sendTransaction", params: [{}] });
      assert.equal(s.json.error.code, -32601);
      const a = await rpcPost(url, { jsonrpc: "2.0", id: 3, method: "anvil_mine", params: [] });
      assert.equal(a.json.error.code, -32601);
    });

    it("plan limit (growth = 2): the third node is refused", async () => {
      const d = await env.h.ok<{ deployDedicatedNode: Json }>(
        DEPLOY,
        { i: input({ displayName: "full" }) },
        owner.token,
      );
      full = d.deployDedicatedNode;
      const r = await env.h.gql(DEPLOY, { i: input({ displayName: "third" }) }, owner.token);
      assert.equal(code(r), "FORBIDDEN");
      assert.match(r.errors![0]!.message, /Dedicated node limit reached: plan "growth" allows 2/);
    });

    it("SYNCED -> SYNCING when the node falls behind, and back", async () => {
      await waitNode(env.h, owner.token, full.id, (x) => x.status === "SYNCED");
      const internal = await internalUrl(env.h.redis, env.h.names, full.id);
      await rpcPost(internal, { jsonrpc: "2.0", id: 1, method: "testnode_setSyncPaused", params: [true] });
      await rpcPost(internal, { jsonrpc: "2.0", id: 1, method: "testnode_fallBehind", params: [50] });
      const behind = await waitNode(env.h, owner.token, full.id, (x) => x.status === "SYNCING");
      assert.match(behind.statusReason, /Behind/);
      const r = await rpcPost(gatewayUrl(env, full.id, full.apiKey), {
        jsonrpc: "2.0",
        id: 1,
        method: "system_health",
      });
      assert.equal(r.status, 503, "not served while syncing");
      await rpcPost(internal, { jsonrpc: "2.0", id: 1, method: "testnode_setSyncPaused", params: [false] });
      await waitNode(env.h, owner.token, full.id, (x) => x.status === "SYNCED");
    });

    it("another workspace can neither see, change nor reach the node (NOT_FOUND / 401)", async () => {
      const id = full.id;
      const queries: [string, Json][] = [
        [`query($id: ID!) { dedicatedNode(id: $id) { id } }`, { id }],
        [`mutation($id: ID!) { updateDedicatedNode(id: $id, input: { displayName: "x" }) { id } }`, { id }],
        [`mutation($id: ID!) { restartDedicatedNode(id: $id) { id } }`, { id }],
        [`mutation($id: ID!) { stopDedicatedNode(id: $id) { id } }`, { id }],
        [`mutation($id: ID!) { deleteDedicatedNode(id: $id) { id } }`, { id }],
        [`mutation($id: ID!) { regenerateDedicatedNodeApiKey(id: $id) { id } }`, { id }],
        [
          `mutation($id: ID!) { setValidatorStash(nodeId: $id, stash: "0x${"11".repeat(32)}") { id } }`,
          { id },
        ],
      ];
      for (const [q, v] of queries) {
        const r = await env.h.gql(q, v, other.token);
        assert.equal(code(r), "NOT_FOUND", `${q}: ${JSON.stringify(r.errors)}`);
      }
      const l = await env.h.ok<{ dedicatedNodes: Json[] }>("{ dedicatedNodes { id } }", {}, other.token);
      assert.equal(l.dedicatedNodes.length, 0);
      const l2 = await env.h.gql(
        `query($w: ID!) { dedicatedNodes(workspaceId: $w) { id } }`,
        { w: owner.workspaceId },
        other.token,
      );
      assert.equal(code(l2), "NOT_FOUND");
      const unauth = await env.h.gql(`query($id: ID!) { dedicatedNode(id: $id) { id } }`, { id });
      assert.equal(code(unauth), "UNAUTHENTICATED");
      // Their app key, or a node key of their own, does not open this node's endpoint.
      const app = await createApp(env.h, other.token);
      const r = await rpcPost(gatewayUrl(env, id, app.apiKey), {
        jsonrpc: "2.0",
        id: 1,
        method: "system_health",
      });
      assert.equal(r.status, 401);
      const theirs = await env.h.ok<{ deployDedicatedNode: Json }>(
        DEPLOY,
        { i: input({ displayName: "theirs" }) },
        other.token,
      );
      const cross = await rpcPost(gatewayUrl(env, id, theirs.deployDedicatedNode.apiKey), {
        jsonrpc: "2.0",
        id: 1,
        method: "system_health",
      });
      assert.equal(cross.status, 401, "a node key opens only its own node");
      // The operator sees it.
      const op = await env.h.ok<{ dedicatedNodes: Json[] }>(
        `query($w: ID!) { dedicatedNodes(workspaceId: $w) { id } }`,
        { w: owner.workspaceId },
        ADMIN_TOKEN,
      );
      assert.equal(op.dedicatedNodes.length, 2);
      await env.h.ok(
        `mutation($id: ID!) { deleteDedicatedNode(id: $id) { id } }`,
        { id: theirs.deployDedicatedNode.id },
        other.token,
      );
    });

    it("a full re-publish keeps node keys and node records (not treated as stale)", async () => {
      await env.h.redis.del(env.h.names.node(full.id));
      const res = await env.h.cp.services.publication.republishAll();
      assert.equal(res.staleKeysRemoved, 0);
      assert.ok(await env.h.redis.get(env.h.names.node(full.id)));
      await new Promise((r) => setTimeout(r, 100));
      const r = await rpcPost(gatewayUrl(env, full.id, full.apiKey), {
        jsonrpc: "2.0",
        id: 1,
        method: "system_health",
      });
      assert.equal(r.status, 200);
    });

    it("a stored launch arg the allow-list refuses (row from before it): ERROR with the reason, no process", async () => {
      await env.h.ok(
        `mutation($id: ID!) { deleteDedicatedNode(id: $id) { id } }`,
        { id: evm.id },
        owner.token,
      );
      await waitNode(env.h, owner.token, evm.id, (x) => x.status === "DELETED", 30_000, "status");
      const d = await env.h.ok<{ deployDedicatedNode: Json }>(
        DEPLOY,
        { i: input({ displayName: "broken" }) },
        owner.token,
      );
      const id = d.deployDedicatedNode.id as string;
      await waitNode(env.h, owner.token, id, (x) => x.status === "SYNCED");
      const before = await providerPid(env.h, id);
      assert.ok(before && pidAlive(before));
      // Written straight to Postgres, as an old row would be: the GraphQL boundary never saw it.
      await env.h.cp.dataSource.query("UPDATE dedicated_nodes SET extra_args = $2 WHERE id = $1", [
        id,
        JSON.stringify(["--unsafe-rpc-external", "--rpc-cors", "all"]),
      ]);
      await env.h.ok(`mutation($id: ID!) { restartDedicatedNode(id: $id) { id } }`, { id }, owner.token);
      const n = await waitNode(
        env.h,
        owner.token,
        id,
        (x) => x.status === "ERROR",
        60_000,
        "status statusReason events { type message }",
      );
      assert.match(n.statusReason, /launch args refused: Launch flag --unsafe-rpc-external is not allowed/);
      // Refused before spawning: the old process was stopped for the roll and nothing replaced it.
      assert.ok(!pidAlive(before!));
      assert.deepEqual(pidsWithArgument(join(env.dataDir, id)), []);
      const types = (n.events as { type: string }[]).map((e) => e.type);
      assert.ok(!types.includes("RETRY"), `a refused arg is not retried: ${JSON.stringify(types)}`);
      // Fixing the launch args rolls it back to life.
      await env.h.ok(
        `mutation($id: ID!, $i: UpdateDedicatedNodeInput!) { updateDedicatedNode(id: $id, input: $i) { id } }`,
        { id, i: { launchArgs: { rpcMethods: "SAFE", extra: FAST_SUBSTRATE } } },
        owner.token,
      );
      await waitNode(env.h, owner.token, id, (x) => x.status === "SYNCED");
    });
  },
);
