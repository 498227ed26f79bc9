import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LaunchArgsRefusedError } from "../../../control-plane/src/nodes/launch-args";
import type { ProviderState } from "../../../control-plane/src/nodes/node.entity";
import { NodeType, RpcMethods } from "../../../control-plane/src/nodes/node.types";
import { defaultLocalCommands, LocalProcessProvider } from "../../../control-plane/src/nodes/providers/local";
import type { NodeSpec } from "../../../control-plane/src/nodes/providers/provider";
import { startWorker } from "../../../control-plane/src/worker/worker";
import { freePort } from "../../helpers/ports";
import { pidsWithEnvironment, stopPids } from "../../helpers/process";
import type { Json } from "../control-plane/harness";
import {
  DEPLOY,
  getNode,
  type NodesEnv,
  pidAlive,
  providerPid,
  rpcPost,
  setPlan,
  startNodesEnv,
  waitNode,
} from "./env";

/** What a node started before the minimal environment existed inherited from the worker (fake values). */
const SECRETS: Record<string, string> = {
  DATABASE_URL: "postgres://leak@127.0.0.1:9/leak",
  ADMIN_TOKEN: "leak-admin-token",
  KEY_ENCRYPTION_SECRET: "leak-key-encryption-secret",
};
const HOSTILE = "--fork-url=http://127.0.0.1:9/";
const ANVIL = defaultLocalCommands().evm[0]!;

/**
 * A stand-in EVM node: answers the sync sweep's calls on --port and takes any other args without acting on
 * them (a real anvil with --fork-url would try to reach that URL and exit). Loopback only.
 */
const FAKE_NODE = `
const http = require("node:http");
const port = Number(process.argv[process.argv.indexOf("--port") + 1]);
const answers = { eth_chainId: "0x539", eth_syncing: false, eth_blockNumber: "0x1", net_peerCount: "0x0" };
http.createServer((req, res) => {
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    const m = JSON.parse(body);
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: answers[m.method] ?? null }));
  });
}).listen(port, "127.0.0.1");
`;

function environOf(pid: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of readFileSync(`/proc/${pid}/environ`, "latin1").split("\0")) {
    const eq = kv.indexOf("=");
    if (eq > 0) out[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return out;
}

function taggedProcesses(nodeId: string): number[] {
  return pidsWithEnvironment((e) => e === `RG_NODE_ID=${nodeId}`).filter(pidAlive);
}

function cmdlineHas(fragment: string, pids: number[]): boolean {
  return pids.some((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").includes(fragment);
    } catch {
      return false;
    }
  });
}

