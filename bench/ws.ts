/**
 * WebSocket benchmark: N concurrent client WebSockets (default 10,000; BENCH_WS_CONNECTIONS), each
 * subscribed to newHeads on one gateway process backed by a stub upstream that emits a head every 250 ms
 * with its emission time embedded. Reports the gateway's RSS (/proc/PID/status VmRSS), p50/p99 delay from
 * upstream emission to client delivery, and request/response throughput over WS vs HTTP (same method,
 * same connection count) in the same run.
 *
 *   node dist/bench/ws.js                       (runs alone; prints the figures and a JSON line)
 *   import { runWsBench } from "./ws"; await runWsBench({ connections: 10_000 })   (from bench/run.ts)
 *
 * The client sockets come from `BENCH_WS_CLIENT_PROCS` (default 2) child processes. Each gateway-side
 * connection is one file descriptor in the gateway and one in a client process: 10,000 connections need
 * `ulimit -n` above ~10,100 for the gateway (and N / procs per client process). This machine's default
 * (`ulimit -n` = 20000) is enough; raise it (`ulimit -n 65536`) for more.
 *
 * Environment: REDIS_URL (default redis://127.0.0.1:6379), BENCH_WS_CONNECTIONS, BENCH_WS_CLIENT_PROCS,
 * BENCH_WS_MEASURE_MS (delivery window, default 10000), BENCH_WS_LOAD_CONNECTIONS (default 64),
 * BENCH_WS_LOAD_MS (per throughput run, default 5000).
 */

import uWS from "uWebSockets.js";
import { type ChildProcess, execFileSync, fork, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Redis } from "ioredis";
import { Pool } from "undici";
import WebSocket from "ws";
import { generateApiKey, hashApiKey } from "../shared/src/crypto/api-key";
import { RedisNames } from "../shared/src/redis/keys";
import { KeyRecordSchema, NetworkRecordSchema } from "../shared/src/redis/records";
import { processMemory, startGateway } from "./gateway";
import { answer } from "./stub-upstream";

export interface WsBenchOptions {
  connections?: number;
  clientProcs?: number;
  measureMs?: number;
  loadConnections?: number;
  loadMs?: number;
  redisUrl?: string;
  /** Method for the WS vs HTTP throughput runs (default net_version: never cached, goes upstream). */
  method?: string;
  /** Extra environment for the gateway process (e.g. UPSTREAM_WS_CONNECTIONS, WS_MAX_BUFFERED_BYTES). */
  gatewayEnv?: NodeJS.ProcessEnv;
  /** Processes of the C reader (default BENCH_WS_C_CLIENT_PROCS, 1). */
  cClientProcs?: number;
  /** `both` (default: node clients, then the C reader), `node` or `c` (BENCH_WS_HARNESS). */
  harness?: "both" | "node" | "c";
  /** The gateway's DATA_PLANE_THREADS (default BENCH_WS_THREADS, 1). */
  threads?: number;
  /** Node flags for the gateway (e.g. `--cpu-prof`); default BENCH_WS_GATEWAY_NODE_ARGS, space-separated. */
  gatewayNodeArgs?: string[];
}

const NETWORK = "eth-ws-bench";
const HEAD_INTERVAL_MS = 250;
const nowMs = () => performance.timeOrigin + performance.now();

// ---------------------------------------------------------------- stub upstream (HTTP + WS, uWS)

interface WsStub {
  port: number;
  heads(): number;
  subscriptions(): number;
  close(): void;
}

