import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import type { RedisNodeAddress } from "../../shared/src/redis/connect";
import { keySlot } from "../../shared/src/redis/slots";
import { eventually } from "./eventually";
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

/** One command to the node on `port` (redis-cli exits 0 on a Redis error reply: callers check the text). */
function nodeCli(port: number, ...args: string[]): Promise<string> {
  return redisCli(["-h", "127.0.0.1", "-p", String(port), ...args], 5_000);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Rejects unless redis-cli printed `OK` (it exits 0 on an error reply). */
async function expectOk(reply: Promise<string>): Promise<void> {
  const text = (await reply).trim();
  if (text !== "OK") throw new Error(`redis-cli answered: ${text}`);
}

/** CLUSTER SLOTS of the node on `port`: per slot range, first slot, last slot, master, then replicas. */
async function clusterSlots(port: number): Promise<unknown[][]> {
  const r = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await r.connect();
    return (await r.cluster("SLOTS")) as unknown[][];
  } finally {
    r.disconnect();
  }
}

/** One line of CLUSTER NODES, as far as the tests need it. */
interface ClusterNodeLine {
  id: string;
  port: number;
  master: boolean;
  failed: boolean;
  /** The master's id, for a replica. */
  masterId: string | null;
  /** Slot ranges served, for a master (`[from, to]`, inclusive). */
  slots: Array<[number, number]>;
}

function parseClusterNodes(text: string): ClusterNodeLine[] {
  const out: ClusterNodeLine[] = [];
  for (const line of text.split("\n")) {
    const f = line.trim().split(" ");
    if (f.length < 8) continue;
    // `127.0.0.1:6379@16379` (with a hostname field after a comma in some versions).
    const port = Number(/:(\d+)@/.exec(f[1]!)?.[1] ?? Number.NaN);
    const flags = f[2]!.split(",");
    const slots: Array<[number, number]> = [];
    for (const s of f.slice(8)) {
      if (s.startsWith("[")) continue; // a slot being migrated
      const [from, to] = s.split("-").map(Number);
      slots.push([from!, to ?? from!]);
    }
    out.push({
      id: f[0]!,
      port,
      master: flags.includes("master"),
      failed: flags.includes("fail") || flags.includes("fail?"),
      masterId: f[3] === "-" ? null : f[3]!,
      slots,
    });
  }
  return out;
}

export interface TestRedisClusterOptions {
  /** Replicas of each master (default 0: masters only). */
  replicasPerMaster?: number;
  /**
   * `cluster-node-timeout`, ms: how long a master may be unreachable before the cluster marks it failed and
   * a replica takes over (a failover then takes about this plus up to a second of election). Default 1500
   * with replicas; without, Redis's own (15 s), as every cluster test had before replicas existed.
   */
  nodeTimeoutMs?: number;
}

/**
 * A private Redis Cluster of `masters` masters (and `replicasPerMaster` replicas of each) on free loopback
 * ports, each redis-server a child process tracked by its PID, with its node config in a temporary
 * directory. `killMaster` and `freezeMaster` signal exactly one of them; `stop()` stops exactly those still
 * running and removes the directory.
 */
export class TestRedisCluster {
  /** Every node's process, by port. */
  private readonly procs = new Map<number, StartedProcess>();
  /** Ports of the nodes stopped by `freezeMaster`. */
  private readonly frozen = new Set<number>();
  /** Each replica's master's node id, by the replica's port. */
  private readonly replicaOf = new Map<number, string>();
  /** Every node's cluster bus port, by port. */
  private readonly busPorts = new Map<number, number>();
  private dir: string | undefined;
  /** The masters' ports as created (a killed master stays listed: REDIS_CLUSTER_NODES does too). */
  readonly ports: number[] = [];
  /** The replicas' ports as created, `replicasPerMaster` per master in the order of `ports`. */
  readonly replicaPorts: number[] = [];
  private readonly replicasPerMaster: number;
  private readonly nodeTimeoutMs: number | undefined;

  constructor(
    private readonly masters = 3,
    opts: TestRedisClusterOptions = {},
  ) {
    this.replicasPerMaster = opts.replicasPerMaster ?? 0;
    this.nodeTimeoutMs = opts.nodeTimeoutMs ?? (this.replicasPerMaster > 0 ? 1_500 : undefined);
  }

  /** The masters' addresses (what REDIS_CLUSTER_NODES lists). */
  get nodes(): RedisNodeAddress[] {
    return this.ports.map((port) => ({ host: "127.0.0.1", port }));
  }

  /** `REDIS_CLUSTER_NODES` for these masters. */
  get nodesEnv(): string {
    return this.ports.map((p) => `127.0.0.1:${p}`).join(",");
  }

