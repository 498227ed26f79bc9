// Child-process supervision for `npm start` (scripts/start.js): start, restart with backoff, stop.
// Kept apart from start.js so the restart logic can be tested without starting the whole gateway.

const { spawn } = require("node:child_process");

function msEnv(name, fallback, env = process.env) {
  const v = Number(env[name]);
  return env[name] !== undefined && env[name] !== "" && Number.isFinite(v) && v >= 0 ? v : fallback;
}

/**
 * How long `stop` waits for a child after SIGTERM before SIGKILL. The data plane's worst-case shutdown
 * (data-plane.ts shutdownBudgetMs: SHUTDOWN_DRAIN_MS + 2 x SHUTDOWN_LINGER_MS + the larger of
 * USAGE_CLOSE_TIMEOUT_MS and QUOTA_CLOSE_TIMEOUT_MS + 2 s), read from the same variables with the same
 * defaults, plus 5 s so that its own forced exit comes first: killing it earlier loses its last usage
 * flush. The control plane and the worker stop well within it.
 */
function stopTimeoutMs(env = process.env) {
  const drain = msEnv("SHUTDOWN_DRAIN_MS", 10_000, env);
  const linger = msEnv("SHUTDOWN_LINGER_MS", 500, env);
  const flush = Math.max(
    msEnv("USAGE_CLOSE_TIMEOUT_MS", 5_000, env),
    msEnv("QUOTA_CLOSE_TIMEOUT_MS", 5_000, env),
  );
  return drain + 2 * linger + flush + 2_000 + 5_000;
}

/**
 * A supervisor: `run` starts a child and restarts it whenever it dies on its own, with exponential backoff
 * (`restartBaseMs`, doubling per consecutive death up to `restartMaxMs`; a child that ran `restartResetMs`
 * counts as healthy again), saying so through `warn`. A child that could not even be spawned (ENOENT,
 * EACCES: Node emits `error` and `close` but never `exit` then) is restarted the same way. `stop` sends
 * SIGTERM to every child in reverse start order, waits for each (SIGKILL after `stopTimeoutMs`).
 */
function createSupervisor(opts) {
  const { cwd, log, warn, restartBaseMs, restartMaxMs, restartResetMs } = opts;
  const killAfterMs = opts.stopTimeoutMs;
  /** { name, child, restarts, timer } per supervised process, in start order; `timer`: a pending restart. */
  const children = [];
  let stopping = false;

  function spawnChild(entry, file, args, env) {
    const { name } = entry;
    const startedAt = Date.now();
    const child = spawn(file, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    entry.child = child;
    if (child.pid !== undefined) log(`${name} started (pid ${child.pid})`);
    const prefix = (line) => `${name.padEnd(13)}| ${line}\n`;
    const pipe = (stream, out) => {
      let buf = "";
      stream.on("data", (d) => {
        buf += d.toString();
        let i = buf.indexOf("\n");
        while (i >= 0) {
          out.write(prefix(buf.slice(0, i)));
          buf = buf.slice(i + 1);
          i = buf.indexOf("\n");
        }
      });
    };
    if (opts.stdout !== null) pipe(child.stdout, opts.stdout ?? process.stdout);
    else child.stdout.resume();
    if (opts.stderr !== null) pipe(child.stderr, opts.stderr ?? process.stderr);
    else child.stderr.resume();
    // Once per child, whichever of `exit` (it ran and died) or a spawn failure comes.
    let handled = false;
    const died = (how) => {
      if (handled || stopping) return;
      handled = true;
      // A child that stayed up a while crashed for a new reason: start the backoff over.
      if (Date.now() - startedAt >= restartResetMs) entry.restarts = 0;
      const delay = Math.min(restartMaxMs, restartBaseMs * 2 ** Math.min(entry.restarts, 30));
      entry.restarts++;
      const who = child.pid !== undefined ? `${name} (pid ${child.pid})` : name;
      warn(`${who} died (${how}); restarting in ${delay} ms (restart #${entry.restarts})`);
      entry.timer = setTimeout(() => {
        entry.timer = undefined;
        if (!stopping) spawnChild(entry, file, args, env);
      }, delay);
    };
    child.on("exit", (code, signal) => died(signal !== null ? `signal ${signal}` : `exit code ${code}`));
    child.on("error", (err) => {
      warn(`${name}: ${err.message}`);
      // No pid: the process never started, and no `exit` will follow (a failed kill has a pid).
      if (child.pid === undefined) died(`could not start: ${err.code ?? err.message}`);
    });
  }

  return {
    children,
    run(name, file, args, env) {
      const entry = { name, child: undefined, restarts: 0, timer: undefined };
      children.push(entry);
      spawnChild(entry, file, args, env);
      return entry;
    },
    async stop() {
      stopping = true;
      for (const entry of children) {
        clearTimeout(entry.timer);
        entry.timer = undefined;
      }
      // Reverse start order: the data plane drains first, anvil last.
      for (const { name, child } of [...children].reverse()) {
        if (child === undefined || child.pid === undefined) continue;
        if (child.exitCode !== null || child.signalCode !== null) continue;
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
        await exited;
        clearTimeout(timer);
        log(`${name} stopped`);
      }
    },
  };
}

module.exports = { createSupervisor, stopTimeoutMs, msEnv };