function startWsStub(): Promise<WsStub> {
  const app = uWS.App();
  const subs = new Map<string, uWS.WebSocket<{ id: number }>>();
  let nextSub = 1;
  let head = 0;
  app.ws<{ id: number }>("/*", {
    compression: uWS.DISABLED,
    maxPayloadLength: 16 * 1024 * 1024,
    idleTimeout: 0,
    message: (ws, msg) => {
      const text = Buffer.from(msg).toString();
      let req: { id?: unknown; method?: string; params?: unknown[] };
      try {
        req = JSON.parse(text);
      } catch {
        return;
      }
      if (req.method === "eth_subscribe") {
        const sid = `0x${(nextSub++).toString(16).padStart(32, "0")}`;
        subs.set(sid, ws);
        ws.send(`{"jsonrpc":"2.0","id":${JSON.stringify(req.id)},"result":"${sid}"}`);
      } else if (req.method === "eth_unsubscribe") {
        const ok = subs.delete(String(req.params?.[0]));
        ws.send(`{"jsonrpc":"2.0","id":${JSON.stringify(req.id)},"result":${ok}}`);
      } else {
        ws.send(answer(text));
      }
    },
    close: (ws) => {
      for (const [sid, w] of subs) if (w === ws) subs.delete(sid);
    },
  });
  app.any("/*", (res) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const chunks: Buffer[] = [];
    res.onData((ab, isLast) => {
      chunks.push(Buffer.from(ab.slice(0)));
      if (!isLast || aborted) return;
      const out = answer(Buffer.concat(chunks).toString("utf8"));
      res.cork(() => res.writeHeader("content-type", "application/json").end(out));
    });
  });
  const timer = setInterval(() => {
    head++;
    const result = `{"number":"0x${head.toString(16)}","hash":"0x${head.toString(16).padStart(64, "0")}","parentHash":"0x${(head - 1).toString(16).padStart(64, "0")}","miner":"0x0000000000000000000000000000000000000000","gasLimit":"0x1c9c380","gasUsed":"0x0","timestamp":"0x${Math.floor(Date.now() / 1000).toString(16)}","emittedAtMs":${nowMs()}}`;
    for (const [sid, ws] of subs) {
      ws.send(
        `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${sid}","result":${result}}}`,
      );
    }
  }, HEAD_INTERVAL_MS);
  return new Promise((resolve, reject) => {
    app.listen("127.0.0.1", 0, (s) => {
      if (!s) return reject(new Error("ws stub: listen failed"));
      resolve({
        port: uWS.us_socket_local_port(s),
        heads: () => head,
        subscriptions: () => subs.size,
        close() {
          clearInterval(timer);
          uWS.us_listen_socket_close(s);
          for (const ws of subs.values()) ws.close();
        },
      });
    });
  });
}

// ---------------------------------------------------------------- client child process

type ToChild =
  | { cmd: "subscribe"; url: string; count: number }
  | { cmd: "measure"; on: boolean }
  | { cmd: "report" }
  | { cmd: "closeAll" }
  | { cmd: "load"; kind: "ws" | "http"; url: string; method: string; connections: number; ms: number };

type FromChild =
  | { ev: "subscribed"; ok: number; failed: number }
  | { ev: "report"; delays: number[]; received: number; closedEarly: number }
  | { ev: "closed" }
  | { ev: "load"; requests: number; errors: number; seconds: number };

async function clientMain(): Promise<void> {
  const sockets: WebSocket[] = [];
  let measuring = false;
  let delays: number[] = [];
  let received = 0;
  let closedEarly = 0;
  const send = (m: FromChild) => process.send?.(m);

  const openOne = (url: string): Promise<boolean> =>
    new Promise((resolve) => {
      const ws = new WebSocket(url, { perMessageDeflate: false });
      let subscribed = false;
      ws.on("message", (data) => {
        const text = String(data);
        if (!subscribed) {
          subscribed = true;
          resolve(text.includes('"result":"0x'));
          return;
        }
        received++;
        if (!measuring) return;
        const at = text.indexOf('"emittedAtMs":');
        if (at < 0) return;
        const emitted = Number.parseFloat(text.slice(at + 14, text.indexOf("}", at)));
        delays.push(nowMs() - emitted);
      });
      ws.on("open", () => ws.send('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}'));
      ws.on("error", () => {
        if (!subscribed) {
          subscribed = true;
          resolve(false);
        }
      });
      ws.on("close", () => {
        if (subscribed) closedEarly++;
      });
      sockets.push(ws);
    });

  process.on("message", async (m: ToChild) => {
    if (m.cmd === "subscribe") {
      let ok = 0;
      let failed = 0;
      const BATCH = 250;
      for (let i = 0; i < m.count; i += BATCH) {
        const n = Math.min(BATCH, m.count - i);
        const results = await Promise.all(Array.from({ length: n }, () => openOne(m.url)));
        for (const r of results) r ? ok++ : failed++;
      }
      send({ ev: "subscribed", ok, failed });
    } else if (m.cmd === "measure") {
      measuring = m.on;
      if (m.on) delays = [];
    } else if (m.cmd === "report") {
      send({ ev: "report", delays, received, closedEarly });
    } else if (m.cmd === "closeAll") {
      for (const ws of sockets) ws.terminate();
      sockets.length = 0;
      send({ ev: "closed" });
    } else if (m.cmd === "load") {
      send({ ev: "load", ...(await (m.kind === "ws" ? wsLoad(m) : httpLoad(m))) });
    }
  });
}

