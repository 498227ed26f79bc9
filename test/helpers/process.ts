import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

export interface StartedProcess {
  pid: number;
  child: ChildProcess;
  /** Everything the process printed so far (stdout + stderr), for failure messages. */
  output(): string;
  /** Stops exactly this process (by PID): SIGTERM, then SIGKILL after `graceMs`. Resolves on exit. */
  stop(graceMs?: number): Promise<number | null>;
}

export interface StartOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Resolve once the output matches this; otherwise resolve once `ready()` returns true. */
  readyLine?: RegExp;
  ready?: () => Promise<boolean>;
  timeoutMs?: number;
}

export async function startProcess(
  cmd: string,
  args: string[],
  opts: StartOptions = {},
): Promise<StartedProcess> {
  const child = spawn(cmd, args, {
    env: { ...process.env, ...opts.env },
    cwd: opts.cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const onData = (d: Buffer) => {
    out += d.toString();
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let alive = true;
  void exited.then(() => {
    alive = false;
  });

  const started: StartedProcess = {
    pid: child.pid ?? -1,
    child,
    output: () => out,
    async stop(graceMs = 5000) {
      if (!alive) return child.exitCode;
      child.kill("SIGTERM");
      const timer = setTimeout(() => alive && child.kill("SIGKILL"), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
  if (child.pid === undefined) throw new Error(`could not start ${cmd}`);

  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  while (Date.now() < deadline) {
    if (!alive) throw new Error(`${cmd} exited before it was ready:\n${out}`);
    if (opts.readyLine?.test(out)) return started;
    if (opts.ready && (await opts.ready().catch(() => false))) return started;
    await new Promise((r) => setTimeout(r, 50));
  }
  await started.stop();
  throw new Error(`${cmd} not ready within ${opts.timeoutMs ?? 20_000} ms:\n${out}`);
}

/**
 * PIDs of live processes whose command line contains `fragment` (e.g. a test's own temporary data dir,
 * which only the processes that test started can carry). Reads /proc; the caller's own PID is excluded.
 */
export function pidsWithArgument(fragment: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").includes(fragment)) pids.push(Number(name));
    } catch {
      // exited meanwhile, or not readable
    }
  }
  return pids;
}

/**
 * PIDs of processes (other than this one) with an environment entry `match` accepts: a node program a test
 * started is found by its HOME or RG_NODE_ID even when its command line names nothing of the test's.
 */
export function pidsWithEnvironment(match: (entry: string) => boolean): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/environ`, "latin1").split("\0").some(match)) pids.push(Number(name));
    } catch {
      // exited meanwhile, or not readable
    }
  }
  return pids;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM to each PID, then SIGKILL to whatever is still alive after `graceMs`. */
export async function stopPids(pids: number[], graceMs = 3000): Promise<void> {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + graceMs;
  while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  for (const pid of pids.filter(alive)) process.kill(pid, "SIGKILL");
}
