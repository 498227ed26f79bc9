import assert from "node:assert/strict";
import type { RedisReconciledRateLimiter } from "../../../../data-plane/src/ratelimit/redis-rate-limiter";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { eventually } from "../../../helpers/eventually";
import { createTestRedisNamespace, SINGLE_REDIS, type TestRedisNamespace } from "../../../helpers/redis";
import { evmNetwork, type RedisSeeder } from "../../../helpers/seed-redis";
import { type Gateway, post, type RpcResponse, startGateway } from "../harness";
import { batchOf, call, FakeClock, inSecond, LIMITS_ENV, RecordingUpstream, refusalData } from "./fixtures";

/**
 * The plan's per-second limit holds for the workspace as a whole (issue 24, "one tenant, one fair share"):
 * more apps buy no more throughput, on one instance or across instances, and an app's own lower cap still
 * holds inside it. Real Redis; a frozen clock keeps every request in one window.
 */
const WS = "ws-fair";
const PLAN = {
  name: "free",
  requestsPerSecond: 50,
  dailyRequestLimit: 10_000_000,
  monthlyRequestLimit: null,
};

function capRules(requestsPerSecond: number) {
  return {
    methodMode: "DENY" as const,
    methods: [],
    requestsPerSecond,
    requestsPerDay: null,
    userAgents: [],
    jwt: null,
  };
}

function tally(rs: RpcResponse[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of rs) {
    const k = r.status === 200 ? "200" : `${r.status} ${refusalData(r).reason}`;
    out.set(k, (out.get(k) ?? 0) + 1);
  }
  return out;
}

