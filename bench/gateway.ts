import { existsSync, readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { generateApiKey, hashApiKey } from "../shared/src/crypto/api-key";
import { RedisNames } from "../shared/src/redis/keys";
import type { KeyRecord, NetworkRecord } from "../shared/src/redis/records";
import { KeyRecordSchema, NetworkRecordSchema } from "../shared/src/redis/records";
import { freePort } from "../test/helpers/ports";
import { type StartedProcess, startProcess } from "../test/helpers/process";

/**
 * The gateway under test: the data plane run as its own process (`dist/data-plane/src/main.js`, as an
 * operator runs it), configured through its environment, reading keys and networks that this module seeds
 * into Redis under a prefix unique to the run (`cleanup()` deletes them).
 */

/** `BENCH_GATEWAY_MAIN` runs another build of the data plane (an A/B against a copy of an older `dist/`). */
export const GATEWAY_MAIN = process.env.BENCH_GATEWAY_MAIN || `${__dirname}/../data-plane/src/main.js`;
export const BENCH_NETWORK = "eth-bench";

/**
 * Limits far above anything one machine can send: with limits on (the default) every request still goes
 * through the rate limiter and the quota tracker, which never refuse, so their cost is measured, not their
 * refusals. No concurrency caps of its own: the data plane's defaults apply.
 */
const UNLIMITED_PLAN = {
  name: "bench",
  requestsPerSecond: 1_000_000_000,
  dailyRequestLimit: 1_000_000_000_000,
  monthlyRequestLimit: null,
};

export class BenchRedis {
  readonly prefix = `rgbench:${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}:`;
  readonly names = new RedisNames(this.prefix);
  readonly redis: Redis;

  constructor(readonly url: string) {
    this.redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 2 });
  }

  connect(): Promise<void> {
    return this.redis.connect();
  }

  /** The bench network with one upstream (`stub`) at `upstreamHttpUrl`, or with the upstreams given. */
  async seedNetwork(upstreams: string | { id: string; httpUrl: string }[]): Promise<void> {
    const list = typeof upstreams === "string" ? [{ id: "stub", httpUrl: upstreams }] : upstreams;
    const record: NetworkRecord = NetworkRecordSchema.parse({
      slug: BENCH_NETWORK,
      name: "EVM bench (stub upstream)",
      protocol: "EVM",
      chainId: 1,
      allowDebug: false,
      upstreams: list.map((u) => ({ id: u.id, httpUrl: u.httpUrl, wsUrl: null, weight: 1 })),
    });
    await this.redis.hset(this.names.networks(), BENCH_NETWORK, JSON.stringify(record));
    await this.redis.set(this.names.publishedAt(), new Date().toISOString());
  }

  /** Seeds `n` app keys (pipelined) and returns them. */
  async seedKeys(n: number, workspaceId = "ws-bench"): Promise<string[]> {
    const keys: string[] = [];
    const CHUNK = 5000;
    for (let start = 0; start < n; start += CHUNK) {
      const pipe = this.redis.pipeline();
      for (let i = start; i < Math.min(n, start + CHUNK); i++) {
        const key = generateApiKey();
        const record: KeyRecord = KeyRecordSchema.parse({
          kind: "app",
          workspaceId,
          appId: `app-bench-${i}`,
          nodeId: null,
          plan: UNLIMITED_PLAN,
          allowlist: { origins: [], ips: [] },
          expiresAtMs: null,
          rpcMethods: null,
        });
        pipe.set(this.names.apiKey(hashApiKey(key)), JSON.stringify(record));
        keys.push(key);
      }
      await pipe.exec();
    }
    return keys;
  }

  async cleanup(): Promise<void> {
    let cursor = "0";
    do {
      const [next, found] = await this.redis.scan(cursor, "MATCH", `${this.prefix}*`, "COUNT", 5000);
      cursor = next;
      if (found.length > 0) await this.redis.unlink(...found);
    } while (cursor !== "0");
    this.redis.disconnect();
  }
}

/**
 * What every bench gateway changes from the data plane's defaults, and why (printed by bench/run.ts; a
 * section that changes more says so in its own output). The concurrency caps are not changed.
 */
