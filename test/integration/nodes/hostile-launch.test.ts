import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pidsWithArgument } from "../../helpers/process";
import { code, type Json } from "../control-plane/harness";
import {
  DEPLOY,
  FAST_SUBSTRATE,
  gatewayUrl,
  type NodesEnv,
  providerPid,
  rpcPost,
  setPlan,
  startNodesEnv,
  waitNode,
} from "./env";

/** Values a leaked worker environment would carry (set in this process; a node must not see them). */
const SECRETS: Record<string, string> = {
  DATABASE_URL: "postgres://leak@127.0.0.1:9/leak",
  ADMIN_TOKEN: "leak-admin-token",
  KEY_ENCRYPTION_SECRET: "leak-key-encryption-secret",
  REDIS_URL: "redis://127.0.0.1:9/0",
};

function environOf(pid: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of readFileSync(`/proc/${pid}/environ`, "latin1").split("\0")) {
    const eq = kv.indexOf("=");
    if (eq > 0) out[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return out;
}

/** Hostile launch args of issue 13, loopback values only. [network, extra, flag named in the error]. */
const HOSTILE: [string, string[], string][] = [
  ["evm-test", ["--fork-url", "http://127.0.0.1:9/"], "--fork-url"],
  ["evm-test", ["--fork-url=http://127.0.0.1:9/"], "--fork-url"],
  ["evm-test", ["--dump-state", "/tmp/x"], "--dump-state"],
  ["evm-test", ["--config-out", "/tmp/x"], "--config-out"],
  ["evm-test", ["--load-state", "/tmp/x"], "--load-state"],
  ["evm-test", ["--state", "/tmp/x"], "--state"],
  ["evm-test", ["--ipc"], "--ipc"],
  ["evm-test", ["--host", "0.0.0.0"], "--host"],
  ["evm-test", ["--allow-origin", "*"], "--allow-origin"],
  ["evm-test", ["--accounts", "--fork-url=http://127.0.0.1:9/"], "--accounts"],
  ["evm-test", ["--accounts=2", "--accounts=3"], "--accounts"],
  ["evm-test", ["\u2010\u2010fork-url", "http://127.0.0.1:9/"], "\u2010\u2010fork-url"],
  ["evm-test", ["--accounts", "1000000"], "--accounts"],
  ["dot-test", ["--unsafe-rpc-external"], "--unsafe-rpc-external"],
  ["dot-test", ["--rpc-cors", "all"], "--rpc-cors"],
  ["dot-test", ["--rpc-cors=all"], "--rpc-cors"],
  ["dot-test", ["--chain", "/etc/passwd"], "--chain"],
  ["dot-test", ["--rpc-methods=Unsafe"], "--rpc-methods"],
  ["dot-test", ["--sync-rate", "not-a-number"], "--sync-rate"],
  ["dot-test", ["--http.api", "eth,admin,personal"], "--http.api"],
];

describe("dedicated nodes: hostile launch args and the node's environment", function () {
  this.timeout(120_000);
  let env: NodesEnv;
  let owner: { token: string; workspaceId: string };
  const saved: Record<string, string | undefined> = {};

  before(async () => {
    env = await startNodesEnv();
    // Set after the harness and worker read their config (they keep using the real ones); a node process that
    // inherited the worker's environment would carry these.
    for (const [k, v] of Object.entries(SECRETS)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    owner = await env.h.signUp();
    await setPlan(env.h, owner.workspaceId, "growth");
  });
  after(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await env?.close();
  });

  const input = (network: string, extra: string[], over: Json = {}): Json => ({
    displayName: "n",
    network,
    nodeType: "FULL",
    region: "local",
    lightningRestore: false,
    launchArgs: { rpcMethods: "SAFE", extra },
    ...over,
  });

  it("deploy with each hostile arg: BAD_USER_INPUT naming the flag; no row, no process", async () => {
    for (const [network, extra, flag] of HOSTILE) {
      const r = await env.h.gql(DEPLOY, { i: input(network, extra) }, owner.token);
      assert.equal(code(r), "BAD_USER_INPUT", `${JSON.stringify(extra)}: ${JSON.stringify(r.errors)}`);
      assert.equal(r.errors?.[0]?.extensions?.field, "launchArgs");
      assert.ok(r.errors![0]!.message.includes(flag), `${r.errors![0]!.message} should name ${flag}`);
    }
    const l = await env.h.ok<{ dedicatedNodes: Json[] }>("{ dedicatedNodes { id } }", {}, owner.token);
    assert.equal(l.dedicatedNodes.length, 0);
    const rows = await env.h.cp.dataSource.query("SELECT count(*)::int AS n FROM dedicated_nodes");
    assert.equal(rows[0].n, 0);
    assert.deepEqual(pidsWithArgument(env.dataDir), []);
  });

  let evmId: string;
  it("allowed flags pass and the node runs with them (anvil --chain-id, --accounts)", async () => {
    const d = await env.h.ok<{ deployDedicatedNode: Json }>(
      DEPLOY,
      { i: input("evm-test", ["--chain-id", "1337", "--accounts=2"], { displayName: "evm" }) },
      owner.token,
    );
    evmId = d.deployDedicatedNode.id;
    await waitNode(env.h, owner.token, evmId, (x) => x.status === "SYNCED");
    const r = await rpcPost(gatewayUrl(env, evmId, d.deployDedicatedNode.apiKey), {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_chainId",
    });
    assert.equal(r.json.result, "0x539");
  });

  it("update with a hostile arg is refused and changes nothing", async () => {
    const r = await env.h.gql(
      `mutation($id: ID!, $i: UpdateDedicatedNodeInput!) { updateDedicatedNode(id: $id, input: $i) { id } }`,
      { id: evmId, i: { launchArgs: { rpcMethods: "SAFE", extra: ["--dump-state", "/tmp/x"] } } },
      owner.token,
    );
    assert.equal(code(r), "BAD_USER_INPUT");
    assert.match(r.errors![0]!.message, /--dump-state is not allowed/);
    const rows = await env.h.cp.dataSource.query(
      "SELECT extra_args, generation FROM dedicated_nodes WHERE id = $1",
      [evmId],
    );
    assert.deepEqual(rows[0].extra_args, ["--chain-id", "1337", "--accounts=2"]);
    assert.equal(rows[0].generation, 1);
  });

  it("node processes start with a minimal environment: no worker secrets", async () => {
    const d = await env.h.ok<{ deployDedicatedNode: Json }>(
      DEPLOY,
      { i: input("dot-test", FAST_SUBSTRATE, { displayName: "dot" }) },
      owner.token,
    );
    const dotId = d.deployDedicatedNode.id as string;
    await waitNode(env.h, owner.token, dotId, (x) => x.status === "SYNCED");
    for (const id of [evmId, dotId]) {
      const pid = await providerPid(env.h, id);
      assert.ok(pid);
      const e = environOf(pid!);
      for (const k of Object.keys(SECRETS)) assert.equal(e[k], undefined, `${k} leaked into node ${id}`);
      assert.deepEqual(Object.keys(e).sort(), ["HOME", "LANG", "PATH", "RG_NODE_ID", "TMPDIR"]);
      assert.equal(e.HOME, join(env.dataDir, id));
      assert.equal(e.TMPDIR, join(env.dataDir, id, "tmp"));
      assert.equal(e.RG_NODE_ID, id);
    }
    // Sanity: the secrets were in this process's environment, so a copied env would have carried them.
    for (const [k, v] of Object.entries(SECRETS)) assert.equal(process.env[k], v);
  });
});