describe("data plane limits: the plan's per-second limit per workspace, across its apps (real Redis)", function () {
  this.timeout(30_000);
  let up: RecordingUpstream;
  let ns: TestRedisNamespace;
  const gateways: Gateway[] = [];

  beforeEach(async () => {
    up = await new RecordingUpstream().start();
    ns = createTestRedisNamespace(SINGLE_REDIS);
  });

  afterEach(async () => {
    for (const g of gateways.splice(0)) await g.stop();
    await up.stop();
    await ns.cleanup();
  });

  async function start(clock: FakeClock, seed: (s: RedisSeeder) => Promise<void> = async () => {}) {
    const g = await startGateway(
      LIMITS_ENV,
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
        await seed(s);
      },
      { clock },
      ns,
    );
    gateways.push(g);
    return g;
  }

  it("3 apps on a 50 req/s plan get 50 through all of them together, not 150; a crossing batch is refused whole", async () => {
    const clock = new FakeClock(inSecond(200));
    const keys: string[] = [];
    const g = await start(clock, async (s) => {
      for (const app of ["a1", "a2", "a3"])
        keys.push(await s.putKey({ workspaceId: WS, appId: app, plan: PLAN }));
    });
    const urls = keys.map((k) => `${g.base}/eth/rpc?apikey=${k}`);
    // 25 from each app at once: 75 offered, 50 admitted whichever apps they came from.
    const rs = await Promise.all(Array.from({ length: 75 }, (_, i) => post(urls[i % 3]!, call("lim_ws", i))));
    assert.deepEqual([...tally(rs)].sort(), [
      ["200", 50],
      ["429 rate_limit", 25],
    ]);
    assert.equal(up.count("lim_ws"), 50, "only the admitted calls reached the upstream");
    for (const r of rs.filter((x) => x.status === 429)) {
      assert.equal(refusalData(r).limit, 50);
      assert.equal(refusalData(r).code, -32005);
      assert.ok(Number(r.headers.get("retry-after")) >= 1);
    }
    // Next second: a batch of 30 on one app, then a batch of 30 on another would cross 50: refused whole.
    clock.advance(1000);
    assert.equal((await post(urls[0]!, batchOf(30, "lim_batch"))).status, 200);
    const crossing = await post(urls[1]!, batchOf(30, "lim_batch"));
    assert.equal(crossing.status, 429, crossing.text);
    assert.equal(refusalData(crossing).reason, "rate_limit");
    assert.equal(up.count("lim_batch"), 30, "nothing of the refused batch was forwarded");
    // The 20 left are still there for a third app.
    assert.equal((await post(urls[2]!, batchOf(20, "lim_batch"))).status, 200);
    assert.equal((await post(urls[2]!, call("lim_batch"))).status, 429);
    // Another workspace on the same plan is not held by this one.
    const other = await g.seeder.putKey({ workspaceId: "ws-other", appId: "b1", plan: PLAN });
    assert.equal((await post(`${g.base}/eth/rpc?apikey=${other}`, batchOf(50, "lim_other"))).status, 200);
  });

  it("two instances: apps of one workspace on each share its 50/s through Redis", async () => {
    const clock = new FakeClock(inSecond(100));
    let k1 = "";
    let k2 = "";
    const a = await start(clock, async (s) => {
      k1 = await s.putKey({ workspaceId: WS, appId: "a1", plan: PLAN });
      k2 = await s.putKey({ workspaceId: WS, appId: "a2", plan: PLAN });
    });
    const b = await start(clock);
    assert.equal((await post(`${a.base}/eth/rpc?apikey=${k1}`, batchOf(40, "lim_x"))).status, 200);
    // Wait until instance A's count is in Redis (its next reconciliation round).
    const redis = SINGLE_REDIS.client();
    try {
      const window = new RedisNames(ns.prefix).rateLimitWindow(`ws:${WS}`, Math.floor(clock.now() / 1000));
      await eventually(
        async () => (await redis.hvals(window)).map(Number).reduce((x, y) => x + y, 0) >= 40,
        "instance A reconciling its count",
        5_000,
      );
    } finally {
      redis.disconnect();
    }
    const bUrl = `${b.base}/eth/rpc?apikey=${k2}`;
    assert.equal((await post(bUrl, call("lim_x"))).status, 200);
    // B's next full round reads A's 40 (a round already in flight may predate B's first check).
    const lim = b.plane.context.limits.limits.rateLimiter as RedisReconciledRateLimiter;
    await lim.syncNow();
    await lim.syncNow();
    // B keeps what is left for A while A may still be serving: A's 40 arrived at one sync, so B holds as
    // much again in reserve, halved at each of its syncs that shows A's total standing still; then B
    // takes the rest. Never more than the 9 left, and all of them refused with the rate-limit row.
    const rs: RpcResponse[] = [];
    for (let i = 0; i < 40 && rs.filter((r) => r.status === 200).length < 9; i++) {
      rs.push(await post(bUrl, call("lim_x", i)));
      await lim.syncNow();
    }
    const t = tally(rs);
    assert.ok((t.get("200") ?? 0) >= 1 && (t.get("200") ?? 0) <= 9, JSON.stringify([...t]));
    assert.equal((t.get("200") ?? 0) + (t.get("429 rate_limit") ?? 0), rs.length, JSON.stringify([...t]));
    assert.ok(up.count("lim_x") <= 50, `forwarded ${up.count("lim_x")}: more than 50 across both instances`);
  });

  it("an app's own cap below the plan still holds inside the workspace's limit", async () => {
    const clock = new FakeClock(inSecond(300));
    let capped = "";
    let free = "";
    const g = await start(clock, async (s) => {
      capped = await s.putKey({ workspaceId: WS, appId: "capped", plan: PLAN, access: capRules(10) });
      free = await s.putKey({ workspaceId: WS, appId: "free", plan: PLAN });
    });
    const cUrl = `${g.base}/eth/rpc?apikey=${capped}`;
    const fUrl = `${g.base}/eth/rpc?apikey=${free}`;
    const rs = await Promise.all(Array.from({ length: 15 }, (_, i) => post(cUrl, call("lim_cap", i))));
    assert.deepEqual([...tally(rs)].sort(), [
      ["200", 10],
      ["429 app_rate_limit", 5],
    ]);
    assert.equal(refusalData(rs.find((r) => r.status === 429)!).limit, 10);
    // The capped app used 10 of the workspace's 50; the refused 5 took nothing: 40 left for the other app.
    assert.equal((await post(fUrl, batchOf(40, "lim_cap"))).status, 200);
    const over = await post(fUrl, call("lim_cap"));
    assert.equal(over.status, 429);
    assert.equal(refusalData(over).reason, "rate_limit");
    // Next second the workspace is full from the other app: the capped app is refused by the workspace's
    // window (rate_limit, limit 50), and that refusal does not use up its own cap.
    clock.advance(1000);
    assert.equal((await post(fUrl, batchOf(50, "lim_cap"))).status, 200);
    const wsFull = await post(cUrl, call("lim_cap"));
    assert.equal(refusalData(wsFull).reason, "rate_limit");
    assert.equal(refusalData(wsFull).limit, 50);
    clock.advance(1000);
    assert.equal((await post(cUrl, batchOf(10, "lim_cap"))).status, 200, "the cap's 10 were intact");
    assert.equal(up.count("lim_cap"), 10 + 40 + 50 + 10);
  });
});
