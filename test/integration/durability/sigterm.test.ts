import assert from "node:assert/strict";
import http from "node:http";
import { resolve } from "node:path";
import { Redis } from "ioredis";
import { RedisNames } from "../../../shared/src/redis/keys";
import { USAGE_STREAM_FIELD, type UsageBatch } from "../../../shared/src/usage/contract";
import { eventually } from "../../helpers/eventually";
import { freePort } from "../../helpers/ports";
import { type StartedProcess, startProcess } from "../../helpers/process";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../helpers/seed-redis";
import { sleep } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";
import { TestWsClient } from "../data-plane/ws/ws-client";

const DATA_PLANE_MAIN = resolve(__dirname, "../../../data-plane/src/main.js");
const WS = "5b0c3a1e-0d6f-4f7e-9a4e-2f1d1c0b9a01";
const APP = "7c1d2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

interface Outcome {
  status?: number;
  close?: boolean;
  /** Error code when no answer came. */
  error?: string;
}

/**
 * One POST on a keep-alive agent. An answer is only "got" when its whole body arrived; anything else is
 * an error code: ECONNREFUSED (the listen socket is gone: the request never reached the server, the
 * client's to retry) or anything else (a request written and cut without an answer).
 */
function send(agent: http.Agent, port: number, path: string, body: string): Promise<Outcome> {
  return new Promise((done) => {
    const req = http.request(
      {
        agent,
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => {
          text += d;
        });
        res.on("end", () => {
          const complete =
            res.complete && text.length === Number(res.headers["content-length"] ?? text.length);
          if (!complete) return done({ error: "INCOMPLETE" });
          done({ status: res.statusCode, close: res.headers.connection === "close" });
        });
        res.on("error", (err: NodeJS.ErrnoException) => done({ error: err.code ?? err.message }));
      },
    );
    req.on("error", (err: NodeJS.ErrnoException) => done({ error: err.code ?? err.message }));
    req.end(body);
  });
}

/** Sums the usage rows in the stream (each batchId once). */
async function streamUsage(redis: Redis, names: RedisNames) {
  const entries = await redis.xrange(names.usageStream(), "-", "+");
  const seen = new Set<string>();
  const out = { app: 0, appSuccess: 0, shuttingDown: 0, other: 0 };
  for (const [, fields] of entries) {
    const i = fields.indexOf(USAGE_STREAM_FIELD);
    const batch = JSON.parse(fields[i + 1]!) as UsageBatch;
    if (seen.has(batch.batchId)) continue;
    seen.add(batch.batchId);
    for (const r of batch.rows) {
      if (r.appId === APP) {
        out.app += r.count;
        if (r.category === "Success") out.appSuccess += r.count;
        // The 503 shutting_down answers: counted under the app whose key the request carried.
        if (r.category === "Service Error") out.shuttingDown += r.count;
      } else {
        out.other += r.count;
      }
    }
  }
  return out;
}