export const BENCH_GATEWAY_CHANGES =
  "DATA_PLANE_THREADS=1 (one serving thread, as nginx's one worker; the threads section sets its own), " +
  "KEY_CACHE_MAX_ENTRIES=250000 and KEY_CACHE_TTL_MS=3600000 (the RSS row's 100,000 keys stay cached); " +
  "everything else, MAX_IN_FLIGHT_PER_KEY included, at its default";

export interface Gateway {
  port: number;
  baseUrl: string;
  /** METRICS_PORT's base: GET `${metricsUrl}/metrics`. */
  metricsUrl: string;
  proc: StartedProcess;
}

export async function startGateway(o: {
  redisUrl: string;
  prefix: string;
  env?: NodeJS.ProcessEnv;
  /** Extra node flags (e.g. `--cpu-prof`, which NODE_OPTIONS does not accept). */
  nodeArgs?: string[];
  /** CPUs to pin the gateway process to (`taskset -c`, every thread of it), e.g. "1" or "0,1". */
  cpus?: string;
  /** Another build's `dist/data-plane/src/main.js` (bench/builds.ts); default GATEWAY_MAIN. */
  main?: string;
  /** The node binary to run it with (bench/builds.ts: another Node version); default this process's. */
  node?: string;
}): Promise<Gateway> {
  const main = o.main ?? GATEWAY_MAIN;
  // A section's own settings are named in the output (why: in the section's source), so no figure is read
  // as the defaults' when it is not.
  const changed = Object.entries(o.env ?? {}).filter(([k]) => k !== "LOG_LEVEL");
  if (changed.length > 0)
    process.stdout.write(
      `  gateway settings of this section: ${changed.map(([k, v]) => `${k}=${v}`).join(", ")}\n`,
    );
  if (!existsSync(main)) throw new Error(`gateway not built: ${main} is missing`);
  const port = await freePort();
  const metricsPort = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const args = [...(o.nodeArgs ?? []), main];
  // taskset execs node in place: the PID is the gateway's (stopped by PID as before).
  const node = o.node ?? process.execPath;
  const [cmd, argv] = o.cpus === undefined ? [node, args] : ["taskset", ["-c", o.cpus, node, ...args]];
  const proc = await startProcess(cmd, argv, {
    env: {
      DATA_PLANE_PORT: String(port),
      DATA_PLANE_HOST: "127.0.0.1",
      METRICS_PORT: String(metricsPort),
      REDIS_URL: o.redisUrl,
      REDIS_KEY_PREFIX: o.prefix,
      LOG_LEVEL: "warn",
      KEY_CACHE_MAX_ENTRIES: "250000",
      KEY_CACHE_TTL_MS: "3600000",
      // The calls-in-flight caps are the data plane's defaults (MAX_IN_FLIGHT_PER_KEY 200 per key, the
      // bench plan sets none): 64 connections hold at most 64 slots, a batch one per upstream exchange.
      // One serving thread, like nginx's one worker in the rows it is compared with; the thread scaling
      // has its own section (bench/threads.ts) that sets DATA_PLANE_THREADS itself.
      DATA_PLANE_THREADS: "1",
      ...o.env,
    },
    ready: async () => (await fetch(`${baseUrl}/readyz`)).status === 200,
    timeoutMs: 30_000,
  });
  return { port, baseUrl, metricsUrl: `http://127.0.0.1:${metricsPort}`, proc };
}

/** Resident set size and its peak of a process, from /proc (MiB). */
export function processMemory(pid: number): { rssMiB: number; hwmMiB: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) =>
    Number.parseInt(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? "0", 10);
  return { rssMiB: kb("VmRSS") / 1024, hwmMiB: kb("VmHWM") / 1024 };
}

/** Linux reports /proc/PID/stat CPU times in clock ticks of 1/100 s (USER_HZ) on every mainstream arch. */
const USER_HZ = 100;

/** A process's CPU time so far (user + system, every thread), in µs, from /proc/PID/stat. */
export function processCpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces): utime is the 14th field, stime the 15th.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(rest[11]) + Number(rest[12])) / USER_HZ) * 1e6;
}