  /** Ports of the nodes whose process is still running and not frozen. */
  private get livePorts(): number[] {
    return [...this.procs.keys()].filter((p) => !this.frozen.has(p));
  }

  private async startNode(dir: string): Promise<number> {
    const port = await freePort();
    // The cluster bus port is given too: the default (port + 10000) may be taken, or above 65535.
    const busPort = await freePort();
    const args = [
      "--port",
      String(port),
      "--cluster-enabled",
      "yes",
      "--cluster-port",
      String(busPort),
      "--cluster-config-file",
      path.join(dir, `nodes-${port}.conf`),
      "--save",
      "",
      "--appendonly",
      "no",
      "--bind",
      "127.0.0.1",
      "--daemonize",
      "no",
      "--dir",
      dir,
    ];
    if (this.nodeTimeoutMs !== undefined) args.push("--cluster-node-timeout", String(this.nodeTimeoutMs));
    if (this.replicasPerMaster > 0) {
      args.push(
        // A replica takes over however long ago it last heard from its master (a loaded machine may stall
        // replication pings; the test wants the failover, not Redis's data-age safeguard).
        "--cluster-replica-validity-factor",
        "0",
        // A replica's first full sync starts at once (Redis waits 5 s for more replicas to share it).
        "--repl-diskless-sync-delay",
        "0",
        // CLUSTER SLOTS lists a replica only once its replication offset moved, which the master's pings
        // do every this many seconds (10 by default) when nothing is written.
        "--repl-ping-replica-period",
        "1",
      );
    }
    this.procs.set(
      port,
      await startProcess("redis-server", args, { readyLine: /Ready to accept connections/ }),
    );
    this.busPorts.set(port, busPort);
    return port;
  }