describe("durability: SIGTERM under load from keep-alive clients", function () {
  this.timeout(120_000);
  let ns: TestRedisNamespace;
  let seeder: RedisSeeder;
  let stub: StubUpstream;
  let redis: Redis;
  let key = "";

  before(async () => {
    ns = createTestRedisNamespace();
    seeder = new RedisSeeder(ns.prefix);
    stub = await new StubUpstream().start();
    redis = new Redis(TEST_REDIS_URL);
    await seeder.putNetwork(evmNetwork("evm-stub", [{ id: "up", httpUrl: stub.url }]));
    key = await seeder.putKey({ workspaceId: WS, appId: APP });
  });

  after(async () => {
    redis?.disconnect();
    await seeder?.close();
    await stub?.stop();
    await ns?.cleanup();
  });

  it("a request on an idle kept-alive connection after the drain gets a clean 503 shutting_down, counted", async () => {
    const prefix = `${ns.prefix}idle:`;
    const names = new RedisNames(prefix);
    const runSeeder = new RedisSeeder(prefix);
    await runSeeder.putNetwork(evmNetwork("evm-stub", [{ id: "up", httpUrl: stub.url }]));
    const runKey = await runSeeder.putKey({ workspaceId: WS, appId: APP }, key);
    await runSeeder.close();
    const port = await freePort();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    let proc: StartedProcess | undefined;
    try {
      proc = await startProcess(process.execPath, [DATA_PLANE_MAIN], {
        env: {
          DATA_PLANE_PORT: String(port),
          DATA_PLANE_HOST: "127.0.0.1",
          REDIS_URL: TEST_REDIS_URL,
          REDIS_KEY_PREFIX: prefix,
          // info: the "shutting down" line says the signal was handled (the drain is then over at once:
          // nothing is in flight).
          LOG_LEVEL: "info",
          RATE_LIMIT_MODE: "off",
          QUOTA_MODE: "off",
          USAGE_FLUSH_INTERVAL_MS: "10000",
          SHUTDOWN_LINGER_MS: "1500",
          DATA_PLANE_THREADS: "2",
        },
        ready: async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
      });
      const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" });
      const path = `/evm-stub/rpc?apikey=${runKey}`;
      const first = await send(agent, port, path, body);
      assert.deepEqual(first, { status: 200, close: false });
      const exited = proc.stop(20_000);
      const p = proc;
      await eventually(() => /shutting down: draining/.test(p.output()), "the shutting-down log line");
      const late = await new Promise<{ status?: number; close?: boolean; text: string }>((done) => {
        const req = http.request(
          {
            agent,
            host: "127.0.0.1",
            port,
            path,
            method: "POST",
            headers: { "content-type": "application/json" },
          },
          (res) => {
            let text = "";
            res.on("data", (d) => {
              text += d;
            });
            res.on("end", () =>
              done({ status: res.statusCode, close: res.headers.connection === "close", text }),
            );
          },
        );
        req.on("error", (err) => done({ text: String(err) }));
        req.end(body);
      });
      assert.equal(late.status, 503, late.text);
      assert.equal(late.close, true);
      const err = JSON.parse(late.text).error;
      assert.equal(err.data.reason, "shutting_down");
      assert.equal(err.data.category, "Service Error");
      assert.equal(await exited, 0, proc.output());
      // Both threads drained and flushed their usage (the served request is on one, the refusal too).
      assert.equal(
        proc.output().match(/"thread":[12],"msg":"data plane stopped"/g)?.length,
        2,
        proc.output(),
      );
      const u = await streamUsage(redis, names);
      assert.deepEqual(u, { app: 2, appSuccess: 1, shuttingDown: 1, other: 0 });
    } finally {
      agent.destroy();
      await proc?.stop();
    }
  });

  // DATA_PLANE_THREADS=2 (what a 2-CPU machine runs by default), and once with the single thread.
  for (const [run, threads] of [
    [1, 2],
    [2, 2],
    [3, 2],
    [4, 1],
  ] as const) {
    it(`run ${run} (${threads} thread${threads > 1 ? "s" : ""}): busy and sporadic keep-alive clients: every request answered and counted, or refused before it was sent; 0 cut`, async () => {
      // Each run reads its own stream: a fresh prefix per run.
      const prefix = `${ns.prefix}r${run}:`;
      const names = new RedisNames(prefix);
      const runSeeder = new RedisSeeder(prefix);
      await runSeeder.putNetwork(evmNetwork("evm-stub", [{ id: "up", httpUrl: stub.url }]));
      const runKey = await runSeeder.putKey({ workspaceId: WS, appId: APP }, key);
      await runSeeder.close();
      const port = await freePort();
      let proc: StartedProcess | undefined;
      const agents: http.Agent[] = [];
      try {
        proc = await startProcess(process.execPath, [DATA_PLANE_MAIN], {
          env: {
            DATA_PLANE_PORT: String(port),
            DATA_PLANE_HOST: "127.0.0.1",
            REDIS_URL: TEST_REDIS_URL,
            REDIS_KEY_PREFIX: prefix,
            LOG_LEVEL: "warn",
            RATE_LIMIT_MODE: "off",
            QUOTA_MODE: "off",
            USAGE_FLUSH_INTERVAL_MS: "10000", // only the final flush writes: what it holds is the question
            SHUTDOWN_DRAIN_MS: "5000",
            // Above the sporadic clients' longest pause (185 ms) with room for timers running late on a
            // busy machine: a request sent after the linger hits a connection being closed (reset).
            SHUTDOWN_LINGER_MS: "1500",
            DATA_PLANE_THREADS: String(threads),
          },
          ready: async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
        });
        stub.delayMs = 20; // requests in flight at the signal
        const outcomes: Outcome[] = [];
        let signalled = false;
        // 8 clients, each its own keep-alive agent with 2 sockets and 2 concurrent request loops.
        const loop = async (agent: http.Agent, k: number, pauseMs = 0) => {
          for (let i = 0; ; i++) {
            if (pauseMs > 0) await sleep(pauseMs);
            const o = await send(
              agent,
              port,
              `/evm-stub/rpc?apikey=${runKey}`,
              JSON.stringify({ jsonrpc: "2.0", id: `${k}-${i}`, method: "eth_getBalance", params: [k, i] }),
            );
            outcomes.push(o);
            if (o.error === "ECONNREFUSED") return; // the server is gone for this client
            if (o.error !== undefined && signalled) return;
          }
        };
        const loops: Promise<void>[] = [];
        for (let c = 0; c < 8; c++) {
          const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
          agents.push(agent);
          loops.push(loop(agent, c * 2), loop(agent, c * 2 + 1));
        }
        // 6 sporadic clients: their kept-alive connection sits idle between requests, so some of them
        // send after the drain (refused, 503) and none of them may be cut.
        for (let c = 0; c < 6; c++) {
          const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
          agents.push(agent);
          loops.push(loop(agent, 100 + c, 60 + 25 * c));
        }
        // The signal comes under load: once more than 100 requests were served (counted, not timed).
        await eventually(
          () => outcomes.filter((o) => o.status === 200).length > 100,
          "100 requests served before the signal",
          30_000,
        );
        signalled = true;
        const code = await proc.stop(20_000);
        assert.equal(code, 0, proc.output());
        await Promise.all(loops);

        const answered = outcomes.filter((o) => o.status !== undefined);
        const ok = answered.filter((o) => o.status === 200).length;
        const refused503 = answered.filter((o) => o.status === 503).length;
        const notSent = outcomes.filter((o) => o.error === "ECONNREFUSED").length;
        const cut = outcomes.filter((o) => o.error !== undefined && o.error !== "ECONNREFUSED");
        assert.deepEqual(
          cut.map((o) => o.error),
          [],
          "requests cut without an answer",
        );
        assert.equal(ok + refused503, answered.length, "only 200 and 503 answers");
        assert.ok(ok > 100, `only ${ok} answered`);
        assert.ok(
          answered.filter((o) => o.status === 503).every((o) => o.close),
          "a 503 without Connection: close",
        );
        assert.ok(
          answered.some((o) => o.status === 200 && o.close),
          "no request was served (with Connection: close) during the drain",
        );
        const u = await streamUsage(redis, names);
        // 0 answered-but-uncounted, and nothing counted that was not answered.
        assert.deepEqual(
          { served: u.appSuccess, app: u.app, refused: u.shuttingDown, other: u.other },
          { served: ok, app: ok + refused503, refused: refused503, other: 0 },
        );
        console.log(
          `      ${ok} served (all counted), ${refused503} refused 503 (counted), ${notSent} refused at connect, 0 cut`,
        );
      } finally {
        stub.delayMs = 0;
        for (const a of agents) a.destroy();
        await proc?.stop();
      }
    });
  }
  it("steady WebSocket traffic plus keep-alive HTTP clients: every request answered (200 or 503 shutting_down) and counted, 0 cut, no full-length drain", async () => {
    const prefix = `${ns.prefix}ws:`;
    const names = new RedisNames(prefix);
    const runSeeder = new RedisSeeder(prefix);
    await runSeeder.putNetwork(evmNetwork("evm-stub", [{ id: "up", httpUrl: stub.url }]));
    const runKey = await runSeeder.putKey({ workspaceId: WS, appId: APP }, key);
    await runSeeder.close();
    const port = await freePort();
    const drainMs = 8000;
    let proc: StartedProcess | undefined;
    const agents: http.Agent[] = [];
    let ws: TestWsClient | undefined;
    try {
      proc = await startProcess(process.execPath, [DATA_PLANE_MAIN], {
        env: {
          DATA_PLANE_PORT: String(port),
          DATA_PLANE_HOST: "127.0.0.1",
          REDIS_URL: TEST_REDIS_URL,
          REDIS_KEY_PREFIX: prefix,
          LOG_LEVEL: "info",
          RATE_LIMIT_MODE: "off",
          QUOTA_MODE: "off",
          USAGE_FLUSH_INTERVAL_MS: "10000",
          SHUTDOWN_DRAIN_MS: String(drainMs),
          SHUTDOWN_LINGER_MS: "1500",
          DATA_PLANE_THREADS: "2",
        },
        ready: async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
      });
      const p = proc;
      stub.delayMs = 20;
      // One WebSocket call is still upstream when the signal comes: the drain waits for its answer.
      stub.methodDelayMs.set("eth_getCode", 1000);
      ws = await TestWsClient.open(`ws://127.0.0.1:${port}/evm-stub/rpc?apikey=${runKey}`);
      const c = ws;
      // WebSocket: 4 request loops on one socket, each waiting for its answer before the next. Like a
      // client that fails over, the socket's loops stop sending once one of them is refused.
      const wsOut = { ok: 0, refused: 0, cut: 0, other: [] as string[] };
      let wsStop = false;
      const wsLoop = async (k: number) => {
        for (let i = 0; !wsStop; i++) {
          let a: { result?: unknown; error?: { data?: { reason?: string } } };
          try {
            a = await c.call("eth_getBalance", [`0x${k}`, `0x${i.toString(16)}`], 15_000);
          } catch {
            wsOut.cut++; // the socket closed (or nothing came) with this request unanswered
            return;
          }
          if (a.result !== undefined) wsOut.ok++;
          else if (a.error?.data?.reason === "shutting_down") {
            wsOut.refused++;
            wsStop = true;
          } else wsOut.other.push(JSON.stringify(a));
        }
      };
      const wsLoops = [0, 1, 2, 3].map((k) => wsLoop(k));
      // HTTP: 4 busy keep-alive loops and 3 sporadic ones (idle connection between requests).
      const outcomes: Outcome[] = [];
      let signalled = false;
      const loop = async (agent: http.Agent, k: number, pauseMs = 0) => {
        for (let i = 0; ; i++) {
          if (pauseMs > 0) await sleep(pauseMs);
          const o = await send(
            agent,
            port,
            `/evm-stub/rpc?apikey=${runKey}`,
            JSON.stringify({ jsonrpc: "2.0", id: `${k}-${i}`, method: "eth_getBalance", params: [k, i] }),
          );
          outcomes.push(o);
          if (o.error === "ECONNREFUSED") return;
          if (o.error !== undefined && signalled) return;
        }
      };
      const loops: Promise<void>[] = [];
      for (let i = 0; i < 4; i++) {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        agents.push(agent);
        loops.push(loop(agent, i));
      }
      for (let i = 0; i < 3; i++) {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        agents.push(agent);
        loops.push(loop(agent, 100 + i, 60 + 40 * i));
      }
      // The signal comes under load: once more than 20 HTTP and 20 WebSocket calls were served.
      await eventually(
        () => outcomes.filter((o) => o.status === 200).length > 20 && wsOut.ok > 20,
        "20 HTTP and 20 WebSocket calls served before the signal",
        30_000,
      );
      // Coalesced upstream with whatever WebSocket calls share its event-loop turn (they wait with it).
      const slowAsked = stub.count("eth_getCode");
      const slow = c.call("eth_getCode", ["0x1", "latest"], 15_000);
      // In flight at the signal: the node has it (and answers it 1 s later).
      await eventually(() => stub.count("eth_getCode") > slowAsked, "the slow call at the node");
      signalled = true;
      const t0 = Date.now();
      const exited = p.stop(30_000);
      await eventually(() => /shutting down: draining/.test(p.output()), "the shutting-down log line");
      const code = await exited;
      const shutdownMs = Date.now() - t0;
      assert.equal(code, 0, p.output());
      await Promise.all([...loops, ...wsLoops]);
      const slowAnswer = await slow;
      assert.notEqual(
        slowAnswer.result,
        undefined,
        `the call in flight at the signal: ${JSON.stringify(slowAnswer)}`,
      );
      await c.waitClosed(5000);
      assert.equal(c.closeCode, 1001);

      assert.deepEqual(wsOut.other, [], "WebSocket answers other than a result or shutting_down");
      assert.equal(wsOut.cut, 0, "WebSocket requests cut without an answer");
      assert.ok(wsOut.ok > 20, `only ${wsOut.ok} WebSocket calls served`);
      assert.ok(wsOut.refused >= 1, "no WebSocket message was refused during the drain");
      const answered = outcomes.filter((o) => o.status !== undefined);
      const ok = answered.filter((o) => o.status === 200).length;
      const refused503 = answered.filter((o) => o.status === 503).length;
      const cut = outcomes.filter((o) => o.error !== undefined && o.error !== "ECONNREFUSED");
      assert.deepEqual(
        cut.map((o) => o.error),
        [],
        "HTTP requests cut without an answer",
      );
      assert.equal(ok + refused503, answered.length, "only 200 and 503 answers");
      assert.ok(ok > 20, `only ${ok} HTTP requests answered`);
      // Under steady WebSocket traffic the drain ends with the last call in flight at the signal (1 s
      // upstream), not at SHUTDOWN_DRAIN_MS: new messages are refused instead of prolonging it.
      assert.ok(shutdownMs < drainMs, `shutdown took ${shutdownMs} ms: the drain ran its full ${drainMs} ms`);
      const u = await streamUsage(redis, names);
      // Every row carries the app (the key is known, HTTP refusals during the drain included). Every
      // answer is counted once, nothing else: 0 answered-but-uncounted.
      const wsServed = wsOut.ok + 1; // + the slow call
      assert.deepEqual(
        { served: u.appSuccess, app: u.app, refused: u.shuttingDown, other: u.other },
        {
          served: ok + wsServed,
          app: ok + wsServed + wsOut.refused + refused503,
          refused: refused503 + wsOut.refused,
          other: 0,
        },
      );
      console.log(
        `      HTTP ${ok} served, ${refused503} refused 503; WebSocket ${wsServed} served, ${wsOut.refused} refused; all counted, 0 cut; shutdown ${shutdownMs} ms (drain limit ${drainMs} ms)`,
      );
    } finally {
      stub.delayMs = 0;
      stub.methodDelayMs.delete("eth_getCode");
      ws?.terminate();
      for (const a of agents) a.destroy();
      await proc?.stop();
    }
  });
});
