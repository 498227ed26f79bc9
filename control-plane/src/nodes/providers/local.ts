import { spawn } from "node:child_process";
import { closeSync, existsSync, fstatSync, openSync } from "node:fs";
import { mkdir, open, readdir, readFile, rm, stat } from "node:fs/promises";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import type { Logger } from "../../../../shared/src/log/logger";
import type { Protocol } from "../catalog";
import { LaunchArgsRefusedError, type LaunchDialect } from "../launch-args";
import type { ProviderState } from "../node.entity";
import {
  launchArgs,
  type NodeProvider,
  type NodeResources,
  type NodeSpec,
  type PersistState,
  type ProvisionResult,
} from "./provider";

/** Environment variable set on every node process: how a restarted worker finds (and adopts) it. */
export const NODE_ID_ENV = "RG_NODE_ID";

export interface LocalProviderOptions {
  /** Per-node base paths and logs live under `<dataDir>/<nodeId>`. */
  dataDir: string;
  /** Program for SUBSTRATE nodes: [executable, ...leading args]. */
  substrateCommand: string[];
  /** Program for EVM nodes. */
  evmCommand: string[];
  /** What the SUBSTRATE program takes: the test node's flags (default program) or only polkadot's. */
  substrateDialect?: LaunchDialect;
  /** How long a started node may take to answer RPC. */
  startTimeoutMs?: number;
  host?: string;
  log?: Logger;
}

interface LocalState {
  pid?: number;
  port?: number;
  generation?: number;
  dir?: string;
  logFile?: string;
}

/**
 * The whole environment of a node process. Never the worker's own: that holds DATABASE_URL, REDIS_URL,
 * ADMIN_TOKEN, KEY_ENCRYPTION_SECRET, and a tenant with unsafe RPC or a log line could read it back. HOME and
 * TMPDIR point into the node's own directory; PATH and LANG are all a node program needs besides its args.
 */
export function nodeEnv(nodeId: string, dir: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    LANG: "C.UTF-8",
    HOME: dir,
    TMPDIR: join(dir, "tmp"),
    [NODE_ID_ENV]: nodeId,
  };
}

/**
 * Keys a node process may carry besides nodeEnv's: a wrapper shell (NODE_SUBSTRATE_COMMAND may be a script)
 * adds PWD (dash) or SHLVL / OLDPWD / _ (bash) when it execs the node program. None holds worker data.
 */
const SHELL_ENV_KEYS = ["PWD", "OLDPWD", "SHLVL", "_"];

/**
 * Why a running node process must not be adopted (null: it may). Processes are detached and adopted by PID
 * across worker restarts, so one started before the launch-arg allow-list or the minimal environment existed
 * would otherwise keep hostile args (e.g. --fork-url) and the worker's secrets (DATABASE_URL, ADMIN_TOKEN,
 * KEY_ENCRYPTION_SECRET) for good. Its command line must END with exactly the vetted argv (what precedes it
 * is the program: executable, script, interpreter; none of it may look like a flag) and its environment may
 * hold only nodeEnv's keys (HOME / TMPDIR in the node's own dir) plus what a wrapper shell adds.
 */
async function adoptionProblem(
  pid: number,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<string | null> {
  let cmdline: string[];
  let environ: string[];
  try {
    cmdline = (await readFile(`/proc/${pid}/cmdline`, "utf8")).split("\0");
    environ = (await readFile(`/proc/${pid}/environ`, "latin1")).split("\0");
  } catch {
    return "its /proc entry cannot be read";
  }
  if (cmdline.at(-1) === "") cmdline.pop();
  const lead = cmdline.length - args.length;
  if (
    lead < 1 ||
    args.some((a, i) => cmdline[lead + i] !== a) ||
    cmdline.slice(0, lead).some((a) => a.startsWith("-"))
  ) {
    return "its command line is not the vetted launch args";
  }
  for (const kv of environ) {
    if (kv === "") continue;
    const eq = kv.indexOf("=");
    const key = eq < 0 ? kv : kv.slice(0, eq);
    if (key in env) {
      if (key !== "PATH" && kv.slice(eq + 1) !== env[key]) return `its environment has a foreign ${key}`;
    } else if (!SHELL_ENV_KEYS.includes(key)) {
      return "its environment holds more than the node's minimal keys";
    }
  }
  return null;
}

/** Default programs: the Substrate test node CLI (built into dist/) and anvil from its npm package. */
export function defaultLocalCommands(): { substrate: string[]; evm: string[] } {
  // dist/control-plane/src/nodes/providers -> dist/test/substrate-node/main.js
  const substrateMain = resolve(__dirname, "../../../../test/substrate-node/main.js");
  let anvil = "anvil";
  try {
    anvil = require.resolve("@foundry-rs/anvil-linux-amd64/bin/anvil");
  } catch {
    // fall back to PATH
  }
  return { substrate: [process.execPath, substrateMain], evm: [anvil] };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** True when `pid` is a process started for `nodeId` (guards against PID reuse). */
async function isNodeProcess(pid: number, nodeId: string): Promise<boolean> {
  try {
    const environ = await readFile(`/proc/${pid}/environ`, "latin1");
    const stat = await readFile(`/proc/${pid}/stat`, "latin1");
    // A zombie (state Z) is gone for our purposes.
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && environ.split("\0").includes(`${NODE_ID_ENV}=${nodeId}`);
  } catch {
    return false;
  }
}

async function parentPid(pid: number): Promise<number> {
  const st = await readFile(`/proc/${pid}/stat`, "latin1").catch(() => "");
  return Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1] ?? 0);
}