async function waitAnswers(port: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const ok = await rpcPost(`http://127.0.0.1:${port}`, {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_chainId",
    }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing answers on ${port}`);
}

async function waitGone(pid: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (pidAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

/**
 * Starts a node process "the old way" (before the allow-list and minimal env): detached, tagged with the
 * node id, with the worker's full environment (fake secrets). Returns its PID.
 */
function startOldWay(cmd: string, args: string[], nodeId: string, cwd: string): number {
  const child = spawn(cmd, args, {
    detached: true,
    stdio: "ignore",
    cwd,
    env: { ...process.env, ...SECRETS, RG_NODE_ID: nodeId },
  });
  child.on("error", () => undefined);
  child.unref();
  assert.ok(child.pid);
  return child.pid!;
}

describe("dedicated nodes: running processes are vetted before they are adopted", function () {
  this.timeout(120_000);

  describe("LocalProcessProvider.provision adopt path", () => {
    let dataDir: string;
    let provider: LocalProcessProvider;
    const started: number[] = [];
    before(() => {
      dataDir = mkdtempSync(join(tmpdir(), "rg-adopt-"));
      writeFileSync(join(dataDir, "fake-node.js"), FAKE_NODE);
      const cmds = defaultLocalCommands();
      provider = new LocalProcessProvider({
        dataDir,
        substrateCommand: cmds.substrate,
        evmCommand: cmds.evm,
        startTimeoutMs: 20_000,
      });
    });
    after(async () => {
      // Besides the PIDs seen: what the provider started without a persist call, found by its HOME.
      const byHome = pidsWithEnvironment((e) => e.startsWith(`HOME=${dataDir}/`));
      await stopPids([...new Set([...started, ...byHome])].filter(pidAlive));
      rmSync(dataDir, { recursive: true, force: true });
    });

    const spec = (nodeId: string, extraArgs: string[]): NodeSpec => ({
      nodeId,
      workspaceId: "w",
      displayName: "n",
      protocol: "EVM",
      nodeType: NodeType.FULL,
      imageVersion: "test",
      image: "test",
      rpcPort: 0,
      region: "local",
      lightningRestore: false,
      rpcMethods: RpcMethods.SAFE,
      extraArgs,
      generation: 1,
    });
    const noPersist = async (s: ProviderState) => {
      const pid = (s as { pid?: number }).pid;
      if (pid) started.push(pid);
    };

    it("adopts a process it started itself (same PID)", async () => {
      const sp = spec("11111111-1111-4111-8111-111111111111", ["--chain-id", "1337"]);
      const first = await provider.provision(sp, {} as ProviderState, noPersist);
      const again = await provider.provision(sp, first.state, noPersist);
      assert.equal((again.state as { pid: number }).pid, (first.state as { pid: number }).pid);
      await provider.stop(sp, again.state);
    });

    it("replaces a process started with the worker's environment: the new one has no secrets", async () => {
      const id = "22222222-2222-4222-8222-222222222222";
      const sp = spec(id, ["--chain-id", "1337"]);
      const dir = join(dataDir, id);
      mkdirSync(join(dir, "tmp"), { recursive: true });
      // Exactly the vetted command line, so only the environment gives it away.
      const first = await provider.provision(sp, {} as ProviderState, noPersist);
      const port = (first.state as { port: number }).port;
      await provider.stop(sp, first.state);
      const old = startOldWay(
        ANVIL,
        ["--host", "127.0.0.1", "--port", String(port), "--chain-id=1337"],
        id,
        dir,
      );
      started.push(old);
      await waitAnswers(port);
      assert.equal(environOf(old).ADMIN_TOKEN, SECRETS.ADMIN_TOKEN);
      const state = { ...first.state, pid: old } as ProviderState;
      const res = await provider.provision(sp, state, noPersist);
      const pid = (res.state as { pid: number }).pid;
      assert.notEqual(pid, old, "the old-way process was not adopted");
      await waitGone(old);
      assert.equal(pidAlive(old), false, "the old-way process was stopped");
      assert.deepEqual(Object.keys(environOf(pid)).sort(), ["HOME", "LANG", "PATH", "RG_NODE_ID", "TMPDIR"]);
      assert.deepEqual(taggedProcesses(id), [pid]);
      await provider.stop(sp, res.state);
    });

    it("replaces a process whose command line carries an arg the stored args do not", async () => {
      const id = "33333333-3333-4333-8333-333333333333";
      const sp = spec(id, ["--chain-id", "1337"]);
      const dir = join(dataDir, id);
      mkdirSync(join(dir, "tmp"), { recursive: true });
      const first = await provider.provision(sp, {} as ProviderState, noPersist);
      const port = (first.state as { port: number }).port;
      await provider.stop(sp, first.state);
      // Minimal-looking env, but a flag outside the allow-list on the command line.
      const old = startOldWay(
        process.execPath,
        [
          join(dataDir, "fake-node.js"),
          "--host",
          "127.0.0.1",
          "--port",
          String(port),
          "--chain-id=1337",
          HOSTILE,
        ],
        id,
        dir,
      );
      started.push(old);
      await waitAnswers(port);
      const res = await provider.provision(sp, { ...first.state, pid: old } as ProviderState, noPersist);
      const pid = (res.state as { pid: number }).pid;
      assert.notEqual(pid, old);
      await waitGone(old);
      assert.equal(pidAlive(old), false);
      assert.equal(cmdlineHas(HOSTILE, taggedProcesses(id)), false);
      await provider.stop(sp, res.state);
    });

    it("refuses stored hostile args: throws LaunchArgsRefusedError and stops the running process", async () => {
      const id = "44444444-4444-4444-8444-444444444444";
      const dir = join(dataDir, id);
      mkdirSync(join(dir, "tmp"), { recursive: true });
      const port = await freePort();
      const old = startOldWay(
        process.execPath,
        [
          join(dataDir, "fake-node.js"),
          "--host",
          "127.0.0.1",
          "--port",
          String(port),
          "--chain-id=1337",
          HOSTILE,
        ],
        id,
        dir,
      );
      started.push(old);
      await waitAnswers(port);
      const state = { pid: old, port, generation: 1, dir } as ProviderState;
      await assert.rejects(
        provider.provision(spec(id, ["--chain-id", "1337", HOSTILE]), state, noPersist),
        (err: Error) =>
          err instanceof LaunchArgsRefusedError && /--fork-url is not allowed/.test(err.message),
      );
      await waitGone(old);
      assert.equal(pidAlive(old), false, "no process keeps running with the refused arg");
      assert.deepEqual(taggedProcesses(id), []);
    });
  });

  describe("a restarted worker (sync sweep)", () => {
    let env: NodesEnv;
    let owner: { token: string; workspaceId: string };
    const started: number[] = [];

    before(async () => {
      env = await startNodesEnv();
      writeFileSync(join(env.dataDir, "fake-node.js"), FAKE_NODE);
      owner = await env.h.signUp();
      await setPlan(env.h, owner.workspaceId, "growth");
    });
    const ids: string[] = [];
    after(async () => {
      // Anvil's command line does not name the data dir, so env.close() would not find these.
      await stopPids([...started, ...ids.flatMap(taggedProcesses)].filter(pidAlive));
      await env?.close();
    });

    const deploy = async (name: string, extra: string[]): Promise<string> => {
      const d = await env.h.ok<{ deployDedicatedNode: Json }>(
        DEPLOY,
        {
          i: {
            displayName: name,
            network: "evm-test",
            nodeType: "FULL",
            region: "local",
            lightningRestore: false,
            launchArgs: { rpcMethods: "SAFE", extra },
          },
        },
        owner.token,
      );
      ids.push(d.deployDedicatedNode.id as string);
      return d.deployDedicatedNode.id as string;
    };
    const stateOf = async (id: string): Promise<{ pid: number; port: number }> => {
      const rows = await env.h.cp.dataSource.query(
        "SELECT provider_state FROM dedicated_nodes WHERE id = $1",
        [id],
      );
      return rows[0].provider_state;
    };
    const setPid = (id: string, pid: number) =>
      env.h.cp.dataSource.query(
        `UPDATE dedicated_nodes SET provider_state = jsonb_set(provider_state, '{pid}', to_jsonb($2::int)) WHERE id = $1`,
        [id, pid],
      );

    it("replaces an old-way process (worker env) and fails a node whose stored args are refused", async () => {
      const leaky = await deploy("leaky", ["--chain-id", "1337"]);
      const hostile = await deploy("hostile", ["--chain-id", "1337"]);
      await waitNode(env.h, owner.token, leaky, (x) => x.status === "SYNCED");
      await waitNode(env.h, owner.token, hostile, (x) => x.status === "SYNCED");
      // The worker goes away (its node processes stay, as in production).
      await env.worker!.close();
      env.worker = undefined;

      // "leaky": the same vetted command line, but started with the worker's whole environment.
      const a = await stateOf(leaky);
      await stopPids([a.pid]);
      const oldA = startOldWay(
        ANVIL,
        ["--host", "127.0.0.1", "--port", String(a.port), "--chain-id=1337"],
        leaky,
        join(env.dataDir, leaky),
      );
      started.push(oldA);
      await waitAnswers(a.port);
      await setPid(leaky, oldA);

      // "hostile": a row stored before the allow-list (--fork-url), its process running with it.
      const b = await stateOf(hostile);
      await stopPids([b.pid]);
      const oldB = startOldWay(
        process.execPath,
        [
          join(env.dataDir, "fake-node.js"),
          "--host",
          "127.0.0.1",
          "--port",
          String(b.port),
          "--chain-id=1337",
          HOSTILE,
        ],
        hostile,
        join(env.dataDir, hostile),
      );
      started.push(oldB);
      await waitAnswers(b.port);
      await setPid(hostile, oldB);
      await env.h.cp.dataSource.query(
        `UPDATE dedicated_nodes SET extra_args = '["--chain-id", "1337", "${HOSTILE}"]'::jsonb WHERE id = $1`,
        [hostile],
      );

      env.worker = await startWorker(env.h.config, undefined, {
        usage: { enabled: false },
        nodes: {
          dataDir: env.dataDir,
          syncIntervalMs: 200,
          validatorIntervalMs: 200,
          jobBackoffMs: 200,
          jobAttempts: 3,
          startTimeoutMs: 20_000,
        },
      });

      // The sweep finds the process, refuses to adopt it and restarts the node: a new PID, then SYNCED.
      const deadline = Date.now() + 60_000;
      let pid = oldA;
      while (pid === oldA && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        pid = (await providerPid(env.h, leaky)) ?? oldA;
      }
      assert.notEqual(pid, oldA, "the old-way process was replaced");
      await waitNode(env.h, owner.token, leaky, (x) => x.status === "SYNCED", 60_000);
      await waitGone(oldA);
      assert.equal(pidAlive(oldA), false, "the old-way process was stopped");
      const e = environOf(pid);
      for (const k of Object.keys(SECRETS))
        assert.equal(e[k], undefined, `${k} still in the node's environment`);
      assert.deepEqual(Object.keys(e).sort(), ["HOME", "LANG", "PATH", "RG_NODE_ID", "TMPDIR"]);
      const ev = await getNode(env.h, owner.token, leaky, "events { type message }");
      assert.ok(
        (ev.events as { type: string; message: string }[]).some(
          (x) => x.type === "RESTART" && /not adoptable: its environment/.test(x.message),
        ),
        JSON.stringify(ev.events),
      );

      const h = await waitNode(env.h, owner.token, hostile, (x) => x.status === "ERROR", 60_000);
      assert.match(h.statusReason, /launch args refused: Launch flag --fork-url is not allowed/);
      await waitGone(oldB);
      assert.equal(pidAlive(oldB), false, "the process with the refused arg was stopped");
      assert.deepEqual(taggedProcesses(hostile), []);
    });
  });
});
