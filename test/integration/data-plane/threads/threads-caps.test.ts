import assert from "node:assert/strict";
import { eventually } from "../../../helpers/eventually";
import { createTestRedisNamespace, type TestRedisNamespace } from "../../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../../helpers/seed-redis";
import { StubUpstream } from "../stub-upstream";
import { TestWsClient } from "../ws/ws-client";
import {
  type Answer,
  connectionOn,
  postFresh,
  startThreadedPlane,
  type ThreadConnection,
  type ThreadedPlane,
} from "./fixture";

/**
 * The per-tenant caps are the process's, not each thread's: a tenant whose connections the kernel spreads
 * over both threads still gets MAX_IN_FLIGHT_PER_KEY (or its plan's maxInFlightPerKey) calls in flight and WS_MAX_CONNECTIONS_PER_KEY sockets
 * in all (limits/tenant-counts.ts). Counted per thread, the same tenant would get up to twice as many.
 */

/**
 * How long the stub holds an eth_call: every call of a test is sent (and each refused one answered) well
 * within it, also on a loaded machine.
 */
const SLOW_MS = 5_000;

const plan = {
  name: "big",
  requestsPerSecond: 1_000_000,
  dailyRequestLimit: 10_000_000,
  monthlyRequestLimit: null,
};

describe("data plane with DATA_PLANE_THREADS=2: per-tenant caps count the whole process", function () {
  this.timeout(120_000);
  let up: StubUpstream;
  let ns: TestRedisNamespace;
  let seeder: RedisSeeder;
  let plane: ThreadedPlane | undefined;

  beforeEach(async () => {
    up = await new StubUpstream().start();
    up.methodDelayMs.set("eth_call", SLOW_MS);
    ns = createTestRedisNamespace();
    seeder = new RedisSeeder(ns.prefix);
    await seeder.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
  });

  afterEach(async () => {
    await plane?.proc.stop(20_000);
    plane = undefined;
    await seeder.close();
    await up.stop();
    await ns.cleanup();
  });

  const start = (env: Record<string, string>) =>
    startThreadedPlane(ns.prefix, {
      RATE_LIMIT_MODE: "off",
      QUOTA_MODE: "off",
      USAGE_MODE: "off",
      CACHE_MAX_BYTES: "0",
      LOG_LEVEL: "warn",
      ...env,
    });

  it("MAX_IN_FLIGHT_PER_KEY=4: of 12 slow calls on 12 connections, 4 reach the node, 8 get 429 concurrency_limit", async () => {
    const key = await seeder.putKey({ workspaceId: "ws-caps", appId: "app-caps", plan });
    plane = await start({ MAX_IN_FLIGHT_PER_KEY: "4", MAX_HEAVY_IN_FLIGHT_PER_KEY: "0" });
    const path = `/eth/rpc?apikey=${key}`;
    const pending: Promise<Answer>[] = [];
    const call = (i: number) => ({
      jsonrpc: "2.0",
      id: i,
      method: "eth_call",
      params: [{ to: `0x${i.toString(16).padStart(40, "0")}` }, "latest"],
    });
    // One call at a time, each on a fresh connection (spread over the threads): the first four are held
    // by the node (SLOW_MS), each later one is answered (refused) before the next is sent.
    for (let i = 0; i < 12; i++) {
      const answer = postFresh(plane.port, path, call(i));
      pending.push(answer);
      if (i < 4) await eventually(() => up.count("eth_call") >= i + 1, `call ${i} held by the node`);
      // A refusal is answered at once; a call let through would be answered after SLOW_MS (and counted).
      else await answer;
    }
    assert.equal(up.count("eth_call"), 4, "calls held by the node");
    const answers = await Promise.all(pending);
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    assert.equal(ok.length, 4, answers.map((a) => `${a.status} ${a.text}`).join("\n"));
    assert.equal(refused.length, 8);
    for (const r of refused) assert.equal(r.json.error.data.reason, "concurrency_limit", r.text);
    assert.equal(up.count("eth_call"), 4, "no refused call reached the node");
    // Every slot is back: the next call is served.
    const after = await postFresh(plane.port, path, call(99));
    assert.equal(after.status, 200, after.text);
    assert.equal(up.count("eth_call"), 5);
  });

  /** Two calls held on each thread with a cap of 4: a fifth is refused on either thread (data.limit 4). */
  const twoHeldPerThread = async (key: string, running: ThreadedPlane) => {
    const path = `/eth/rpc?apikey=${key}`;
    const call = (i: number) => ({
      jsonrpc: "2.0",
      id: i,
      method: "eth_call",
      params: [{ to: `0x${i.toString(16).padStart(40, "0")}` }, "latest"],
    });
    const conns: ThreadConnection[] = [];
    try {
      // Three kept-alive connections on each thread (a connection carries one request at a time).
      for (const thread of [1, 2, 1, 2, 1, 2]) conns.push(await connectionOn(running.port, thread));
      const held: Promise<Answer>[] = [];
      for (let i = 0; i < 4; i++) {
        held.push(conns[i]!.post(path, call(i)));
        await eventually(() => up.count("eth_call") >= i + 1, `call ${i} reaching the node`, 5_000, 5);
      }
      // Two held by thread 1's plane, two by thread 2's: each thread alone is under the cap of 4.
      const [on1, on2] = await Promise.all([conns[4]!.post(path, call(5)), conns[5]!.post(path, call(6))]);
      for (const [thread, a] of [
        [1, on1],
        [2, on2],
      ] as const) {
        assert.equal(a.status, 429, `thread ${thread}: ${a.status} ${a.text}`);
        assert.equal(a.json.error.data.reason, "concurrency_limit", a.text);
        assert.equal(a.json.error.data.limit, 4, a.text);
      }
      assert.equal(up.count("eth_call"), 4, "no refused call reached the node");
      for (const a of await Promise.all(held)) assert.equal(a.status, 200, a.text);
      // Every slot is back, on both threads.
      const [again1, again2] = await Promise.all([
        conns[4]!.post(path, call(7)),
        conns[5]!.post(path, call(8)),
      ]);
      assert.deepEqual([again1.status, again2.status], [200, 200], `${again1.text} | ${again2.text}`);
    } finally {
      for (const c of conns) c.close();
    }
  };

  it("MAX_IN_FLIGHT_PER_KEY=4, two calls held on each thread: a fifth is refused on either thread", async () => {
    const key = await seeder.putKey({ workspaceId: "ws-caps", appId: "app-pinned", plan });
    plane = await start({ MAX_IN_FLIGHT_PER_KEY: "4", MAX_HEAVY_IN_FLIGHT_PER_KEY: "0" });
    await twoHeldPerThread(key, plane);
  });

  it("a plan's maxInFlightPerKey=4 (default 200), two calls held on each thread: a fifth is refused on either thread", async () => {
    const key = await seeder.putKey({
      workspaceId: "ws-caps",
      appId: "app-plan-cap",
      plan: { ...plan, maxInFlightPerKey: 4 },
    });
    plane = await start({ MAX_HEAVY_IN_FLIGHT_PER_KEY: "0" });
    await twoHeldPerThread(key, plane);
  });

  it("WS_MAX_CONNECTIONS_PER_KEY=3: 16 upgrades at once over both threads open exactly 3; closing them frees every place", async () => {
    const key = await seeder.putKey({ workspaceId: "ws-caps", appId: "app-ws-race", plan });
    plane = await start({ WS_MAX_CONNECTIONS_PER_KEY: "3" });
    const url = `ws://127.0.0.1:${plane.port}/eth/rpc?apikey=${key}`;
    const open: TestWsClient[] = [];
    try {
      const tries = await Promise.allSettled(Array.from({ length: 16 }, () => TestWsClient.open(url)));
      for (const t of tries) if (t.status === "fulfilled") open.push(t.value);
      const refused = tries.filter((t) => t.status === "rejected") as PromiseRejectedResult[];
      for (const r of refused) {
        const err = r.reason as { status?: number; body?: { error?: { data?: { reason?: string } } } };
        assert.equal(err.status, 429, String(r.reason));
        assert.equal(err.body?.error?.data?.reason, "ws_connection_limit", JSON.stringify(err.body));
      }
      assert.equal(open.length, 3, `${open.length} sockets open with a cap of 3`);
      assert.equal(refused.length, 13);
      // Every place comes back when they close, whichever thread held it: three open again.
      for (const c of open.splice(0)) c.terminate();
      await eventually(
        async () => {
          const c = await TestWsClient.open(url).catch(() => undefined);
          if (c !== undefined) open.push(c);
          return open.length >= 3;
        },
        `three places back (${open.length})`,
        5_000,
      );
      await assert.rejects(TestWsClient.open(url), (e: { status?: number }) => e.status === 429);
    } finally {
      for (const c of open) c.terminate();
    }
  });

  it("WS_MAX_CONNECTIONS_PER_KEY=3: of 10 sockets opened one by one, 3 open, 7 get 429 ws_connection_limit", async () => {
    const key = await seeder.putKey({ workspaceId: "ws-caps", appId: "app-ws", plan });
    plane = await start({ WS_MAX_CONNECTIONS_PER_KEY: "3" });
    const open: TestWsClient[] = [];
    const refusals: number[] = [];
    try {
      for (let i = 0; i < 10; i++) {
        try {
          open.push(await TestWsClient.open(`ws://127.0.0.1:${plane.port}/eth/rpc?apikey=${key}`));
        } catch (e) {
          const err = e as { status?: number; body?: { error?: { data?: { reason?: string } } } };
          assert.equal(err.body?.error?.data?.reason, "ws_connection_limit", JSON.stringify(err.body));
          refusals.push(err.status ?? 0);
        }
      }
      assert.equal(open.length, 3);
      assert.deepEqual(refusals, new Array(7).fill(429));
      // A socket closed gives its place back, whichever thread served it.
      open.pop()!.terminate();
      const url = `ws://127.0.0.1:${plane.port}/eth/rpc?apikey=${key}`;
      open.push(
        await eventually(
          () => TestWsClient.open(url).catch(() => undefined),
          "the closed socket's place back",
        ),
      );
      assert.equal(open.length, 3);
    } finally {
      for (const c of open) c.terminate();
    }
  });
});