/**
 * Live node programs carrying the node's id (normally zero or one): processes tagged RG_NODE_ID whose
 * parent is not itself tagged (a wrapper's children inherit the tag and are not separate nodes).
 */
async function findNodeProcesses(nodeId: string, all = false): Promise<number[]> {
  const tagged = new Set<number>();
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === process.pid) continue;
    if (await isNodeProcess(pid, nodeId)) tagged.add(pid);
  }
  if (all) return [...tagged];
  const roots: number[] = [];
  for (const pid of tagged) if (!tagged.has(await parentPid(pid))) roots.push(pid);
  return roots;
}

function portFree(port: number, host: string): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.once("error", () => res(false));
    srv.listen(port, host, () => srv.close(() => res(true)));
  });
}

function freePort(host: string): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once("error", rej);
    srv.listen(0, host, () => {
      const a = srv.address();
      if (a === null || typeof a === "string") return rej(new Error("no port"));
      srv.close(() => res(a.port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function rpcAnswers(url: string, protocol: string): Promise<boolean> {
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: protocol === "EVM" ? "eth_chainId" : "system_health",
      }),
      signal: AbortSignal.timeout(1000),
    });
    return res.ok;
  } catch {
    return false;
  }
}

async function tailFile(path: string, lines: number): Promise<string[]> {
  if (!existsSync(path)) return [];
  const fh = await open(path, "r");
  try {
    const { size } = await fh.stat();
    const want = Math.min(size, Math.max(4096, lines * 400));
    const buf = Buffer.alloc(want);
    await fh.read(buf, 0, want, size - want);
    const all = buf.toString("utf8").split("\n");
    if (all.at(-1) === "") all.pop();
    if (want < size) all.shift(); // probably a partial line
    return all.slice(-lines);
  } finally {
    await fh.close();
  }
}

