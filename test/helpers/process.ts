import { type ChildProcess, spawn } from "node:child_process";

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
