import http from "node:http";
import { resolve } from "node:path";
import type { Redis } from "ioredis";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { eventually } from "../../../helpers/eventually";
import { freePort } from "../../../helpers/ports";
import { type StartedProcess, startProcess } from "../../../helpers/process";
import { TEST_REDIS_URL } from "../../../helpers/redis";

export const DATA_PLANE_MAIN = resolve(__dirname, "../../../../data-plane/src/main.js");

export interface ThreadedPlane {
  proc: StartedProcess;
  port: number;
  base: string;
  /** METRICS_PORT's base: /metrics of the whole process (every thread's series aggregated). */
  metricsBase: string;
}

/** The data plane as an operator runs it (`main.js`), with DATA_PLANE_THREADS=2 unless `env` says otherwise. */
export async function startThreadedPlane(
  prefix: string,
  env: Record<string, string> = {},
  readyTimeoutMs = 30_000,
): Promise<ThreadedPlane> {
  const port = await freePort();
  const metricsPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const proc = await startProcess(process.execPath, [DATA_PLANE_MAIN], {
    env: {
      DATA_PLANE_THREADS: "2",
      DATA_PLANE_PORT: String(port),
      METRICS_PORT: String(metricsPort),
      DATA_PLANE_HOST: "127.0.0.1",
      REDIS_URL: TEST_REDIS_URL,
      REDIS_KEY_PREFIX: prefix,
      LOG_LEVEL: "info",
      HEALTH_CHECK_INTERVAL_MS: "200",
      SHUTDOWN_LINGER_MS: "0",
      ...env,
    },
    // Ready once the threads answer and the main thread serves /metrics (it listens after the threads).
    ready: async () =>
      (await fetch(`${base}/readyz`)).status === 200 &&
      (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status === 200,
    timeoutMs: readyTimeoutMs,
  });
  return { proc, port, base, metricsBase: `http://127.0.0.1:${metricsPort}` };
}

export interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: test convenience
  json: any;
  text: string;
  headers: http.IncomingHttpHeaders;
}

/** One HTTP exchange with the plane on `agent` (false: a connection of its own); `json` unset unless JSON. */
function exchange(
  port: number,
  method: string,
  path: string,
  agent: http.Agent | false,
  text?: string,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((done, fail) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        path,
        method,
        agent,
        headers:
          text === undefined
            ? headers
            : { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers },
      },
      (res) => {
        let out = "";
        res.setEncoding("utf8");
        res.on("data", (d) => {
          out += d;
        });
        res.on("end", () => {
          let json: unknown;
          try {
            json = JSON.parse(out);
          } catch {
            json = undefined;
          }
          done({ status: res.statusCode ?? 0, json, text: out, headers: res.headers });
        });
      },
    );
    req.on("error", fail);
    req.end(text);
  });
}

/**
 * One POST on a connection of its own (no keep-alive agent): the kernel picks the serving thread per
 * connection, so requests sent this way spread over the threads.
 */
export function postFresh(
  port: number,
  path: string,
  body: string | object,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return exchange(port, "POST", path, false, typeof body === "string" ? body : JSON.stringify(body), headers);
}

/** `n` fresh-connection POSTs, `concurrency` at a time; answers in sending order. */
export async function postMany(
  port: number,
  path: string,
  body: (i: number) => string | object,
  n: number,
  concurrency = 8,
): Promise<Answer[]> {
  const out: Answer[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await postFresh(port, path, body(i));
      }
    }),
  );
  return out;
}

/** One sample of the Prometheus text format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** Sum of the samples named `name` whose labels include `match`. */
export function sumOf(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  let n = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) n += s.value;
  }
  return n;
}

/** `metricsBase`: the process's METRICS_PORT base (ThreadedPlane.metricsBase). */
export async function scrape(metricsBase: string): Promise<Sample[]> {
  const res = await fetch(`${metricsBase}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parseMetrics(await res.text());
}

/** Request objects each serving thread answered (rpcgw_thread_requests_total), by thread index. */
export function perThread(samples: readonly Sample[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of samples) if (s.name === "rpcgw_thread_requests_total") out.set(s.labels.thread!, s.value);
  return out;
}

/** Per-thread difference between two scrapes. */
export function perThreadDelta(before: readonly Sample[], after: readonly Sample[]): Map<string, number> {
  const a = perThread(before);
  const out = new Map<string, number>();
  for (const [t, n] of perThread(after)) out.set(t, n - (a.get(t) ?? 0));
  return out;
}

/** A kept-alive connection known to be served by one thread (its /healthz says which). */
export interface ThreadConnection {
  readonly thread: number;
  post(path: string, body: string | object): Promise<Answer>;
  close(): void;
}

/**
 * Opens connections until one lands on `thread` (the kernel picks the listen socket per connection) and
 * keeps it: every request on it is then served by that thread.
 */
export async function connectionOn(port: number, thread: number): Promise<ThreadConnection> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const send = (method: string, path: string, text?: string) => exchange(port, method, path, agent, text);
    const health = await send("GET", "/healthz");
    if (health.json?.thread === thread) {
      return {
        thread,
        async post(path, body) {
          const a = await send("POST", path, typeof body === "string" ? body : JSON.stringify(body));
          // Still the same connection, so still the same thread (a new socket would say otherwise).
          const again = await send("GET", "/healthz");
          if (again.json?.thread !== thread)
            throw new Error(`connection moved to thread ${again.json?.thread}`);
          return a;
        },
        close: () => agent.destroy(),
      };
    }
    agent.destroy();
  }
  throw new Error(`no connection landed on thread ${thread} in 100 attempts`);
}

/**
 * Waits until every serving thread of `n` data-plane processes on `prefix` knows there are `n` rate-limit
 * instances. A thread's limiter learns it from its own heartbeat's answer (one at most every 525 ms: the
 * 500 ms heartbeat is sent by a sync round, every 25 ms), so the process that registered first believes it
 * is alone until its threads' next heartbeats, and load started before then lets it take a whole window by
 * itself. The hash's values are the Redis times (ms) of each process's latest heartbeat: once every value
 * is 600 ms past the moment all `n` were there, every thread has heartbeated since.
 */
export async function instancesSeeEachOther(redis: Redis, prefix: string, n: number): Promise<void> {
  const key = new RedisNames(prefix).rateLimitInstances();
  let allThereMs = 0;
  await eventually(async () => {
    const beats = Object.values(await redis.hgetall(key)).map(Number);
    if (beats.length < n) return false;
    allThereMs ||= Math.max(...beats);
    return Math.min(...beats) >= allThereMs + 600;
  }, `${n} rate-limit instances seeing each other`);
}
