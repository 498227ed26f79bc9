import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { RedisNodeAddress } from "../../shared/src/redis/connect";
import { freePort } from "./ports";
import { type StartedProcess, startProcess } from "./process";

/** Runs `redis-cli` with `args`; resolves with its output, rejects on a non-zero exit. */
function redisCli(args: string[], timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn("redis-cli", args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("exit", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`redis-cli ${args.join(" ")} exited ${code}:\n${out}`));
    });
  });
}

/**
 * A private Redis Cluster of `masters` masters (no replicas) on free loopback ports, each redis-server a
 * child process tracked by its PID, with its node config in a temporary directory. `stop()` stops exactly
 * those processes and removes the directory.
 */
export class TestRedisCluster {
  private readonly procs: StartedProcess[] = [];
  private dir: string | undefined;
  readonly ports: number[] = [];

  constructor(private readonly masters = 3) {}

  /** The masters' addresses (what REDIS_CLUSTER_NODES lists). */
  get nodes(): RedisNodeAddress[] {
    return this.ports.map((port) => ({ host: "127.0.0.1", port }));
  }

  /** `REDIS_CLUSTER_NODES` for these masters. */
  get nodesEnv(): string {
    return this.ports.map((p) => `127.0.0.1:${p}`).join(",");
  }

  async start(): Promise<this> {
    this.dir = mkdtempSync(path.join(tmpdir(), "rg-redis-cluster-"));
    try {
      for (let i = 0; i < this.masters; i++) {
        const port = await freePort();
        // The cluster bus port is given too: the default (port + 10000) may be taken, or above 65535.
        const busPort = await freePort();
        this.ports.push(port);
        this.procs.push(
          await startProcess(
            "redis-server",
            [
              "--port",
              String(port),
              "--cluster-enabled",
              "yes",
              "--cluster-port",
              String(busPort),
              "--cluster-config-file",
              path.join(this.dir, `nodes-${port}.conf`),
              "--save",
              "",
              "--appendonly",
              "no",
              "--bind",
              "127.0.0.1",
              "--daemonize",
              "no",
              "--dir",
              this.dir,
            ],
            { readyLine: /Ready to accept connections/ },
          ),
        );
      }
      await redisCli([
        "--cluster",
        "create",
        ...this.ports.map((p) => `127.0.0.1:${p}`),
        "--cluster-replicas",
        "0",
        "--cluster-yes",
      ]);
      await this.waitUntilOk();
      return this;
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /** Until every node reports `cluster_state:ok` and knows every master (gossip has converged). */
  private async waitUntilOk(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = "";
    while (Date.now() < deadline) {
      let ok = true;
      for (const port of this.ports) {
        last = await redisCli(["-h", "127.0.0.1", "-p", String(port), "CLUSTER", "INFO"]);
        const known = Number(/cluster_known_nodes:(\d+)/.exec(last)?.[1] ?? 0);
        if (!last.includes("cluster_state:ok") || known < this.masters) ok = false;
      }
      if (ok) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`the test cluster never reached cluster_state:ok:\n${last}`);
  }

  /** Stops the redis-server processes this cluster started (by PID) and removes its directory. */
  async stop(): Promise<void> {
    await Promise.all(this.procs.splice(0).map((p) => p.stop(3000)));
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
    this.ports.length = 0;
  }
}