async function du(path: string): Promise<number> {
  let total = 0;
  let entries: import("node:fs").Dirent[];
  try {
    entries = await readdir(path, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = join(path, e.name);
    if (e.isDirectory()) total += await du(p);
    else
      total += await stat(p).then(
        (s) => s.size,
        () => 0,
      );
  }
  return total;
}

const CLK_TCK = 100;

async function cpuSeconds(pid: number): Promise<number> {
  const s = await readFile(`/proc/${pid}/stat`, "latin1");
  const fields = s.slice(s.lastIndexOf(")") + 2).split(" ");
  // fields[0] = state (field 3); utime = field 14, stime = field 15
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

async function rssBytes(pid: number): Promise<number> {
  const s = await readFile(`/proc/${pid}/status`, "latin1");
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(s);
  return m ? Number(m[1]) * 1024 : 0;
}

/**
 * Runs each node as a child process of the worker on this machine (the default provider). The process is
 * detached (own process group) and tagged with RG_NODE_ID, so it outlives a worker restart and the next
 * worker adopts it; pid and port are persisted right after spawn.
 */
export class LocalProcessProvider implements NodeProvider {
  readonly name = "local";
  private readonly host: string;

  constructor(private readonly opts: LocalProviderOptions) {
    this.host = opts.host ?? "127.0.0.1";
  }

  dialect(protocol: Protocol): LaunchDialect {
    return protocol === "EVM" ? "anvil" : (this.opts.substrateDialect ?? "substrate-test-node");
  }

  private dirOf(nodeId: string): string {
    return join(this.opts.dataDir, nodeId);
  }

  private endpoints(port: number) {
    return { httpUrl: `http://${this.host}:${port}`, wsUrl: `ws://${this.host}:${port}` };
  }

  async provision(spec: NodeSpec, state: ProviderState, persist: PersistState): Promise<ProvisionResult> {
    const s = state as LocalState;
    const running = await findNodeProcesses(spec.nodeId);
    if (running.length === 1 && s.pid === running[0] && s.port && s.generation === spec.generation) {
      // Adopt only what a vetted start would have run: the stored args are re-checked (a refusal stops the
      // process and fails the node) and the process's own command line and environment are read back.
      const problem = await this.vetRunning(spec, s.pid, s.port);
      if (problem === null) {
        await this.waitReady(spec, s.pid, s.port, s.logFile ?? join(this.dirOf(spec.nodeId), "node.log"));
        return { state: s as ProviderState, endpoints: this.endpoints(s.port) };
      }
      this.opts.log?.warn(
        { nodeId: spec.nodeId, pid: s.pid, problem },
        "node process not adopted; restarting it",
      );
    }
    for (const pid of running) await this.kill(pid);
    return this.start(spec, s, persist);
  }

  /**
   * Null when the running process `pid` is exactly what start() would spawn now (vetted args, minimal env);
   * else why not. Throws LaunchArgsRefusedError, after stopping every process of the node, when the stored
   * args are refused: no process may keep running with them.
   */
  private async vetRunning(spec: NodeSpec, pid: number, port: number): Promise<string | null> {
    let args: string[];
    try {
      args = this.argv(spec, port).args;
    } catch (err) {
      if (err instanceof LaunchArgsRefusedError) await this.stop(spec, {} as ProviderState);
      throw err;
    }
    const dir = this.dirOf(spec.nodeId);
    return adoptionProblem(pid, args, nodeEnv(spec.nodeId, dir));
  }

  /** The node program and its full launch args (vetted: throws LaunchArgsRefusedError). */
  private argv(spec: NodeSpec, port: number): { cmd: string; args: string[] } {
    const [cmd, ...lead] = spec.protocol === "EVM" ? this.opts.evmCommand : this.opts.substrateCommand;
    if (!cmd) throw new Error(`no program configured for ${spec.protocol} nodes`);
    const basePath = join(this.dirOf(spec.nodeId), "data");
    const dialect = this.dialect(spec.protocol);
    const args =
      spec.protocol === "EVM"
        ? ["--host", this.host, ...launchArgs(spec, { port, basePath, dialect })]
        : [...launchArgs(spec, { port, basePath, dialect })];
    return { cmd, args: [...lead, ...args] };
  }

  async roll(spec: NodeSpec, state: ProviderState, persist: PersistState): Promise<ProvisionResult> {
    const s = state as LocalState;
    if (s.generation === spec.generation && s.pid && (await isNodeProcess(s.pid, spec.nodeId))) {
      return this.provision(spec, state, persist); // this roll already happened (retry): adopt
    }
    for (const pid of await findNodeProcesses(spec.nodeId)) await this.kill(pid);
    return this.start(spec, s, persist);
  }

  private async start(spec: NodeSpec, prev: LocalState, persist: PersistState): Promise<ProvisionResult> {
    const dir = this.dirOf(spec.nodeId);
    const basePath = join(dir, "data");
    await mkdir(basePath, { recursive: true });
    const logFile = join(dir, "node.log");
    const port = prev.port && (await portFree(prev.port, this.host)) ? prev.port : await freePort(this.host);
    // Before anything is spawned: a stored arg outside the allow-list fails the job here.
    const { cmd, args } = this.argv(spec, port);
    await mkdir(join(dir, "tmp"), { recursive: true });
    const fd = openSync(logFile, "a");
    const logOffset = fstatSync(fd).size;
    let pid: number | undefined;
    try {
      const child = spawn(cmd, args, {
        detached: true,
        stdio: ["ignore", fd, fd],
        env: nodeEnv(spec.nodeId, dir),
        cwd: dir,
      });
      pid = child.pid;
      child.on("error", () => undefined);
      child.unref();
    } finally {
      closeSync(fd);
    }
    if (pid === undefined) throw new Error(`could not start ${cmd}`);
    const next: LocalState = { pid, port, generation: spec.generation, dir, logFile };
    await persist(next as ProviderState);
    this.opts.log?.info({ nodeId: spec.nodeId, pid, port }, "node process started");
    await this.waitReady(spec, pid, port, logFile, logOffset);
    return { state: next as ProviderState, endpoints: this.endpoints(port) };
  }

  private async waitReady(
    spec: NodeSpec,
    pid: number,
    port: number,
    logFile: string,
    logOffset = 0,
  ): Promise<void> {
    const url = this.endpoints(port).httpUrl;
    const deadline = Date.now() + (this.opts.startTimeoutMs ?? 30_000);
    while (Date.now() < deadline) {
      if (!(await isNodeProcess(pid, spec.nodeId))) {
        const text = await readFile(logFile, "utf8").catch(() => "");
        const tail = Buffer.from(text)
          .subarray(logOffset)
          .toString("utf8")
          .trim()
          .split("\n")
          .slice(-5)
          .join(" | ");
        throw new Error(`node process exited during start: ${tail}`);
      }
      if (await rpcAnswers(url, spec.protocol)) return;
      await sleep(100);
    }
    throw new Error(`node did not answer RPC within ${this.opts.startTimeoutMs ?? 30_000} ms`);
  }

  private async kill(pid: number, graceMs = 5000): Promise<void> {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      return;
    }
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline) {
      if (!alive(pid)) return;
      // A detached child of this process that exited stays a zombie until reaped by Node (it is, async).
      const st = await readFile(`/proc/${pid}/stat`, "latin1").catch(() => "");
      if (st === "" || st.slice(st.lastIndexOf(")") + 2).startsWith("Z")) return;
      await sleep(50);
    }
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }

  async stop(spec: NodeSpec, state: ProviderState): Promise<ProviderState> {
    for (const pid of await findNodeProcesses(spec.nodeId)) await this.kill(pid);
    // Leftovers (children of a wrapper that inherited the tag).
    for (const pid of await findNodeProcesses(spec.nodeId, true)) await this.kill(pid, 1000);
    const s = state as LocalState;
    return { ...s, pid: undefined } as ProviderState;
  }

  async delete(spec: NodeSpec, state: ProviderState): Promise<void> {
    await this.stop(spec, state);
    await rm(this.dirOf(spec.nodeId), { recursive: true, force: true });
  }

  /**
   * A live process that fails the adoption check (see vetRunning) counts as not running, with the reason:
   * the sync sweep then restarts the node through provision, which replaces it (or fails the node when its
   * stored args are refused). This is how a worker restart catches nodes started before the checks existed.
   */
  async status(spec: NodeSpec, state: ProviderState): Promise<{ running: boolean; reason?: string }> {
    const s = state as LocalState;
    if (s.pid === undefined || !(await isNodeProcess(s.pid, spec.nodeId))) return { running: false };
    if (!s.port) return { running: true };
    let problem: string | null;
    try {
      const { args } = this.argv(spec, s.port);
      problem = await adoptionProblem(s.pid, args, nodeEnv(spec.nodeId, this.dirOf(spec.nodeId)));
    } catch (err) {
      problem = (err as Error).message;
    }
    return problem === null
      ? { running: true }
      : { running: false, reason: `node process not adoptable: ${problem}` };
  }

  async logs(spec: NodeSpec, state: ProviderState, tail: number): Promise<string[]> {
    const s = state as LocalState;
    return tailFile(s.logFile ?? join(this.dirOf(spec.nodeId), "node.log"), tail);
  }

  async resources(spec: NodeSpec, state: ProviderState): Promise<NodeResources> {
    const s = state as LocalState;
    const storage = await du(this.dirOf(spec.nodeId));
    if (!s.pid || !(await isNodeProcess(s.pid, spec.nodeId))) return { cpu: 0, memory: 0, storage };
    try {
      const t0 = performance.now();
      const c0 = await cpuSeconds(s.pid);
      await sleep(200);
      const c1 = await cpuSeconds(s.pid);
      const wall = (performance.now() - t0) / 1000;
      return { cpu: Math.max(0, (c1 - c0) / wall), memory: await rssBytes(s.pid), storage };
    } catch {
      return { cpu: 0, memory: 0, storage };
    }
  }
}
