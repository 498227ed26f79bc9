import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { type AddressInfo, createServer } from "node:net";
import { Redis } from "ioredis";
import type { NodeRecord } from "../../../../shared/src/redis/records";
import { type Anvil, startAnvil } from "../../../helpers/anvil";
import { eventually } from "../../../helpers/eventually";
import { acceptsConnection } from "../../../helpers/ports";
import { startProcess } from "../../../helpers/process";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../../helpers/seed-redis";
import { ADMIN_TOKEN, createApp, type Harness, startHarness } from "../../control-plane/harness";
import {
  type Answer,
  connectionOn,
  DATA_PLANE_MAIN,
  perThreadDelta,
  postMany,
  type Sample,
  scrape,
  startThreadedPlane,
  sumOf,
  type ThreadConnection,
  type ThreadedPlane,
} from "./fixture";

const REGEN = `mutation($id: ID!) { regenerateApiKey(appId: $id) { apiKey } }`;
const NODE_ID = "3a1f2b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b";
const chainId = (i: number) => ({ jsonrpc: "2.0", id: i, method: "eth_chainId" });

const statuses = (answers: readonly Answer[]) => {
  const out: Record<number, number> = {};
  for (const a of answers) out[a.status] = (out[a.status] ?? 0) + 1;
  return out;
};

/**
 * Both threads answered part of what was sent between two scrapes. 40 connections all hashed onto one of
 * two listen sockets would happen once in 2^39 runs: a thread with nothing means it was not listening.
 */
function bothThreadsServed(before: Sample[], after: Sample[], what: string): Map<string, number> {
  const d = perThreadDelta(before, after);
  assert.deepEqual([...d.keys()].sort(), ["1", "2"], `${what}: per-thread series`);
  for (const [t, n] of d) assert.ok(n > 0, `${what}: thread ${t} answered none (${JSON.stringify([...d])})`);
  return d;
}

/**
 * Asks, on a connection served by each thread, until that thread answers `status` (no bound on how long
 * a change takes to spread beyond eventually()'s deadline: timings belong to the bench); returns when the
 * slower thread got there (ms from `t0`, logged for information).
 */
async function untilEveryThread(
  conns: readonly ThreadConnection[],
  path: string,
  status: number,
  t0: number,
): Promise<number> {
  const at = await Promise.all(
    conns.map(async (c) => {
      await eventually(
        async () => (await c.post(path, chainId(1))).status === status,
        `thread ${c.thread} to answer ${status}`,
      );
      return performance.now() - t0;
    }),
  );
  return Math.max(...at);
}

