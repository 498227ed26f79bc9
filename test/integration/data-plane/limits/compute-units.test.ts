import assert from "node:assert/strict";
import { utcDayKey } from "../../../../shared/src/quota/day";
import type { RedisClient } from "../../../../shared/src/redis/connect";
import { RedisNames } from "../../../../shared/src/redis/keys";
import type { MethodCosts, NetworkRecord, PlanLimits } from "../../../../shared/src/redis/records";
import { USAGE_STREAM_FIELD, UsageBatchSchema } from "../../../../shared/src/usage/contract";
import { eventually } from "../../../helpers/eventually";
import { createTestRedisNamespace, type TestRedisNamespace } from "../../../helpers/redis";
import { evmNetwork, type RedisSeeder } from "../../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "../harness";
import { TestWsClient } from "../ws/ws-client";
import { batchOf, call, FakeClock, inSecond, LIMITS_ENV, RecordingUpstream, refusalData } from "./fixtures";

const WS = "ws-cu";
const COSTS: MethodCosts = { defaultUnits: 20, methods: { lim_heavy: 30, lim_light: 5, eth_chainId: 0 } };

function plan(extra: Partial<PlanLimits> = {}): PlanLimits {
  return {
    name: "cu",
    requestsPerSecond: 1000,
    dailyRequestLimit: 10_000_000,
    monthlyRequestLimit: null,
    ...extra,
  };
}

/**
 * Compute units through one data plane on real Redis (rate limits reconciled there, quotas counted there):
 * the charge of each answer (`X-Compute-Units`), the per-second limit and the daily quota in compute units,
 * a batch crossing a limit refused whole, a network's weights changed by a publication, and a plan without
 * compute-unit limits unchanged. The clock is frozen inside a second (the windows are the clock's).
 */