/** Closed loop: each connection sends the next request when the previous answer arrives. */
async function wsLoad(o: { url: string; method: string; connections: number; ms: number }) {
  const body = (id: number) => `{"jsonrpc":"2.0","id":${id},"method":"${o.method}","params":[]}`;
  const conns = await Promise.all(
    Array.from(
      { length: o.connections },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(o.url, { perMessageDeflate: false });
          ws.once("open", () => resolve(ws));
          ws.once("error", reject);
        }),
    ),
  );
  let requests = 0;
  let errors = 0;
  const deadline = performance.now() + o.ms;
  const start = performance.now();
  await Promise.all(
    conns.map(
      (ws) =>
        new Promise<void>((resolve) => {
          let id = 0;
          ws.on("message", (data) => {
            if (String(data).includes('"error"')) errors++;
            else requests++;
            if (performance.now() < deadline) ws.send(body(++id));
            else resolve();
          });
          ws.send(body(++id));
        }),
    ),
  );
  const seconds = (performance.now() - start) / 1000;
  for (const ws of conns) ws.terminate();
  return { requests, errors, seconds };
}

async function httpLoad(o: { url: string; method: string; connections: number; ms: number }) {
  const url = new URL(o.url);
  const pool = new Pool(url.origin, { connections: o.connections, pipelining: 1 });
  const path = `${url.pathname}${url.search}`;
  const body = `{"jsonrpc":"2.0","id":1,"method":"${o.method}","params":[]}`;
  let requests = 0;
  let errors = 0;
  const deadline = performance.now() + o.ms;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: o.connections }, async () => {
      while (performance.now() < deadline) {
        try {
          const r = await pool.request({
            path,
            method: "POST",
            headers: { "content-type": "application/json" },
            body,
          });
          const text = await r.body.text();
          if (r.statusCode !== 200 || text.includes('"error"')) errors++;
          else requests++;
        } catch {
          errors++;
        }
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  await pool.close();
  return { requests, errors, seconds };
}

// ---------------------------------------------------------------- C epoll reader

/**
 * Builds bench/ws-client.c with gcc into a temp dir; undefined (with the reason on stderr) when gcc or
 * the source is missing, and the bench then measures with the node clients only.
 */
export function buildCClient(): string | undefined {
  const src = resolve(__dirname, "../../bench/ws-client.c");
  if (!existsSync(src)) {
    process.stderr.write(`ws bench: ${src} missing; node clients only\n`);
    return undefined;
  }
  const out = join(mkdtempSync(join(tmpdir(), "rgbench-wsc-")), "ws-client");
  const r = spawnSync("gcc", ["-O2", "-o", out, src], { encoding: "utf8" });
  if (r.status !== 0) {
    process.stderr.write(
      `ws bench: gcc could not build the C client (${r.error?.message ?? r.stderr}); node clients only\n`,
    );
    return undefined;
  }
  return out;
}

// ---------------------------------------------------------------- orchestration

type Report = { delays: number[]; received: number; closedEarly: number };

/** One client process of a delivery run, whichever harness it is. */
interface DeliveryClient {
  readonly pid: number;
  subscribed(): Promise<{ ok: number; failed: number }>;
  measure(on: boolean): void;
  report(): Promise<Report>;
  close(): Promise<void>;
  kill(): void;
}

class Child {
  private readonly waiting: ((m: FromChild) => void)[] = [];
  constructor(readonly proc: ChildProcess) {
    proc.on("message", (m: FromChild) => this.waiting.shift()?.(m));
  }
  ask<T extends FromChild>(m: ToChild): Promise<T> {
    return new Promise((resolve) => {
      this.waiting.push(resolve as (m: FromChild) => void);
      this.proc.send(m);
    });
  }
}

function forkChild(): Child {
  return new Child(fork(__filename, ["--client"], { stdio: ["ignore", "inherit", "inherit", "ipc"] }));
}

/** A node child process with `ws` clients (the original harness). */
class NodeClient implements DeliveryClient {
  private readonly child = forkChild();
  constructor(
    private readonly url: string,
    private readonly count: number,
  ) {}
  get pid(): number {
    return this.child.proc.pid!;
  }
  async subscribed() {
    const r = await this.child.ask<{ ev: "subscribed"; ok: number; failed: number }>({
      cmd: "subscribe",
      url: this.url,
      count: this.count,
    });
    return { ok: r.ok, failed: r.failed };
  }
  measure(on: boolean): void {
    this.child.proc.send({ cmd: "measure", on });
  }
  async report(): Promise<Report> {
    const r = await this.child.ask<{ ev: "report" } & Report>({ cmd: "report" });
    return { delays: r.delays, received: r.received, closedEarly: r.closedEarly };
  }
  async close(): Promise<void> {
    await this.child.ask({ cmd: "closeAll" });
  }
  kill(): void {
    this.child.proc.kill();
  }
}

/** The C epoll reader (bench/ws-client.c): line commands on stdin, line answers on stdout. */
export class CClient implements DeliveryClient {
  private readonly proc: ChildProcess;
  private rest = "";
  private readonly lines: string[] = [];
  private next = 0;
  private wake: (() => void) | undefined;
  private exited = false;

  constructor(binary: string, port: number, path: string, count: number) {
    this.proc = spawn(binary, [String(port), path, String(count)], { stdio: ["pipe", "pipe", "inherit"] });
    this.proc.stdout!.setEncoding("utf8");
    this.proc.stdout!.on("data", (d: string) => {
      const parts = (this.rest + d).split("\n");
      this.rest = parts.pop()!;
      for (const l of parts) this.lines.push(l);
      this.wake?.();
    });
    this.proc.once("exit", () => {
      this.exited = true;
      this.wake?.();
    });
  }
  get pid(): number {
    return this.proc.pid!;
  }
  private async line(): Promise<string> {
    while (this.next >= this.lines.length) {
      if (this.exited) throw new Error("ws bench: the C client exited");
      await new Promise<void>((r) => {
        this.wake = r;
      });
    }
    return this.lines[this.next++]!;
  }
  async subscribed() {
    const [, ok, failed] = (await this.line()).split(" ");
    return { ok: Number(ok), failed: Number(failed) };
  }
  measure(on: boolean): void {
    this.proc.stdin!.write(on ? "m1\n" : "m0\n");
  }
  async report(): Promise<Report> {
    this.proc.stdin!.write("r\n");
    const [, n, received, closedEarly] = (await this.line()).split(" ");
    const delays: number[] = [];
    for (let i = 0; i < Number(n); i++) delays.push(Number(await this.line()));
    this.lines.length = 0;
    this.next = 0;
    return { delays, received: Number(received), closedEarly: Number(closedEarly) };
  }
  async close(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise((r) => this.proc.once("exit", r));
    this.proc.stdin!.write("q\n");
    await gone;
  }
  kill(): void {
    if (!this.exited) this.proc.kill();
  }
}

/**
 * The machine's floor for the same fan-out without the gateway (ws-client.c --floor): a C sender writes
 * one head frame to `count` loopback sockets, read by the C reader. On loopback the sender's write also
 * runs the receiving socket's TCP input and wakes the reader, so this is what any gateway pays here.
 */
export async function runFloor(binary: string, count: number, heads: number): Promise<WsFloor> {
  const proc = spawn(binary, ["--floor", String(count), String(heads)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  proc.stdout!.setEncoding("utf8");
  proc.stdout!.on("data", (d: string) => {
    out += d;
  });
  const code = await new Promise<number | null>((r) => proc.once("exit", r));
  const lines = out.trim().split("\n");
  const sender = lines.pop()?.split(" ") ?? [];
  const cpu = lines.pop()?.split(" ") ?? [];
  if (code !== 0 || sender[0] !== "sender" || cpu[0] !== "cpu")
    throw new Error(`ws bench: floor run failed (${code})`);
  const delays = lines.slice(1).map(Number);
  delays.sort((a, b) => a - b);
  return {
    sockets: count,
    heads,
    notificationsDelivered: delays.length,
    deliveryDelayMs: {
      p50: round(percentile(delays, 50)),
      p90: round(percentile(delays, 90)),
      p99: round(percentile(delays, 99)),
      max: round(delays[delays.length - 1] ?? Number.NaN),
    },
    fanoutMs: { mean: round(Number(sender[1])), max: round(Number(sender[2])) },
    senderCpuMsPerHead: { user: round(Number(sender[3])), system: round(Number(sender[4])) },
    readerCpuMsPerHead: { user: round(Number(cpu[1])), system: round(Number(cpu[2])) },
  };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const round = (n: number, d = 2) => Math.round(n * 10 ** d) / 10 ** d;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let clockTicks = 0;
/** User and system CPU seconds a process has used so far (/proc/PID/stat). */
/** CPU time split by mode (ms, or ms per head where a field's name says so). */
interface CpuSplit {
  user: number;
  system: number;
}

/** Delivery delay percentiles, ms. */
interface DelayPercentiles {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

function processCpu(pid: number): CpuSplit {
  if (clockTicks === 0)
    clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" })) || 100;
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { user: Number(f[11]) / clockTicks, system: Number(f[12]) / clockTicks };
}

function cpuOf(pids: number[]): CpuSplit {
  let user = 0;
  let system = 0;
  for (const p of pids) {
    const c = processCpu(p);
    user += c.user;
    system += c.system;
  }
  return { user, system };
}

/** Which harness a delivery measurement used. */
export type WsHarness = "node-ws" | "c-epoll";

/** One delivery measurement: N clients of one harness subscribed, heads timed for `measureMs`. */
export interface WsDelivery {
  harness: WsHarness;
  clientProcs: number;
  subscribed: number;
  connectSeconds: number;
  heads: number;
  notificationsDelivered: number;
  /** Client sockets that closed during the run (a slow-consumer close would show here). */
  closedEarly: number;
  deliveryDelayMs: DelayPercentiles;
  /** Gateway-internal time to fan one head out to every client: mean in this window, max since start. */
  gatewayFanoutMs: { mean: number; max: number };
  /** CPU per head in this window (/proc/PID/stat, 10 ms ticks), ms: the gateway, and the client processes. */
  gatewayCpuMsPerHead: CpuSplit;
  clientCpuMsPerHead: CpuSplit;
}

/** The same fan-out with no gateway: a C sender straight to the C reader (see runFloor). */
export interface WsFloor {
  sockets: number;
  heads: number;
  notificationsDelivered: number;
  deliveryDelayMs: DelayPercentiles;
  /** Time to write one head to every socket. */
  fanoutMs: { mean: number; max: number };
  senderCpuMsPerHead: CpuSplit;
  readerCpuMsPerHead: CpuSplit;
}

export interface WsBenchResult {
  connections: number;
  /** The harness of the top-level delivery figures (c-epoll when gcc built it); `deliveries` has each. */
  harness: WsHarness;
  subscribed: number;
  connectSeconds: number;
  gatewayRssMiB: { idle: number; connected: number; steady: number; peak: number };
  heads: number;
  notificationsDelivered: number;
  deliveryDelayMs: DelayPercentiles;
  /** Gateway-internal time to fan one head out to every client (from its /metrics). */
  gatewayFanoutMs: { mean: number; max: number };
  deliveries: WsDelivery[];
  /** Null without gcc. */
  floor: WsFloor | null;
  /** 1-minute load average at the start: the figures above are only as quiet as the machine was. */
  loadAverage1m: number;
  throughput: {
    method: string;
    connections: number;
    wsReqPerSec: number;
    httpReqPerSec: number;
    wsErrors: number;
    httpErrors: number;
  };
}

export async function runWsBench(opts: WsBenchOptions = {}): Promise<WsBenchResult> {
  const connections = opts.connections ?? Number(process.env.BENCH_WS_CONNECTIONS ?? 10_000);
  const procs = Math.max(1, opts.clientProcs ?? Number(process.env.BENCH_WS_CLIENT_PROCS ?? 2));
  const cProcs = Math.max(1, opts.cClientProcs ?? Number(process.env.BENCH_WS_C_CLIENT_PROCS ?? 1));
  const harnessWanted = opts.harness ?? process.env.BENCH_WS_HARNESS ?? "both";
  const measureMs = opts.measureMs ?? Number(process.env.BENCH_WS_MEASURE_MS ?? 10_000);
  const loadConnections = opts.loadConnections ?? Number(process.env.BENCH_WS_LOAD_CONNECTIONS ?? 64);
  const loadMs = opts.loadMs ?? Number(process.env.BENCH_WS_LOAD_MS ?? 5_000);
  const redisUrl = opts.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
  const method = opts.method ?? "net_version";
  const loadAverage1m = round(loadavg()[0] ?? 0);
  const threads = opts.threads ?? Number(process.env.BENCH_WS_THREADS ?? 1);

  const harnesses: WsHarness[] = [];
  if (harnessWanted !== "c") harnesses.push("node-ws");
  const cBinary = harnessWanted === "node" ? undefined : buildCClient();
  if (cBinary !== undefined) harnesses.push("c-epoll");
  if (harnesses.length === 0) harnesses.push("node-ws");

  const stub = await startWsStub();
  const prefix = `rgbenchws:${Date.now().toString(36)}:`;
  const names = new RedisNames(prefix);
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 2 });
  const key = generateApiKey();
  await redis.hset(
    names.networks(),
    NETWORK,
    JSON.stringify(
      NetworkRecordSchema.parse({
        slug: NETWORK,
        name: "EVM WS bench (stub upstream)",
        protocol: "EVM",
        chainId: 1,
        allowDebug: false,
        upstreams: [
          {
            id: "stub",
            httpUrl: `http://127.0.0.1:${stub.port}`,
            wsUrl: `ws://127.0.0.1:${stub.port}`,
            weight: 1,
          },
        ],
      }),
    ),
  );
  await redis.set(
    names.apiKey(hashApiKey(key)),
    JSON.stringify(
      KeyRecordSchema.parse({
        kind: "app",
        workspaceId: "ws-bench",
        appId: "app-ws-bench",
        nodeId: null,
        plan: { name: "bench", requestsPerSecond: 1e9, dailyRequestLimit: 1e12, monthlyRequestLimit: null },
        allowlist: { origins: [], ips: [] },
        expiresAtMs: null,
        rpcMethods: null,
      }),
    ),
  );
  await redis.set(names.publishedAt(), new Date().toISOString());

  const gw = await startGateway({
    redisUrl,
    prefix,
    nodeArgs:
      opts.gatewayNodeArgs ?? process.env.BENCH_WS_GATEWAY_NODE_ARGS?.split(" ").filter((a) => a !== ""),
    env: {
      WS_MAX_IN_FLIGHT_PER_CONNECTION: "1000",
      // Every bench socket comes from 127.0.0.1 with one key: the per-key and per-address connection caps
      // (defaults 1000 / 500) are raised to fit the subscribed sockets plus the throughput runs' sockets.
      WS_MAX_CONNECTIONS_PER_KEY: String(connections + loadConnections + 64),
      WS_MAX_CONNECTIONS_PER_IP: String(connections + loadConnections + 64),
      LOG_LEVEL: "warn",
      DATA_PLANE_THREADS: String(threads),
      ...opts.gatewayEnv,
    },
  });
  const live: DeliveryClient[] = [];
  let loader: Child | undefined;
  try {
    const pid = gw.proc.child.pid!;
    const path = `/${NETWORK}/rpc?apikey=${key}`;
    const wsUrl = `ws://127.0.0.1:${gw.port}${path}`;
    const httpUrl = `${gw.baseUrl}${path}`;
    const idle = processMemory(pid).rssMiB;
    let connected = 0;
    let steady = 0;
    const deliveries: WsDelivery[] = [];
    for (const harness of harnesses) {
      const n = harness === "node-ws" ? procs : cProcs;
      const per = Math.ceil(connections / n);
      const clients: DeliveryClient[] = [];
      for (let i = 0; i < n; i++) {
        const count = Math.min(per, connections - i * per);
        clients.push(
          harness === "node-ws" ? new NodeClient(wsUrl, count) : new CClient(cBinary!, gw.port, path, count),
        );
      }
      live.push(...clients);
      const t0 = performance.now();
      const subs = await Promise.all(clients.map((c) => c.subscribed()));
      const connectSeconds = (performance.now() - t0) / 1000;
      await sleep(1000);
      connected = Math.max(connected, processMemory(pid).rssMiB);
      const before = await gatewayFanout(gw.metricsUrl);
      const gwCpu0 = processCpu(pid);
      const clientPids = clients.map((c) => c.pid);
      const clCpu0 = cpuOf(clientPids);
      const headsBefore = stub.heads();
      for (const c of clients) c.measure(true);
      const sampler = setInterval(() => {
        steady = Math.max(steady, processMemory(pid).rssMiB);
      }, 500);
      await sleep(measureMs);
      clearInterval(sampler);
      for (const c of clients) c.measure(false);
      const heads = stub.heads() - headsBefore;
      const gwCpu1 = processCpu(pid);
      const clCpu1 = cpuOf(clientPids);
      const after = await gatewayFanout(gw.metricsUrl);
      const reports = await Promise.all(clients.map((c) => c.report()));
      const all: number[] = [];
      for (const r of reports) for (const d of r.delays) all.push(d);
      all.sort((a, b) => a - b);
      const perHead = (a: number, b: number) => round(((b - a) * 1000) / Math.max(1, heads));
      deliveries.push({
        harness,
        clientProcs: n,
        subscribed: subs.reduce((a, s) => a + s.ok, 0),
        connectSeconds: round(connectSeconds),
        heads,
        notificationsDelivered: all.length,
        closedEarly: reports.reduce((a, r) => a + r.closedEarly, 0),
        deliveryDelayMs: {
          p50: round(percentile(all, 50)),
          p90: round(percentile(all, 90)),
          p99: round(percentile(all, 99)),
          max: round(all[all.length - 1] ?? Number.NaN),
        },
        gatewayFanoutMs: {
          mean: round(
            ((after.seconds - before.seconds) / Math.max(1, after.fanouts - before.fanouts)) * 1000,
          ),
          max: round(after.maxSeconds * 1000),
        },
        gatewayCpuMsPerHead: {
          user: perHead(gwCpu0.user, gwCpu1.user),
          system: perHead(gwCpu0.system, gwCpu1.system),
        },
        clientCpuMsPerHead: {
          user: perHead(clCpu0.user, clCpu1.user),
          system: perHead(clCpu0.system, clCpu1.system),
        },
      });
      await Promise.all(clients.map((c) => c.close()));
      for (const c of clients) c.kill();
      live.length = 0;
      await gatewayIdle(gw.metricsUrl);
    }

    const floor =
      cBinary === undefined
        ? null
        : await runFloor(cBinary, connections, Math.round(measureMs / HEAD_INTERVAL_MS));

    loader = forkChild();
    const l = loader;
    const load = (kind: "ws" | "http", ms = loadMs) =>
      l.ask<{ ev: "load"; requests: number; errors: number; seconds: number }>({
        cmd: "load",
        kind,
        url: kind === "ws" ? wsUrl : httpUrl,
        method,
        connections: loadConnections,
        ms,
      });
    await load("ws", 1500); // warm-up (JIT, upstream keep-alive) for both transports
    await load("http", 1500);
    const ws = await load("ws");
    const http = await load("http");
    const mem = processMemory(pid);
    const main = deliveries[deliveries.length - 1]!;
    const result: WsBenchResult = {
      connections,
      harness: main.harness,
      subscribed: main.subscribed,
      connectSeconds: main.connectSeconds,
      gatewayRssMiB: {
        idle: round(idle, 1),
        connected: round(connected, 1),
        steady: round(steady, 1),
        peak: round(mem.hwmMiB, 1),
      },
      heads: main.heads,
      notificationsDelivered: main.notificationsDelivered,
      deliveryDelayMs: main.deliveryDelayMs,
      gatewayFanoutMs: main.gatewayFanoutMs,
      deliveries,
      floor,
      loadAverage1m,
      throughput: {
        method,
        connections: loadConnections,
        wsReqPerSec: Math.round(ws.requests / ws.seconds),
        httpReqPerSec: Math.round(http.requests / http.seconds),
        wsErrors: ws.errors,
        httpErrors: http.errors,
      },
    };
    return result;
  } finally {
    for (const c of live) c.kill();
    loader?.proc.kill();
    await gw.proc.stop();
    stub.close();
    let cursor = "0";
    do {
      const [next, found] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (found.length > 0) await redis.unlink(...found);
    } while (cursor !== "0");
    redis.disconnect();
  }
}

async function metricsText(base: string): Promise<string> {
  return (await fetch(`${base}/metrics`)).text();
}

function metric(text: string, name: string): number {
  return Number(new RegExp(`^${name} ([0-9.e+-]+)$`, "m").exec(text)?.[1] ?? Number.NaN);
}

async function gatewayFanout(
  base: string,
): Promise<{ seconds: number; fanouts: number; maxSeconds: number }> {
  const text = await metricsText(base);
  return {
    seconds: metric(text, "rpcgw_ws_fanout_seconds_total"),
    fanouts: metric(text, "rpcgw_ws_fanouts_total"),
    maxSeconds: metric(text, "rpcgw_ws_fanout_max_seconds"),
  };
}

/** Waits (up to 15 s) for the gateway to have closed one harness's sockets before the next starts. */
async function gatewayIdle(base: string): Promise<void> {
  const deadline = performance.now() + 15_000;
  while (performance.now() < deadline) {
    if (metric(await metricsText(base), "rpcgw_ws_connections") === 0) break;
    await sleep(200);
  }
  await sleep(500);
}

export function printWsBench(r: WsBenchResult): void {
  const lines = [
    `WS bench: ${r.connections} connections subscribed to newHeads (load average ${r.loadAverage1m} at the start)`,
    `  gateway RSS: idle ${r.gatewayRssMiB.idle} MiB, connected ${r.gatewayRssMiB.connected} MiB, steady ${r.gatewayRssMiB.steady} MiB, peak ${r.gatewayRssMiB.peak} MiB`,
  ];
  for (const d of r.deliveries) {
    lines.push(
      `  [${d.harness} clients, ${d.clientProcs} process(es)${d.harness === r.harness ? ", the figure kept" : ""}] ${d.subscribed} subscribed in ${d.connectSeconds} s`,
      `    delivery delay (upstream emission -> client): p50 ${d.deliveryDelayMs.p50} ms, p90 ${d.deliveryDelayMs.p90} ms, p99 ${d.deliveryDelayMs.p99} ms, max ${d.deliveryDelayMs.max} ms over ${d.notificationsDelivered} notifications (${d.heads} heads, ${d.closedEarly} sockets closed)`,
      `    gateway fan-out of one head to all clients: mean ${d.gatewayFanoutMs.mean} ms (max since start ${d.gatewayFanoutMs.max} ms)`,
      `    CPU per head: gateway ${d.gatewayCpuMsPerHead.user} ms user + ${d.gatewayCpuMsPerHead.system} ms sys, clients ${d.clientCpuMsPerHead.user} ms user + ${d.clientCpuMsPerHead.system} ms sys`,
    );
  }
  const f = r.floor;
  if (f !== null) {
    lines.push(
      `  [floor: no gateway, a C sender writing each head to ${f.sockets} loopback sockets, read by the C reader]`,
      `    delivery delay: p50 ${f.deliveryDelayMs.p50} ms, p90 ${f.deliveryDelayMs.p90} ms, p99 ${f.deliveryDelayMs.p99} ms, max ${f.deliveryDelayMs.max} ms over ${f.notificationsDelivered} notifications (${f.heads} heads)`,
      `    sender's fan-out of one head: mean ${f.fanoutMs.mean} ms, max ${f.fanoutMs.max} ms; CPU per head: sender ${f.senderCpuMsPerHead.user} ms user + ${f.senderCpuMsPerHead.system} ms sys, reader ${f.readerCpuMsPerHead.user} ms user + ${f.readerCpuMsPerHead.system} ms sys`,
    );
  }
  lines.push(
    `  ${r.throughput.method} with ${r.throughput.connections} connections: WS ${r.throughput.wsReqPerSec} req/s (${r.throughput.wsErrors} errors), HTTP ${r.throughput.httpReqPerSec} req/s (${r.throughput.httpErrors} errors)`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

if (require.main === module) {
  if (process.argv.includes("--client")) {
    void clientMain();
  } else {
    runWsBench().then(
      (r) => {
        printWsBench(r);
        process.stdout.write(`${JSON.stringify(r)}\n`);
        process.exit(0);
      },
      (err: unknown) => {
        process.stderr.write(`ws bench failed: ${(err as Error).stack ?? String(err)}\n`);
        process.exit(1);
      },
    );
  }
}