describe("data plane with DATA_PLANE_THREADS=2: connections spread, /metrics sums, changes reach every thread", function () {
  this.timeout(120_000);
  let h: Harness;
  let anvil: Anvil;
  let plane: ThreadedPlane;
  let user: { token: string };
  let app: { id: string; apiKey: string };
  let redis: Redis;
  /** One kept-alive connection served by thread 1, one by thread 2. */
  let conns: ThreadConnection[] = [];

  before(async () => {
    h = await startHarness();
    anvil = await startAnvil();
    redis = new Redis(TEST_REDIS_URL);
    await h.ok(
      `mutation($a: String!) {
        n: createNetwork(input: { slug: "evm-anvil", name: "Anvil", protocol: EVM, chainId: 31337 }) { id }
        u: addUpstream(networkSlug: "evm-anvil", input: { httpUrl: $a }) { id } }`,
      { a: anvil.httpUrl },
      ADMIN_TOKEN,
    );
    user = await h.signUp();
    app = await createApp(h, user.token, "threads");
    plane = await startThreadedPlane(h.ns.prefix, {
      // The free plan's 50 req/s would refuse these bursts: limits have their own suite (threads-limits).
      RATE_LIMIT_MODE: "off",
      QUOTA_MODE: "off",
      USAGE_MODE: "off",
    });
    conns = [await connectionOn(plane.port, 1), await connectionOn(plane.port, 2)];
  });

  after(async () => {
    for (const c of conns) c.close();
    const code = await plane?.proc.stop(20_000);
    redis?.disconnect();
    await anvil?.stop();
    await h?.close();
    assert.equal(code, 0, plane?.proc.output());
  });

  it("spreads connections over both threads, and /metrics counts every request once, summed over the threads", async () => {
    const path = `/evm-anvil/rpc?apikey=${app.apiKey}`;
    const before = await scrape(plane.metricsBase);
    const n = 200;
    const answers = await postMany(plane.port, path, chainId, n);
    assert.deepEqual(statuses(answers), { 200: n });
    assert.ok(answers.every((a, i) => a.json.id === i && a.json.result === "0x7a69"));
    const after = await scrape(plane.metricsBase);
    const delta = (name: string, match: Record<string, string> = {}) =>
      sumOf(after, name, match) - sumOf(before, name, match);
    // The process's counters: exactly what was sent, whichever thread answered it.
    assert.equal(delta("rpcgw_requests_total", { network: "evm-anvil", category: "Success" }), n);
    assert.equal(delta("rpcgw_request_duration_seconds_count", { network: "evm-anvil" }), n);
    assert.equal(delta("rpcgw_request_duration_seconds_bucket", { network: "evm-anvil", le: "+Inf" }), n);
    assert.equal(delta("rpcgw_cache_lookups_total", { network: "evm-anvil" }), n);
    // How the kernel spread the connections: each thread's share of the 200 (binomial, sd ~7).
    const d = bothThreadsServed(before, after, "200 connections");
    console.log(`      200 connections: thread 1 answered ${d.get("1")}, thread 2 ${d.get("2")}`);
    for (const [t, served] of d) assert.ok(served >= n * 0.25, `thread ${t} answered only ${served} of ${n}`);
    assert.equal(d.get("1")! + d.get("2")!, n);
    assert.equal(sumOf(after, "rpcgw_data_plane_threads"), 2);
    assert.equal(sumOf(after, "rpcgw_thread_up"), 2, "both threads answered the scrape");
    // Gauges are combined, not summed: one upstream, selectable on every thread.
    assert.equal(sumOf(after, "rpcgw_upstream_healthy", { network: "evm-anvil" }), 1);
  });

  it("/metrics is served on METRICS_PORT (loopback only by default), never on the public port of any thread", async () => {
    // The public port: an unknown path on both threads, whatever the method.
    for (const c of conns) {
      const a = await c.post("/metrics", chainId(1));
      assert.equal(a.status, 404, `thread ${c.thread}`);
      assert.equal(a.json.error.code, -32601);
    }
    for (let i = 0; i < 10; i++) {
      const r = await fetch(`${plane.base}/metrics`, { headers: { connection: "close" } });
      assert.equal(r.status, 404);
      assert.ok(!(await r.text()).includes("rpcgw_"), "no series on the public port");
    }
    const res = await fetch(`${plane.metricsBase}/metrics`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /^rpcgw_data_plane_threads 2$/m);
    // METRICS_HOST unset (the fixture sets only METRICS_PORT): bound to 127.0.0.1, not every interface.
    const metricsPort = Number(new URL(plane.metricsBase).port);
    assert.equal(await acceptsConnection("127.0.0.1", metricsPort), true);
    assert.equal(await acceptsConnection("127.0.0.2", metricsPort), false, "reachable beyond 127.0.0.1");
    // The control: a listener on every interface does accept 127.0.0.2.
    const any = createServer();
    await new Promise<void>((r) => any.listen(0, "0.0.0.0", r));
    try {
      assert.equal(await acceptsConnection("127.0.0.2", (any.address() as AddressInfo).port), true);
    } finally {
      any.close();
    }
  });

  it("a filter made on one thread is polled and uninstalled on the other (filters live in Redis)", async () => {
    const path = `/evm-anvil/rpc?apikey=${app.apiKey}`;
    const [t1, t2] = conns as [ThreadConnection, ThreadConnection];
    const rpc1 = (method: string, params: unknown[] = []) =>
      t1.post(path, { jsonrpc: "2.0", id: 1, method, params });
    const rpc2 = (method: string, params: unknown[] = []) =>
      t2.post(path, { jsonrpc: "2.0", id: 1, method, params });
    const head = async () => Number.parseInt((await rpc1("eth_blockNumber")).json.result as string, 16);
    const start = await head();
    const id = (await rpc1("eth_newBlockFilter")).json.result as string;
    assert.match(id, /^0x[0-9a-f]{32}$/);
    await fetch(anvil.httpUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x3"] }),
    });
    const hashes: string[] = [];
    await eventually(async () => {
      const r = await rpc2("eth_getFilterChanges", [id]);
      assert.equal(r.json.error, undefined, r.text);
      hashes.push(...(r.json.result as string[]));
      return hashes.length >= 3;
    }, `3 block hashes through thread 2 (${hashes.length})`);
    assert.equal(hashes.length, 3, "each block once");
    const third = (await rpc1("eth_getBlockByNumber", [`0x${(start + 3).toString(16)}`, false])).json.result;
    assert.equal(hashes[2], third.hash);
    assert.equal((await rpc1("eth_uninstallFilter", [id])).json.result, true);
    const gone = await rpc2("eth_getFilterChanges", [id]);
    assert.equal(gone.json.error.message, "filter not found");
  });

  it("a key regenerated in the control plane: the old key is refused on every thread, the new one served on both", async () => {
    const oldPath = `/evm-anvil/rpc?apikey=${app.apiKey}`;
    // The old key cached on both threads first (the revocation must reach a cache, not a miss).
    for (const c of conns)
      assert.equal((await c.post(oldPath, chainId(1))).status, 200, `thread ${c.thread}`);

    const t0 = performance.now();
    const r = await h.ok<{ regenerateApiKey: { apiKey: string } }>(REGEN, { id: app.id }, user.token);
    const took = await untilEveryThread(conns, oldPath, 401, t0);
    const newPath = `/evm-anvil/rpc?apikey=${r.regenerateApiKey.apiKey}`;
    for (const c of conns)
      assert.equal((await c.post(newPath, chainId(2))).status, 200, `thread ${c.thread}`);
    // And on fresh connections, whichever thread each lands on.
    const before = await scrape(plane.metricsBase);
    assert.deepEqual(statuses(await postMany(plane.port, oldPath, chainId, 40)), { 401: 40 });
    assert.deepEqual(statuses(await postMany(plane.port, newPath, chainId, 40)), { 200: 40 });
    bothThreadsServed(before, await scrape(plane.metricsBase), "after the revocation");
    console.log(`      old key refused on both threads ${took.toFixed(0)} ms after the mutation was sent`);
    app = { id: app.id, apiKey: r.regenerateApiKey.apiKey };
  });

  it("a network added in the control plane is served by every thread", async () => {
    const path = `/evm-anvil-2/rpc?apikey=${app.apiKey}`;
    for (const c of conns) assert.equal((await c.post(path, chainId(1))).status, 404, "not yet");
    const t0 = performance.now();
    await h.ok(
      `mutation($a: String!) {
        n: createNetwork(input: { slug: "evm-anvil-2", name: "Anvil 2", protocol: EVM, chainId: 31337 }) { id }
        u: addUpstream(networkSlug: "evm-anvil-2", input: { httpUrl: $a }) { id } }`,
      { a: anvil.httpUrl },
      ADMIN_TOKEN,
    );
    const took = await untilEveryThread(conns, path, 200, t0);
    const before = await scrape(plane.metricsBase);
    assert.deepEqual(statuses(await postMany(plane.port, path, chainId, 40)), { 200: 40 });
    bothThreadsServed(before, await scrape(plane.metricsBase), "the new network");
    console.log(`      new network served on both threads ${took.toFixed(0)} ms after the mutation was sent`);
  });

  it("a dedicated node's change (node.update) reaches every thread", async () => {
    const seeder = new RedisSeeder(h.ns.prefix);
    try {
      const key = await seeder.putKey({ kind: "node", appId: null, nodeId: NODE_ID, rpcMethods: "SAFE" });
      const putNode = async (status: string) => {
        const rec: NodeRecord = {
          nodeId: NODE_ID,
          workspaceId: "ws-threads",
          protocol: "EVM",
          httpUrl: anvil.httpUrl,
          wsUrl: anvil.wsUrl,
          status,
        };
        await redis.set(seeder.names.node(NODE_ID), JSON.stringify(rec));
        await seeder.publish({ type: "node.update", nodeId: NODE_ID });
      };
      const path = `/nodes/${NODE_ID}/${encodeURIComponent(key)}`;
      await putNode("SYNCING");
      // Both threads hold the SYNCING record (503 node_unavailable) before the change.
      await untilEveryThread(conns, path, 503, performance.now());
      for (const c of conns) {
        const a = await c.post(path, chainId(1));
        assert.equal(a.json.error.data.reason, "node_unavailable", `thread ${c.thread}`);
      }
      const t0 = performance.now();
      await putNode("SYNCED");
      const took = await untilEveryThread(conns, path, 200, t0);
      for (const c of conns) assert.equal((await c.post(path, chainId(7))).json.result, "0x7a69");
      assert.deepEqual(statuses(await postMany(plane.port, path, chainId, 40)), { 200: 40 });
      console.log(`      node served on both threads ${took.toFixed(0)} ms after node.update`);
    } finally {
      await seeder.close();
    }
  });
});