describe("data plane compute units: weights, limits and headers over HTTP", function () {
  this.timeout(60_000);
  let up: RecordingUpstream;
  let ns: TestRedisNamespace;
  let gw: Gateway | undefined;
  let redis: RedisClient;

  beforeEach(async () => {
    up = await new RecordingUpstream().start();
    ns = createTestRedisNamespace();
    redis = ns.redis.client();
  });

  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    redis.disconnect();
    await up.stop();
    await ns.cleanup();
  });

  /** The network record; `costs` null: one published before compute units (no methodCosts). */
  const network = (costs: MethodCosts | null = COSTS): NetworkRecord => ({
    ...evmNetwork("eth", [{ id: "up", httpUrl: up.url }]),
    ...(costs === null ? {} : { methodCosts: costs }),
  });

  async function start(
    seed: (s: RedisSeeder) => Promise<void>,
    clock: FakeClock,
    env = {},
  ): Promise<Gateway> {
    gw = await startGateway(
      { ...LIMITS_ENV, USAGE_MODE: "redis", USAGE_FLUSH_INTERVAL_MS: "50", ...env },
      async (s) => {
        await s.putNetwork(network());
        await seed(s);
      },
      { clock },
      ns,
    );
    return gw;
  }

  it("a per-second limit in compute units: each answer says its units, a crossing batch is refused whole", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan({ computeUnitsPerSecond: 100 }) });
    }, clock);
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    for (const left of [70, 40, 10]) {
      const r = await post(url, call("lim_heavy"));
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get("x-compute-units"), "30");
      assert.equal(r.headers.get("x-ratelimit-unit"), "compute-units");
      assert.equal(r.headers.get("x-ratelimit-limit"), "100");
      assert.equal(r.headers.get("x-ratelimit-remaining"), String(left));
    }
    // Three elements of 5 = 15 compute units, 10 left: the whole batch is refused, none of it forwarded.
    const batch = await post(url, batchOf(3, "lim_light"));
    assert.equal(batch.status, 429, batch.text);
    assert.equal(batch.headers.get("x-compute-units"), "0");
    const data = refusalData(batch);
    assert.equal(data.reason, "rate_limit");
    assert.equal(data.limit, 100);
    assert.match(data.message, /100 compute units\/s/);
    assert.equal(up.count("lim_light"), 0);
    // Two of them (10) fit exactly; then the window is full, but a free method (weight 0) still passes.
    const two = await post(url, batchOf(2, "lim_light"));
    assert.equal(two.status, 200, two.text);
    assert.equal(two.headers.get("x-compute-units"), "10");
    assert.equal((await post(url, call("lim_light"))).status, 429);
    const free = await post(url, call("eth_chainId"));
    assert.equal(free.status, 200);
    assert.equal(free.headers.get("x-compute-units"), "0");
    // A method the table does not list weighs the default (20), in the next second.
    clock.advance(1000);
    const other = await post(url, call("lim_other"));
    assert.equal(other.status, 200);
    assert.equal(other.headers.get("x-compute-units"), "20");
    assert.equal(up.count("lim_light"), 2);
    assert.equal(up.count("lim_heavy"), 3);
  });

  it("a network's new weights apply once published; usage rows carry the compute units", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan() });
    }, clock);
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const before = await post(url, call("lim_heavy"));
    assert.equal(before.headers.get("x-compute-units"), "30");
    await g.seeder.putNetwork(network({ ...COSTS, methods: { ...COSTS.methods, lim_heavy: 50 } }));
    await g.publish({ type: "networks.update" });
    const after = await post(url, call("lim_heavy"));
    assert.equal(after.headers.get("x-compute-units"), "50");
    // A plan without compute-unit limits: no X-RateLimit-Unit (the headers are in requests, as before).
    assert.equal(after.headers.get("x-ratelimit-unit"), null);
    assert.equal(after.headers.get("x-ratelimit-limit"), "1000");
    // Usage rows: 2 requests of lim_heavy, 80 compute units (30 + 50).
    const names = new RedisNames(ns.prefix);
    let units = 0;
    let count = 0;
    await eventually(async () => {
      const entries = await redis.xrange(names.usageStream(), "-", "+");
      units = 0;
      count = 0;
      for (const [, fields] of entries) {
        const i = fields.indexOf(USAGE_STREAM_FIELD);
        const b = UsageBatchSchema.parse(JSON.parse(fields[i + 1]!));
        for (const row of b.rows) {
          if (row.method !== "lim_heavy") continue;
          count += row.count;
          units += row.computeUnits ?? row.count;
        }
      }
      return count === 2;
    }, "the usage rows of the two calls");
    assert.equal(units, 80);
  });

  it("a daily quota in compute units: served to the limit, a crossing batch refused whole, counted in Redis", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan({ dailyComputeUnitLimit: 100 }) });
    }, clock);
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    for (let i = 0; i < 3; i++) assert.equal((await post(url, call("lim_heavy", i))).status, 200);
    const names = new RedisNames(ns.prefix);
    const dayKey = names.computeUnitQuotaDay(WS, utcDayKey(clock.now()));
    await eventually(
      async () => (await redis.get(dayKey)) === "90",
      "the day's compute units flushed to Redis",
    );
    // 10 left: a batch of 3 x 5 is refused whole (daily_limit), 2 x 5 passes.
    const batch = await post(url, batchOf(3, "lim_light"));
    assert.equal(batch.status, 429, batch.text);
    const data = refusalData(batch);
    assert.equal(data.reason, "daily_limit");
    assert.equal(data.limit, 100);
    assert.match(data.message, /daily compute unit limit/);
    assert.ok(data.retryAfterMs > 0);
    assert.equal(up.count("lim_light"), 0);
    assert.equal((await post(url, batchOf(2, "lim_light"))).status, 200);
    await eventually(async () => (await redis.get(dayKey)) === "100", "the day's count at the limit");
    const after = await post(url, call("lim_light"));
    assert.equal(after.status, 429);
    assert.equal(refusalData(after).reason, "daily_limit");
    // The request quota counted requests: 3 + 2 served.
    await eventually(
      async () => (await redis.get(names.quotaDay(WS, utcDayKey(clock.now())))) === "5",
      "the request quota's count",
    );
  });

  it("a plan without compute-unit limits behaves as before: requests counted, nothing in compute units", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan({ requestsPerSecond: 3 }) });
    }, clock);
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    for (const left of [2, 1, 0]) {
      const r = await post(url, call("lim_heavy"));
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("x-ratelimit-remaining"), String(left));
      assert.equal(r.headers.get("x-ratelimit-unit"), null);
    }
    const over = await post(url, call("eth_chainId"));
    assert.equal(over.status, 429);
    assert.equal(refusalData(over).reason, "rate_limit");
    assert.equal(refusalData(over).limit, 3);
    assert.equal(refusalData(over).message, "Too many requests: rate limit exceeded");
    const names = new RedisNames(ns.prefix);
    await eventually(
      async () => (await redis.get(names.quotaDay(WS, utcDayKey(clock.now())))) === "3",
      "the request quota's count",
    );
    assert.equal(await redis.get(names.computeUnitQuotaDay(WS, utcDayKey(clock.now()))), null);
  });

  it("over WebSocket, the same admission: a message crossing the compute-unit limit is refused whole", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan({ computeUnitsPerSecond: 100 }) });
    }, clock);
    const c = await TestWsClient.open(`ws://127.0.0.1:${g.port()}/eth/rpc?apikey=${key}`);
    try {
      // 4 x 30 = 120 > 100: every element gets the refusal, nothing is forwarded.
      c.sendRaw(JSON.stringify(batchOf(4, "lim_heavy", 1)));
      await c.until(() => c.messages.length >= 1, 5000, "the refused batch's answer");
      // biome-ignore lint/suspicious/noExplicitAny: test convenience
      const refused = c.messages[0] as any[];
      assert.equal(refused.length, 4);
      for (const m of refused) {
        assert.equal(m.error.data.reason, "rate_limit");
        assert.equal(m.error.data.limit, 100);
        assert.match(m.error.message, /compute units/);
      }
      assert.equal(up.count("lim_heavy"), 0);
      // 3 x 30 = 90 fits; then 10 are left: a light call (5) passes, a heavy one (30) does not.
      c.sendRaw(JSON.stringify(batchOf(3, "lim_heavy", 10)));
      await c.until(() => c.messages.length >= 2, 5000, "the served batch's answer");
      assert.equal(up.count("lim_heavy"), 3);
      assert.ok((await c.call("lim_light")).result);
      assert.equal((await c.call("lim_heavy")).error.data.reason, "rate_limit");
      assert.equal(c.closeCode, undefined, "the socket stays open");
    } finally {
      c.terminate();
    }
  });

  it("a network record without methodCosts (published before compute units) charges 1 per request object", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(async (s) => {
      await s.putNetwork(network(null));
      key = await s.putKey({ workspaceId: WS, plan: plan({ computeUnitsPerSecond: 4 }) });
    }, clock);
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const r = await post(url, batchOf(3, "lim_heavy"));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get("x-compute-units"), "3");
    assert.equal((await post(url, batchOf(2, "lim_heavy"))).status, 429);
  });
});
