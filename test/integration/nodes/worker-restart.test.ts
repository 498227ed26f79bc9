import assert from "node:assert/strict";
import { chmodSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { JobName, nodeJobId, QueueName } from "../../../shared/src/queue/names";
import { type StartedProcess, startProcess } from "../../helpers/process";
import { TEST_REDIS_URL } from "../../helpers/redis";
import { ADMIN_TOKEN, type Json } from "../control-plane/harness";
import {
  DEPLOY,
  FAST_SUBSTRATE,
  getNode,
  type NodesEnv,
  pidAlive,
  providerPid,
  setPlan,
  startNodesEnv,
  waitNode,
} from "./env";

const WORKER_MAIN = resolve(__dirname, "../../../control-plane/src/worker/main.js");
const TEST_NODE_MAIN = resolve(__dirname, "../../substrate-node/main.js");

/** Live processes tagged with the node's id whose parent is not tagged (the node programs). */
function nodeProcesses(nodeId: string): number[] {
  const tagged = taggedProcesses(nodeId);
  return tagged.filter((pid) => {
    const st = readFileSync(`/proc/${pid}/stat`, "latin1");
    return !tagged.includes(Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1]));
  });
}

function taggedProcesses(nodeId: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/environ`, "latin1").split("\0").includes(`RG_NODE_ID=${nodeId}`)) {
        if (pidAlive(Number(name))) out.push(Number(name));
      }
    } catch {
      // gone or not ours
    }
  }
  return out;
}

describe("dedicated nodes: a worker killed mid-provisioning", function () {
  this.timeout(120_000);
  let env: NodesEnv;
  let workerEnv: Record<string, string>;
  const workers: StartedProcess[] = [];

  before(async () => {
    env = await startNodesEnv({ worker: false });
    // A node program that takes 3 s before it starts (so provisioning is slow enough to be interrupted).
    const slow = join(env.dataDir, "slow-node.sh");
    writeFileSync(slow, `#!/bin/sh\nsleep 3\nexec "${process.execPath}" "${TEST_NODE_MAIN}" "$@"\n`);
    chmodSync(slow, 0o755);
    workerEnv = {
      DATABASE_URL: env.h.db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_KEY_PREFIX: env.h.ns.prefix,
      ADMIN_TOKEN,
      KEY_ENCRYPTION_SECRET: "test-key-encryption-secret-xyz",
      LOG_LEVEL: "info",
      NODES_DATA_DIR: env.dataDir,
      NODE_SUBSTRATE_COMMAND: slow,
      // The wrapper runs the test node, so its test-only flags (FAST_SUBSTRATE) are allowed.
      NODE_SUBSTRATE_FLAGS: "test-node",
      NODE_JOB_LOCK_MS: "2000",
      NODE_SYNC_INTERVAL_MS: "200",
      NODE_VALIDATOR_INTERVAL_MS: "1000",
      USAGE_INGEST_ENABLED: "false",
    };
  });
  after(async () => {
    for (const w of workers) await w.stop();
    await env?.close();
  });

  const startWorkerProcess = async () => {
    const w = await startProcess(process.execPath, [WORKER_MAIN], {
      env: workerEnv,
      readyLine: /node worker started/,
      timeoutMs: 30_000,
    });
    workers.push(w);
    return w;
  };

  it("resumes: the retried job adopts the node process and the node reaches SYNCED", async () => {
    const owner = await env.h.signUp();
    await setPlan(env.h, owner.workspaceId, "growth");
    const first = await startWorkerProcess();
    const d = await env.h.ok<{ deployDedicatedNode: Json }>(
      DEPLOY,
      {
        i: {
          displayName: "resumed",
          network: "dot-test",
          nodeType: "FULL",
          region: "local",
          lightningRestore: false,
          launchArgs: { rpcMethods: "SAFE", extra: FAST_SUBSTRATE },
        },
      },
      owner.token,
    );
    const id = d.deployDedicatedNode.id as string;
    // Wait until the worker is inside provisioning with the process spawned (pid persisted).
    const deadline = Date.now() + 20_000;
    let pid: number | undefined;
    while (Date.now() < deadline) {
      const n = await getNode(env.h, owner.token, id, "status");
      pid = await providerPid(env.h, id);
      if (n.status === "PROVISIONING" && pid) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(pid, "process spawned during provisioning");
    assert.equal((await getNode(env.h, owner.token, id, "status")).status, "PROVISIONING");
    // Kill the worker by PID, hard, mid-provisioning.
    first.child.kill("SIGKILL");
    await new Promise<void>((r) => first.child.once("exit", () => r()));
    assert.equal((await getNode(env.h, owner.token, id, "status")).status, "PROVISIONING");

    await startWorkerProcess();
    const n = await waitNode(env.h, owner.token, id, (x) => x.status === "SYNCED", 60_000);
    assert.ok(n.syncStatus.currentBlock >= 30);
    assert.deepEqual(nodeProcesses(id), [pid], "the one process started before the kill was adopted");
    const ev = await getNode(env.h, owner.token, id, "events { type message }");
    const attempts = (ev.events as { message: string }[]).filter((e) => /^Provisioning/.test(e.message));
    assert.ok(attempts.length >= 2, JSON.stringify(ev.events));

    await env.h.ok(`mutation($id: ID!) { deleteDedicatedNode(id: $id) { id } }`, { id }, owner.token);
    await waitNode(env.h, owner.token, id, (x) => x.status === "DELETED", 30_000, "status");
    assert.deepEqual(taggedProcesses(id), []);
  });

  it("shuts down gracefully on SIGTERM", async () => {
    const w = workers.at(-1)!;
    const code = await w.stop(10_000);
    assert.equal(code, 0, w.output().slice(-2000));
  });

  it("a lost job (enqueue failed, Redis flushed) is reconciled by the sweep", async () => {
    const owner = await env.h.signUp();
    await setPlan(env.h, owner.workspaceId, "growth");
    const d = await env.h.ok<{ deployDedicatedNode: Json }>(
      DEPLOY,
      {
        i: {
          displayName: "lost",
          network: "dot-test",
          nodeType: "FULL",
          region: "local",
          lightningRestore: false,
          launchArgs: { rpcMethods: "SAFE", extra: FAST_SUBSTRATE },
        },
      },
      owner.token,
    );
    const id = d.deployDedicatedNode.id as string;
    const conn = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
    const q = new Queue(QueueName.Nodes, { connection: conn, prefix: env.h.names.bullPrefix() });
    try {
      assert.equal(await q.remove(nodeJobId(JobName.ProvisionNode, id, 1)), 1, "the job existed");
    } finally {
      await q.close();
      conn.disconnect();
    }
    await startWorkerProcess();
    await waitNode(env.h, owner.token, id, (x) => x.status === "SYNCED", 60_000);
    await env.h.ok(`mutation($id: ID!) { deleteDedicatedNode(id: $id) { id } }`, { id }, owner.token);
    await waitNode(env.h, owner.token, id, (x) => x.status === "DELETED", 30_000, "status");
  });
});