describe("data plane with DATA_PLANE_THREADS=2: start-up", function () {
  this.timeout(60_000);
  let ns: TestRedisNamespace;
  let seeder: RedisSeeder;

  before(async () => {
    ns = createTestRedisNamespace();
    seeder = new RedisSeeder(ns.prefix);
    await seeder.putNetwork(evmNetwork("eth", [{ id: "u1", httpUrl: "http://127.0.0.1:9" }]));
  });
  after(async () => {
    await seeder?.close();
    await ns?.cleanup();
  });

  const env = (port: number) => ({
    DATA_PLANE_THREADS: "2",
    DATA_PLANE_PORT: String(port),
    DATA_PLANE_HOST: "127.0.0.1",
    REDIS_URL: TEST_REDIS_URL,
    REDIS_KEY_PREFIX: ns.prefix,
    LOG_LEVEL: "info",
  });

  it("DATA_PLANE_PORT=0: both threads listen on the one free port picked (uWS binds port 0 without SO_REUSEPORT)", async () => {
    const proc = await startProcess(process.execPath, [DATA_PLANE_MAIN], {
      env: env(0),
      readyLine: /data plane threads listening/,
    });
    try {
      const line = proc
        .output()
        .split("\n")
        .find((l) => l.includes("data plane threads listening"))!;
      const port = (JSON.parse(line) as { port: number }).port;
      assert.ok(port > 0);
      // Connections to it reach both threads (connectionOn fails after 100 that all missed one).
      for (const thread of [1, 2]) (await connectionOn(port, thread)).close();
    } finally {
      assert.equal(await proc.stop(20_000), 0, proc.output());
    }
  });

  it("a metrics port already taken stops the whole process: exit 1, the reason on stderr", async () => {
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, "127.0.0.1", r));
    const metricsPort = (holder.address() as AddressInfo).port;
    try {
      const child = spawn(process.execPath, [DATA_PLANE_MAIN], {
        env: { ...process.env, ...env(0), METRICS_PORT: String(metricsPort) },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => {
        out += d;
      });
      child.stderr.on("data", (d: Buffer) => {
        out += d;
      });
      const code = await new Promise<number | null>((r) => child.once("exit", r));
      assert.equal(code, 1, out);
      assert.match(
        out,
        new RegExp(`could not serve metrics on 127\\.0\\.0\\.1:${metricsPort}: .*EADDRINUSE`),
      );
    } finally {
      holder.close();
    }
  });

  it("a thread that cannot listen stops the whole process: exit 1, the reason on stderr", async () => {
    // A socket without SO_REUSEPORT holds the port: no thread can join it.
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, "127.0.0.1", r));
    const port = (holder.address() as AddressInfo).port;
    try {
      const child = spawn(process.execPath, [DATA_PLANE_MAIN], {
        env: { ...process.env, ...env(port) },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => {
        out += d;
      });
      child.stderr.on("data", (d: Buffer) => {
        out += d;
      });
      const code = await new Promise<number | null>((r) => child.once("exit", r));
      assert.equal(code, 1, out);
      assert.match(out, new RegExp(`data plane could not listen on 127\\.0\\.0\\.1:${port}`));
    } finally {
      holder.close();
    }
  });
});
