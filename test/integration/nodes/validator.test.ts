import assert from "node:assert/strict";
import { parseAccountId, ss58Encode } from "../../../shared/src/substrate/storage-keys";
import { code, createApp, type Json } from "../control-plane/harness";
import { TestWsClient } from "../data-plane/ws/ws-client";
import {
  DEPLOY,
  FAST_SUBSTRATE,
  gatewayUrl,
  getNode,
  internalUrl,
  type NodesEnv,
  pidAlive,
  providerPid,
  rpcPost,
  setPlan,
  startNodesEnv,
  waitNode,
} from "./env";

const STASH_HEX = `0x${"11".repeat(32)}`;
const OTHER_HEX = `0x${"22".repeat(32)}`;

function step(n: Json, name: string): boolean {
  const s = (n.validatorSetup.steps as { name: string; done: boolean }[]).find((x) => x.name === name);
  assert.ok(s, `step ${name}`);
  return s.done;
}

describe("dedicated nodes: validator on the Substrate test node, end to end", function () {
  this.timeout(120_000);
  let env: NodesEnv;
  let owner: { token: string; workspaceId: string };
  let node: Json;

  before(async () => {
    env = await startNodesEnv();
    owner = await env.h.signUp();
    await setPlan(env.h, owner.workspaceId, "growth");
  });
  after(async () => {
    await env?.close();
  });

  it("deploys a VALIDATOR node: PENDING -> PROVISIONING -> SYNCING -> SYNCED", async () => {
    const d = await env.h.ok<{ deployDedicatedNode: Json }>(
      DEPLOY,
      {
        i: {
          displayName: "my validator",
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
    assert.equal(node.status, "PENDING");
    assert.equal(node.imageVersion, "v1.17.1", "defaults to the latest image");
    assert.equal(node.launchArgs.rpcMethods, "UNSAFE");
    assert.match(node.endpoints.httpUrl, new RegExp(`/nodes/${node.id}/`));
    const synced = await waitNode(env.h, owner.token, node.id, (n) => n.status === "SYNCED");
    assert.ok(synced.syncStatus.currentBlock >= 30, JSON.stringify(synced.syncStatus));
    assert.ok(synced.syncStatus.currentBlock >= synced.syncStatus.highestBlock);
    const more = await getNode(
      env.h,
      owner.token,
      node.id,
      "logs(tail: 5) events { type message } resources { cpu memory storage }",
    );
    const types = (more.events as { type: string }[]).map((e) => e.type);
    for (const t of ["DEPLOY", "PROVISIONING", "SYNCING", "SYNCED"])
      assert.ok(types.includes(t), `event ${t} in ${types}`);
    assert.ok(
      types.indexOf("PROVISIONING") < types.indexOf("SYNCING") &&
        types.indexOf("SYNCING") < types.indexOf("SYNCED"),
    );
    assert.ok(
      (more.logs as string[]).some((l) => /listening on/.test(l)),
      JSON.stringify(more.logs),
    );
    assert.ok(more.resources.memory > 1_000_000, "RSS of the node process");
    assert.ok(more.resources.storage >= 0);
    assert.ok(step(synced, "Node synced"));
    assert.equal(step(synced, "Session keys generated"), false);
  });

  it("serves author_rotateKeys through /nodes/{id}/{KEY} while UNSAFE; refuses other keys (401)", async () => {
    const url = gatewayUrl(env, node.id, node.apiKey);
    const r = await rpcPost(url, { jsonrpc: "2.0", id: 7, method: "author_rotateKeys", params: [] });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.id, 7);
    assert.match(r.json.result, /^0x[0-9a-f]{64,}$/);
    // ?apikey= form
    const q = await rpcPost(`${env.base}/nodes/${node.id}?apikey=${encodeURIComponent(node.apiKey)}`, {
      jsonrpc: "2.0",
      id: "a",
      method: "system_health",
    });
    assert.equal(q.status, 200);
    assert.equal(q.json.result.isSyncing, false);
    // wrong key, an app key of the same workspace, no key
    const wrong = await rpcPost(gatewayUrl(env, node.id, "not-a-key"), {
      jsonrpc: "2.0",
      id: 1,
      method: "system_health",
    });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.json.error.code, -32016);
    const app = await createApp(env.h, owner.token);
    const appKey = await rpcPost(gatewayUrl(env, node.id, app.apiKey), {
      jsonrpc: "2.0",
      id: 1,
      method: "system_health",
    });
    assert.equal(appKey.status, 401, "an app key is not a node key");
    const none = await rpcPost(`${env.base}/nodes/${node.id}`, {
      jsonrpc: "2.0",
      id: 1,
      method: "system_health",
    });
    assert.equal(none.status, 401);
    const checklist = await waitNode(env.h, owner.token, node.id, (n) => step(n, "Session keys generated"));
    assert.equal(step(checklist, "RPC methods back to Safe"), false);
  });

  it("tracks the validator: NOT_REGISTERED -> WAITING -> ELECTED from chain state; checklist flips", async () => {
    const bad = await env.h.gql(
      `mutation($id: ID!) { setValidatorStash(nodeId: $id, stash: "nope") { id } }`,
      { id: node.id },
      owner.token,
    );
    assert.equal(code(bad), "BAD_USER_INPUT");
    const stash = ss58Encode(parseAccountId(STASH_HEX));
    await env.h.ok(
      `mutation($id: ID!, $s: String!) { setValidatorStash(nodeId: $id, stash: $s) { id } }`,
      { id: node.id, s: stash },
      owner.token,
    );
    let n = await waitNode(env.h, owner.token, node.id, (x) => x.validator.status === "NOT_REGISTERED");
    assert.equal(n.validator.stash, stash);
    assert.equal(step(n, "Registered as validator"), false);
    const internal = await internalUrl(env.h.redis, env.h.names, node.id);
    const ctl = async (method: string, params: unknown[]) => {
      const r = await rpcPost(internal, { jsonrpc: "2.0", id: 1, method, params });
      assert.equal(r.json.error, undefined, JSON.stringify(r.json));
    };
    await ctl("testnode_setSessionNextKeys", [STASH_HEX, `0x${"ab".repeat(128)}`]);
    await ctl("testnode_setValidatorCandidates", [[STASH_HEX, OTHER_HEX]]);
    n = await waitNode(env.h, owner.token, node.id, (x) => x.validator.status === "WAITING");
    assert.ok(step(n, "Session keys set on chain"));
    assert.ok(step(n, "Registered as validator"));
    assert.ok(step(n, "In the waiting list"));
    assert.equal(step(n, "Elected"), false);
    await ctl("testnode_setActiveSet", [[OTHER_HEX, STASH_HEX]]);
    n = await waitNode(env.h, owner.token, node.id, (x) => x.validator.status === "ELECTED");
    assert.ok(step(n, "Elected"));
    const ev = await getNode(env.h, owner.token, node.id, "events { type message }");
    assert.ok((ev.events as { message: string }[]).some((e) => e.message === "Validator status: ELECTED"));
  });

  it("switching to SAFE rolls the node (new process) and the endpoint refuses unsafe methods with -32601", async () => {
    const pidBefore = await providerPid(env.h, node.id);
    assert.ok(pidBefore && pidAlive(pidBefore));
    const u = await env.h.ok<{ updateDedicatedNode: Json }>(
      `mutation($id: ID!, $i: UpdateDedicatedNodeInput!) { updateDedicatedNode(id: $id, input: $i) { status launchArgs { rpcMethods extra } } }`,
      { id: node.id, i: { launchArgs: { rpcMethods: "SAFE", extra: FAST_SUBSTRATE } } },
      owner.token,
    );
    assert.equal(u.updateDedicatedNode.launchArgs.rpcMethods, "SAFE");
    assert.equal(u.updateDedicatedNode.status, "PROVISIONING");
    // Enforced by the gateway at once, before the node has even restarted.
    const early = await rpcPost(gatewayUrl(env, node.id, node.apiKey), {
      jsonrpc: "2.0",
      id: 2,
      method: "author_rotateKeys",
    });
    assert.ok(early.status === 200 || early.status === 503, JSON.stringify(early));
    if (early.status === 200) assert.equal(early.json.error.code, -32601);
    const n = await waitNode(env.h, owner.token, node.id, (x) => x.status === "SYNCED");
    const pidAfter = await providerPid(env.h, node.id);
    assert.ok(pidAfter && pidAfter !== pidBefore, "restarted as a new process");
    assert.equal(pidAlive(pidBefore), false, "old process gone");
    const r = await rpcPost(gatewayUrl(env, node.id, node.apiKey), {
      jsonrpc: "2.0",
      id: 3,
      method: "author_rotateKeys",
      params: [],
    });
    assert.equal(r.status, 200);
    assert.equal(r.json.id, 3);
    assert.equal(r.json.error.code, -32601);
    // Batch: per element
    const b = await rpcPost(gatewayUrl(env, node.id, node.apiKey), [
      { jsonrpc: "2.0", id: 1, method: "author_insertKey", params: [] },
      { jsonrpc: "2.0", id: 2, method: "system_health" },
    ]);
    assert.equal(b.status, 200);
    assert.equal(b.json[0].error.code, -32601);
    assert.equal(b.json[1].result.isSyncing, false);
    // The node itself runs with --rpc-methods Safe now.
    const st = await rpcPost(await internalUrl(env.h.redis, env.h.names, node.id), {
      jsonrpc: "2.0",
      id: 1,
      method: "testnode_state",
    });
    assert.equal(st.json.result.rpcMethods, "Safe");
    assert.ok(step(n, "RPC methods back to Safe"));
    assert.equal(n.validator.status, "ELECTED", "validator status survives the roll");
  });

  it("WebSocket on the node endpoint: new heads from the node, SAFE refusal; regenerating the key closes it (4001) within 1 s", async () => {
    const ws = await TestWsClient.open(
      `ws://127.0.0.1:${env.dp.port}/nodes/${node.id}/${encodeURIComponent(node.apiKey)}`,
    );
    try {
      assert.equal((await ws.call("system_health", [])).result.isSyncing, false);
      const refused = await ws.call("author_rotateKeys", []);
      assert.equal(refused.error.code, -32601);
      const sub = (await ws.call("chain_subscribeNewHeads", [])).result;
      await ws.until(() => ws.notifications(sub).length >= 2, 10_000, "new heads from the node");
      const t0 = Date.now();
      const d = await env.h.ok<{ regenerateDedicatedNodeApiKey: Json }>(
        `mutation($id: ID!) { regenerateDedicatedNodeApiKey(id: $id) { apiKey } }`,
        { id: node.id },
        owner.token,
      );
      await ws.waitClosed(1000);
      assert.ok(Date.now() - t0 < 1000);
      assert.equal(ws.closeCode, 4001);
      node.apiKey = d.regenerateDedicatedNodeApiKey.apiKey as string;
    } finally {
      ws.terminate();
    }
    const refusedUpgrade = await TestWsClient.open(
      `ws://127.0.0.1:${env.dp.port}/nodes/${node.id}/not-a-key`,
    ).catch((e) => e);
    assert.equal(refusedUpgrade.status, 401);
  });

  it("regenerates the node key: the old one stops working at once", async () => {
    const d = await env.h.ok<{ regenerateDedicatedNodeApiKey: Json }>(
      `mutation($id: ID!) { regenerateDedicatedNodeApiKey(id: $id) { apiKey } }`,
      { id: node.id },
      owner.token,
    );
    const fresh = d.regenerateDedicatedNodeApiKey.apiKey as string;
    assert.notEqual(fresh, node.apiKey);
    const old = await rpcPost(gatewayUrl(env, node.id, node.apiKey), {
      jsonrpc: "2.0",
      id: 1,
      method: "system_health",
    });
    assert.equal(old.status, 401);
    const ok = await rpcPost(gatewayUrl(env, node.id, fresh), {
      jsonrpc: "2.0",
      id: 1,
      method: "system_health",
    });
    assert.equal(ok.status, 200);
    node.apiKey = fresh;
  });

  it("stop -> STOPPED (503 on the endpoint), restart -> SYNCED again", async () => {
    await env.h.ok(
      `mutation($id: ID!) { stopDedicatedNode(id: $id) { status } }`,
      { id: node.id },
      owner.token,
    );
    await waitNode(env.h, owner.token, node.id, (x) => x.status === "STOPPED");
    const pid = await providerPid(env.h, node.id);
    assert.equal(pid, undefined);
    const r = await rpcPost(gatewayUrl(env, node.id, node.apiKey), {
      jsonrpc: "2.0",
      id: 1,
      method: "system_health",
    });
    assert.equal(r.status, 503);
    assert.equal(r.json.error.code, -32603);
    await env.h.ok(
      `mutation($id: ID!) { restartDedicatedNode(id: $id) { status } }`,
      { id: node.id },
      owner.token,
    );
    await waitNode(env.h, owner.token, node.id, (x) => x.status === "SYNCED");
  });

  it("deletes: DELETING -> DELETED, the process is gone and the endpoint refused", async () => {
    const pid = await providerPid(env.h, node.id);
    assert.ok(pid && pidAlive(pid));
    const d = await env.h.ok<{ deleteDedicatedNode: Json }>(
      `mutation($id: ID!) { deleteDedicatedNode(id: $id) { status } }`,
      { id: node.id },
      owner.token,
    );
    assert.equal(d.deleteDedicatedNode.status, "DELETING");
    const r = await rpcPost(gatewayUrl(env, node.id, node.apiKey), {
      jsonrpc: "2.0",
      id: 1,
      method: "system_health",
    });
    assert.equal(r.status, 401, "key revoked at once");
    await waitNode(env.h, owner.token, node.id, (x) => x.status === "DELETED", 30_000, "status");
    const deadline = Date.now() + 5000;
    while (pidAlive(pid) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    assert.equal(pidAlive(pid), false, "process gone");
    const list = await env.h.ok<{ dedicatedNodes: Json[] }>("{ dedicatedNodes { id } }", {}, owner.token);
    assert.equal(list.dedicatedNodes.length, 0);
    assert.equal(await env.h.redis.get(env.h.names.node(node.id)), null);
  });
});
