import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";
import { type DataPlane, startDataPlane } from "../../../data-plane/src/data-plane";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import { NodeRecordSchema } from "../../../shared/src/redis/records";
import { pidsWithArgument, pidsWithEnvironment, stopPids } from "../../helpers/process";
import type { TestRedisTarget } from "../../helpers/redis";
import { ADMIN_TOKEN, type Harness, type Json, startHarness } from "../control-plane/harness";

export const NODE_FIELDS = `id displayName nodeType status statusReason imageVersion region workspaceId
  network { slug protocol }
  syncStatus { currentBlock highestBlock peers }
  endpoints { httpUrl wsUrl }
  validator { stash status }
  validatorSetup { steps { name done } }
  launchArgs { rpcMethods extra }
  apiKey`;

export interface NodesEnv {
  h: Harness;
  dp: DataPlane;
  worker?: ControlPlaneWorker;
  dataDir: string;
  base: string;
  close(): Promise<void>;
}

/** Fast sync settings for the Substrate test node. */
export const FAST_SUBSTRATE = ["--sync-target", "30", "--sync-rate", "300", "--block-time-ms", "300"];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Control plane (in process) + networks + data plane (in process) + optionally an in-process worker, on a
 * fresh database, Redis namespace and nodes data dir.
 */
export async function startNodesEnv(
  opts: {
    worker?: boolean;
    workerEnv?: Record<string, string>;
    harnessEnv?: Record<string, string>;
    redis?: TestRedisTarget;
  } = {},
): Promise<NodesEnv> {
  const dataDir = mkdtempSync(join(tmpdir(), "rg-nodes-"));
  process.env.NODES_DATA_DIR = dataDir;
  // Read by the control plane's NodeService when it enqueues jobs.
  process.env.NODE_JOB_ATTEMPTS = "3";
  process.env.NODE_JOB_BACKOFF_MS = "200";
  const h = await startHarness(opts.harnessEnv ?? {}, { redis: opts.redis });
  await h.ok(
    `mutation { a: createNetwork(input: { slug: "dot-test", name: "Substrate test", protocol: SUBSTRATE }) { id }
      b: createNetwork(input: { slug: "evm-test", name: "EVM test", protocol: EVM, chainId: 31337 }) { id } }`,
    {},
    ADMIN_TOKEN,
  );
  let worker: ControlPlaneWorker | undefined;
  if (opts.worker !== false) {
    worker = await startWorker(h.config, undefined, {
      usage: { enabled: false },
      nodes: {
        dataDir,
        syncIntervalMs: 200,
        validatorIntervalMs: 200,
        jobBackoffMs: 200,
        jobAttempts: 3,
        startTimeoutMs: 20_000,
      },
    });
  }
  const config = loadDataPlaneConfig({
    REDIS_KEY_PREFIX: h.ns.prefix,
    DATA_PLANE_PORT: "0",
    DATA_PLANE_HOST: "127.0.0.1",
    LOG_LEVEL: process.env.LOG_LEVEL ?? "silent",
    ...h.ns.redis.env(),
  });
  const dp = await startDataPlane(config);
  const env: NodesEnv = {
    h,
    dp,
    worker,
    dataDir,
    base: `http://127.0.0.1:${dp.port}`,
    async close() {
      await dp.close();
      // The current worker: a test may have replaced it (a worker restart).
      await env.worker?.close();
      await h.close();
      // Node programs outlive the worker on purpose (a restarted worker adopts them), so stop the ones this
      // env started: every one runs with its base path, or its wrapper script, inside this env's data dir.
      // Anvil's command line does not name the data dir: it is found by its HOME (the node's dir inside it).
      await stopPids([
        ...new Set([
          ...pidsWithArgument(dataDir),
          ...pidsWithEnvironment((e) => e.startsWith(`HOME=${dataDir}/`)),
        ]),
      ]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return env;
}

export async function setPlan(h: Harness, workspaceId: string, plan: string): Promise<void> {
  await h.ok(
    `mutation($w: ID!, $p: String!) { setWorkspacePlan(workspaceId: $w, plan: $p) { id } }`,
    { w: workspaceId, p: plan },
    ADMIN_TOKEN,
  );
}

export async function getNode(h: Harness, token: string, id: string, fields = NODE_FIELDS): Promise<Json> {
  const d = await h.ok<{ dedicatedNode: Json }>(
    `query($id: ID!) { dedicatedNode(id: $id) { ${fields} } }`,
    { id },
    token,
  );
  return d.dedicatedNode;
}

/** Polls `dedicatedNode` until `pred` holds (or fails with the last state seen). */
export async function waitNode(
  h: Harness,
  token: string,
  id: string,
  pred: (n: Json) => boolean,
  timeoutMs = 30_000,
  fields = NODE_FIELDS,
): Promise<Json> {
  const deadline = Date.now() + timeoutMs;
  let last: Json = {};
  while (Date.now() < deadline) {
    last = await getNode(h, token, id, fields);
    if (pred(last)) return last;
    await sleep(100);
  }
  const ev = await getNode(h, token, id, "events { type message }");
  throw new Error(
    `node ${id} did not reach the expected state: ${JSON.stringify(last)}\nevents: ${JSON.stringify(ev)}`,
  );
}

export async function rpcPost(url: string, body: unknown): Promise<{ status: number; json: Json }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : {} };
}

/** The node's internal URL (what the data plane forwards to), for test-only control calls. */
export async function internalUrl(redis: RedisClient, names: RedisNames, nodeId: string): Promise<string> {
  const raw = await redis.get(names.node(nodeId));
  if (!raw) throw new Error("no node record");
  const rec = NodeRecordSchema.parse(JSON.parse(raw));
  if (!rec.httpUrl) throw new Error("node record without URL");
  return rec.httpUrl;
}

/** Gateway URL of the node's endpoint on the test data plane. */
export function gatewayUrl(env: NodesEnv, nodeId: string, key: string): string {
  return `${env.base}/nodes/${nodeId}/${encodeURIComponent(key)}`;
}

/** True while `pid` is a live (non-zombie) process. */
export function pidAlive(pid: number): boolean {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, "latin1");
    return !st.slice(st.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return false;
  }
}

export async function providerPid(h: Harness, nodeId: string): Promise<number | undefined> {
  const rows: { provider_state: { pid?: number } }[] = await h.cp.dataSource.query(
    "SELECT provider_state FROM dedicated_nodes WHERE id = $1",
    [nodeId],
  );
  return rows[0]?.provider_state.pid;
}

export const DEPLOY = `mutation($i: DeployDedicatedNodeInput!) { deployDedicatedNode(input: $i) { ${NODE_FIELDS} } }`;