  async start(): Promise<this> {
    const dir = mkdtempSync(path.join(tmpdir(), "rg-redis-cluster-"));
    this.dir = dir;
    try {
      for (let i = 0; i < this.masters; i++) this.ports.push(await this.startNode(dir));
      for (let i = 0; i < this.masters * this.replicasPerMaster; i++) {
        this.replicaPorts.push(await this.startNode(dir));
      }
      await redisCli([
        "--cluster",
        "create",
        ...this.ports.map((p) => `127.0.0.1:${p}`),
        "--cluster-replicas",
        "0",
        "--cluster-yes",
      ]);
      // Replicas join afterwards, each on a master chosen here: `--cluster-replicas` on create would pick
      // the masters itself (and, on one host, shuffle them), and the tests must know who replicates whom.
      // MEET and REPLICATE directly: `redis-cli --cluster add-node` waits in whole seconds, ~2 s a replica.
      for (const [i, replica] of this.replicaPorts.entries()) {
        const master = this.ports[Math.floor(i / this.replicasPerMaster)]!;
        const masterId = (await nodeCli(master, "CLUSTER", "MYID")).trim();
        this.replicaOf.set(replica, masterId);
        await expectOk(
          nodeCli(replica, "CLUSTER", "MEET", "127.0.0.1", String(master), String(this.busPorts.get(master))),
        );
        await this.until(`the replica on ${replica} to learn of its master`, async () =>
          (await nodeCli(replica, "CLUSTER", "NODES")).includes(masterId),
        );
        await expectOk(nodeCli(replica, "CLUSTER", "REPLICATE", masterId));
      }
      await this.waitUntilOk();
      return this;
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  private async until(what: string, done: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
    await eventually(done, what, timeoutMs, 50);
  }

  /**
   * Until every node reports `cluster_state:ok`, knows every node, sees none failing and knows every
   * replica's master, and every replica's link to its master is up (gossip and replication have
   * converged: a master that does not know whose replica asks for its vote refuses it, which would stall
   * the first failover).
   */
  private async waitUntilOk(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const total = this.masters * (1 + this.replicasPerMaster);
    let last = "";
    while (Date.now() < deadline) {
      let ok = true;
      for (const port of this.livePorts) {
        last = await nodeCli(port, "CLUSTER", "INFO");
        const known = Number(/cluster_known_nodes:(\d+)/.exec(last)?.[1] ?? 0);
        if (!last.includes("cluster_state:ok") || known < total) ok = false;
        if (this.replicaPorts.length === 0) continue;
        last = await nodeCli(port, "CLUSTER", "NODES");
        const view = parseClusterNodes(last);
        if (view.some((n) => n.failed)) ok = false;
        for (const [replica, masterId] of this.replicaOf) {
          const line = view.find((n) => n.port === replica);
          if (line === undefined || line.master || line.masterId !== masterId) ok = false;
        }
      }
      for (const port of this.replicaPorts.filter((p) => this.livePorts.includes(p))) {
        last = await nodeCli(port, "INFO", "replication");
        if (!/master_link_status:up/.test(last)) ok = false;
      }
      // Every node lists every replica in CLUSTER SLOTS: a client then holds connections to the replicas
      // too (ioredis adds them to its pool as read-only nodes), as it does against a cluster in service.
      for (const port of this.replicaPorts.length === 0 ? [] : this.livePorts) {
        const slots = await clusterSlots(port);
        if (slots.some((range) => range.length - 3 < this.replicasPerMaster)) ok = false;
      }
      if (ok) return;
      await sleep(100);
    }
    throw new Error(`the test cluster never reached cluster_state:ok:\n${last}`);
  }

  /** CLUSTER NODES as a live node sees it. */
  private async clusterNodes(): Promise<ClusterNodeLine[]> {
    const port = this.livePorts[0];
    if (port === undefined) throw new Error("no node of the test cluster is running");
    return parseClusterNodes(await nodeCli(port, "CLUSTER", "NODES"));
  }

  /** Port of the master serving `key`'s slot now (as a live node sees it). */
  async masterOf(key: string): Promise<number> {
    const slot = keySlot(key);
    const owner = (await this.clusterNodes()).find(
      (n) => n.master && !n.failed && n.slots.some(([from, to]) => from <= slot && slot <= to),
    );
    if (owner === undefined) throw new Error(`no live master serves slot ${slot} (key ${key})`);
    return owner.port;
  }

  /**
   * SIGKILL to the master on `port`, that process only: it dies as in a crash or an OOM kill, without a
   * shutdown or a word to its peers; its host's kernel closes its connections, so clients see them close
   * at once. Resolves once it has exited.
   */
  async killMaster(port: number): Promise<void> {
    const proc = await this.runningMaster(port);
    const exited = new Promise<void>((resolve) => {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) resolve();
      else proc.child.once("exit", () => resolve());
    });
    proc.child.kill("SIGKILL");
    await exited;
    this.procs.delete(port);
  }

  /**
   * SIGSTOP to the master on `port`, that process only: it stops answering while its connections stay
   * open (nothing closes them), as with a hung host or a network partition. `stop()` resumes and stops it.
   */
  async freezeMaster(port: number): Promise<void> {
    const proc = await this.runningMaster(port);
    proc.child.kill("SIGSTOP");
    this.frozen.add(port);
  }

  private async runningMaster(port: number): Promise<StartedProcess> {
    const proc = this.procs.get(port);
    if (proc === undefined || this.frozen.has(port)) {
      throw new Error(`no running node of the test cluster on port ${port}`);
    }
    const role = await nodeCli(port, "ROLE");
    if (!role.startsWith("master")) throw new Error(`the node on ${port} is not a master:\n${role}`);
    return proc;
  }

  /**
   * Until a replica of the master on `failedPort` (killed or frozen) serves all of that master's slots, every
   * live node agrees, and every live node reports `cluster_state:ok` again. Resolves with the promoted
   * replica's port.
   */
  async waitForFailover(failedPort: number, timeoutMs = 20_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    let last = "";
    while (Date.now() < deadline) {
      const promoted = await this.promotedReplicaOf(failedPort).catch((err: Error) => {
        last = err.message;
        return undefined;
      });
      if (promoted !== undefined) return promoted;
      await sleep(100);
    }
    throw new Error(`no replica took over from the master on ${failedPort} within ${timeoutMs} ms:\n${last}`);
  }

  private async promotedReplicaOf(failedPort: number): Promise<number | undefined> {
    const replicas = this.replicaPorts.filter(
      (_, i) => this.ports[Math.floor(i / this.replicasPerMaster)] === failedPort,
    );
    let promoted: number | undefined;
    for (const port of this.livePorts) {
      const info = await nodeCli(port, "CLUSTER", "INFO");
      if (!info.includes("cluster_state:ok")) return undefined;
      const view = parseClusterNodes(await nodeCli(port, "CLUSTER", "NODES"));
      const failed = view.find((n) => n.port === failedPort);
      const now = view.find((n) => replicas.includes(n.port) && n.master && n.slots.length > 0);
      // The failed master still holding slots in this node's view: the failover has not reached it yet.
      if (now === undefined || (failed?.master && failed.slots.length > 0)) return undefined;
      if (promoted !== undefined && promoted !== now.port) return undefined;
      promoted = now.port;
    }
    return promoted;
  }

  /** Stops the redis-server processes this cluster started and still runs (by PID); removes its directory. */
  async stop(): Promise<void> {
    // A stopped process acts on SIGTERM only once resumed.
    for (const port of this.frozen) this.procs.get(port)?.child.kill("SIGCONT");
    this.frozen.clear();
    const procs = [...this.procs.values()];
    this.procs.clear();
    await Promise.all(procs.map((p) => p.stop(3000)));
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
    this.ports.length = 0;
    this.replicaPorts.length = 0;
    this.replicaOf.clear();
    this.busPorts.clear();
  }
}
