import assert from "node:assert/strict";
import { parseAccountId, ss58Encode } from "../../../shared/src/substrate/storage-keys";
import type { Json } from "../control-plane/harness";
import { type Received, WebhookReceiver } from "../control-plane/webhooks/receiver";
import {
  DEPLOY,
  FAST_SUBSTRATE,
  internalUrl,
  type NodesEnv,
  rpcPost,
  setPlan,
  startNodesEnv,
  waitNode,
} from "./env";

const STASH_HEX = `0x${"11".repeat(32)}`;

describe("webhooks from dedicated nodes: node.status, validator.status, key.regenerated (Substrate test node)", function () {
  this.timeout(180_000);
  let env: NodesEnv;
  let owner: { token: string; workspaceId: string };
  let node: Json;
  const rx = new WebhookReceiver();
  // In the order the events happened (deliveries run concurrently, so arrival order may differ).
  const of = (type: string): Received[] =>
    rx
      .on("/n")
      .filter((r) => r.json?.type === type)
      .sort((x, y) => Date.parse(x.json.timestamp) - Date.parse(y.json.timestamp));
  const statuses = () => of("node.status").map((r) => `${r.json.data.previousStatus}>${r.json.data.status}`);

  before(async () => {
    await rx.start();
    env = await startNodesEnv({
      harnessEnv: { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true", WEBHOOK_RETRY_BASE_MS: "200" },
    });
    owner = await env.h.signUp();
    await setPlan(env.h, owner.workspaceId, "growth");
    const d = await env.h.ok<{ createWebhookEndpoint: { secret: string } }>(
      `mutation($i: CreateWebhookEndpointInput!) { createWebhookEndpoint(input: $i) { secret } }`,
      { i: { url: rx.url("/n"), eventTypes: ["NODE_STATUS", "VALIDATOR_STATUS", "KEY_REGENERATED"] } },
      owner.token,
    );
    rx.setSecret("/n", d.createWebhookEndpoint.secret);
  });
  after(async () => {
    await env?.close();
    await rx.close();
  });

  it("deploy: one node.status when the node becomes SYNCED (provisioning steps are not announced)", async () => {
    const d = await env.h.ok<{ deployDedicatedNode: Json }>(
      DEPLOY,
      {
        i: {
          displayName: "val",
          network: "dot-test",
          nodeType: "VALIDATOR",
          region: "local",
          lightningRestore: false,
          launchArgs: { rpcMethods: "UNSAFE", extra: FAST_SUBSTRATE },
        },
      },
      owner.token,
    );
    node = d.deployDedicatedNode;
    await waitNode(env.h, owner.token, node.id, (x) => x.status === "SYNCED");
    const [ev] = await rx.waitFor("/n", (rs) => rs.some((r) => r.json.type === "node.status"));
    assert.ok(ev!.verified);
    assert.deepEqual(ev!.json.data, {
      nodeId: node.id,
      displayName: "val",
      network: "dot-test",
      previousStatus: "SYNCING",
      status: "SYNCED",
      reason: null,
    });
    assert.equal(ev!.json.workspaceId, owner.workspaceId);
    assert.deepEqual(statuses(), ["SYNCING>SYNCED"]);
  });

  it("validator.status on every change (first status after the stash, then WAITING)", async () => {
    const stash = ss58Encode(parseAccountId(STASH_HEX));
    await env.h.ok(
      `mutation($id: ID!, $s: String!) { setValidatorStash(nodeId: $id, stash: $s) { id } }`,
      { id: node.id, s: stash },
      owner.token,
    );
    await rx.waitFor("/n", () => of("validator.status").length >= 1, 30_000);
    const internal = await internalUrl(env.h.redis, env.h.names, node.id);
    await rpcPost(internal, {
      jsonrpc: "2.0",
      id: 1,
      method: "testnode_setValidatorCandidates",
      params: [[STASH_HEX]],
    });
    await rx.waitFor("/n", () => of("validator.status").length >= 2, 30_000);
    const [first, second] = of("validator.status");
    assert.deepEqual(first!.json.data, {
      nodeId: node.id,
      displayName: "val",
      stash,
      previousStatus: null,
      status: "NOT_REGISTERED",
    });
    assert.equal(second!.json.data.previousStatus, "NOT_REGISTERED");
    assert.equal(second!.json.data.status, "WAITING");
    assert.ok(first!.verified && second!.verified);
  });

  it("node.status when the node falls behind (leaves SYNCED) and when it comes back", async () => {
    const internal = await internalUrl(env.h.redis, env.h.names, node.id);
    await rpcPost(internal, { jsonrpc: "2.0", id: 1, method: "testnode_setSyncPaused", params: [true] });
    await rpcPost(internal, { jsonrpc: "2.0", id: 1, method: "testnode_fallBehind", params: [50] });
    await rx.waitFor("/n", () => statuses().length >= 2, 30_000);
    const behind = of("node.status")[1]!;
    assert.equal(behind.json.data.status, "SYNCING");
    assert.match(behind.json.data.reason, /^Behind: block \d+ of \d+$/);
    await rpcPost(internal, { jsonrpc: "2.0", id: 1, method: "testnode_setSyncPaused", params: [false] });
    await rx.waitFor("/n", () => statuses().length >= 3, 30_000);
    assert.deepEqual(statuses(), ["SYNCING>SYNCED", "SYNCED>SYNCING", "SYNCING>SYNCED"]);
  });

  it("key.regenerated for a node key", async () => {
    await env.h.ok(
      `mutation($id: ID!) { regenerateDedicatedNodeApiKey(id: $id) { id } }`,
      { id: node.id },
      owner.token,
    );
    const [ev] = await rx
      .waitFor("/n", () => of("key.regenerated").length >= 1)
      .then(() => of("key.regenerated"));
    assert.deepEqual(ev!.json.data, {
      kind: "node",
      nodeId: node.id,
      displayName: "val",
      previousKeyExpiresAt: null,
    });
  });

  it("node.status when a restart leaves SYNCED and the roll ends in ERROR", async () => {
    // A launch arg the allow-list refuses, written as an old row would hold it: the roll fails for good.
    await env.h.cp.dataSource.query("UPDATE dedicated_nodes SET extra_args = $2 WHERE id = $1", [
      node.id,
      JSON.stringify(["--unsafe-rpc-external"]),
    ]);
    await env.h.ok(
      `mutation($id: ID!) { restartDedicatedNode(id: $id) { id } }`,
      { id: node.id },
      owner.token,
    );
    await waitNode(env.h, owner.token, node.id, (x) => x.status === "ERROR", 60_000, "status");
    await rx.waitFor("/n", () => statuses().length >= 5, 30_000);
    assert.deepEqual(statuses().slice(3), ["SYNCED>PROVISIONING", "PROVISIONING>ERROR"]);
    const err = of("node.status")[4]!;
    assert.match(err.json.data.reason, /launch args refused/);
    assert.ok(
      rx.on("/n").every((r) => r.verified),
      "every delivery signed",
    );
  });
});
