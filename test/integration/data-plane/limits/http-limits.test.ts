import assert from "node:assert/strict";
import { nextUtcMidnightMs, utcDayStartMs } from "../../../../shared/src/quota/day";
import { eventually } from "../../../helpers/eventually";
import { defaultKeyRecord, evmNetwork, type RedisSeeder } from "../../../helpers/seed-redis";
import { type Gateway, post, type RpcResponse, startGateway } from "../harness";
import {
  batchOf,
  call,
  FakeClock,
  inSecond,
  LIMITS_ENV,
  RecordingUpstream,
  refusalData,
  UsageReader,
} from "./fixtures";

const WS = "ws-limits";

function plan(requestsPerSecond: number, dailyRequestLimit = 500_000) {
  return { name: "test", requestsPerSecond, dailyRequestLimit, monthlyRequestLimit: null };
}

function assertRateRefusal(r: RpcResponse, limit: number): void {
  assert.equal(r.status, 429, r.text);
  const d = refusalData(r);
  assert.equal(d.code, -32005);
  assert.equal(d.reason, "rate_limit");
  assert.equal(d.limit, limit);
  assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= 1000, `retryAfterMs ${d.retryAfterMs}`);
  assert.equal(r.headers.get("retry-after"), String(Math.ceil(d.retryAfterMs / 1000)));
  assert.equal(r.headers.get("x-ratelimit-limit"), String(limit));
  assert.equal(r.headers.get("x-ratelimit-remaining"), "0");
}

describe("data plane limits over HTTP: per-second rate limit and daily quota (real Redis)", function () {
  this.timeout(30_000);
  let up: RecordingUpstream;
  let gw: Gateway | undefined;
  let usage: UsageReader | undefined;

  beforeEach(async () => {
    up = await new RecordingUpstream().start();
  });

  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await usage?.close();
    usage = undefined;
    await up.stop();
  });

  async function start(
    clock: FakeClock | undefined,
    seed: (s: RedisSeeder) => Promise<void>,
    env: Record<string, string> = {},
  ): Promise<Gateway> {
    gw = await startGateway(
      { ...LIMITS_ENV, ...env },
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
        await seed(s);
      },
      clock === undefined ? {} : { clock },
    );
    usage = new UsageReader(gw.ns.prefix);
    return gw;
  }

  it("admits 50 singles in a second and refuses the 51st (429, Retry-After, -32005 rate_limit, X-RateLimit-*)", async () => {
    const clock = new FakeClock(inSecond(300));
    let key = "";
    const g = await start(clock, async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan(50) });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => post(url, call("lim_single", i))));
    for (const r of rs) assert.equal(r.status, 200, r.text);
    const remaining = rs.map((r) => Number(r.headers.get("x-ratelimit-remaining"))).sort((a, b) => a - b);
    assert.deepEqual(
      remaining,
      Array.from({ length: 50 }, (_, i) => i),
    );
    for (const r of rs) assert.equal(r.headers.get("x-ratelimit-limit"), "50");
    const over = await post(url, call("lim_single", 51));
    assertRateRefusal(over, 50);
    assert.equal(refusalData(over).id, 51, "a refused single keeps its id");
    assert.equal(refusalData(over).retryAfterMs, 700);
    assert.equal(over.headers.get("retry-after"), "1");
    assert.equal(up.count("lim_single"), 50, "the refused call was not forwarded");
    // The next second the budget is back.
    clock.advance(1000);
    const again = await post(url, call("lim_single", 52));
    assert.equal(again.status, 200);
    assert.equal(again.headers.get("x-ratelimit-remaining"), "49");
  });

  it("two simultaneous batches of 30 with a limit of 50: one served, the other refused whole, not forwarded, not counted", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(clock, async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan(50) });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const [a, b] = await Promise.all([
      post(url, batchOf(30, "lim_batch", 1)),
      post(url, batchOf(30, "lim_batch", 100)),
    ]);
    const served = [a, b].filter((r) => r.status === 200);
    const refused = [a, b].filter((r) => r.status === 429);
    assert.equal(served.length, 1, `${a.status} ${b.status}`);
    assert.equal(refused.length, 1);
    assert.equal((served[0]!.json as unknown[]).length, 30);
    assert.equal(served[0]!.headers.get("x-ratelimit-remaining"), "20");
    const r = refused[0]!;
    assert.equal(r.status, 429);
    assert.ok(!Array.isArray(r.json), "a refused batch is one error object, not per-element errors");
    const d = refusalData(r);
    assert.equal(d.id, null);
    assert.equal(d.reason, "rate_limit");
    assert.equal(d.code, -32005);
    assert.equal(d.limit, 50);
    assert.equal(r.headers.get("x-ratelimit-remaining"), "20");
    assert.ok(Number(r.headers.get("retry-after")) >= 1);
    assert.equal(up.count("lim_batch"), 30, "only the admitted batch was forwarded");
    // The quota counts the 30 served response objects, not the 30 refused.
    assert.equal(await usage!.waitFor(WS, 30, clock.now()), 30);
    // Nothing of the refused batch is counted later: one more call, counted after anything earlier, lands
    // on exactly 31.
    assert.equal((await post(url, call("lim_batch", 999))).status, 200);
    assert.equal(await usage!.waitFor(WS, 31, clock.now()), 31);
  });

  it("counts a batch per element: against the per-second limit (every element) and the quota (every response object)", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(clock, async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan(50) });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    // 20 request objects: 17 calls, 2 notifications (no response object), 1 invalid element (an error
    // object in the response).
    const body: object[] = [
      ...batchOf(17, "lim_elem"),
      { jsonrpc: "2.0", method: "lim_elem" },
      { jsonrpc: "2.0", method: "lim_elem" },
      { jsonrpc: "1.0", id: 99, method: "lim_elem" },
    ];
    const r = await post(url, body);
    assert.equal(r.status, 200, r.text);
    assert.equal((r.json as unknown[]).length, 18);
    assert.equal(r.headers.get("x-ratelimit-remaining"), "30", "the batch cost its 20 request objects");
    const singles = await Promise.all(Array.from({ length: 30 }, (_, i) => post(url, call("lim_elem", i))));
    for (const s of singles) assert.equal(s.status, 200);
    assertRateRefusal(await post(url, call("lim_elem", 31)), 50);
    // Units: 18 response objects for the batch + 30 singles.
    assert.equal(await usage!.waitFor(WS, 48, clock.now()), 48);
    // A notification alone is admitted (costs 1) but returns no response object: no unit.
    clock.advance(1000);
    const n = await post(url, { jsonrpc: "2.0", method: "lim_elem" });
    assert.equal(n.status, 204);
    assert.equal(n.headers.get("x-ratelimit-remaining"), "49");
    // One more call, counted after the notification would have been: the count lands on exactly 49.
    assert.equal((await post(url, call("lim_elem", 999))).status, 200);
    assert.equal(await usage!.waitFor(WS, 49, clock.now()), 49);
  });

  it("refuses a batch larger than the per-second limit with data.limit and a split-or-upgrade message", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(clock, async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan(50) });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const r = await post(url, batchOf(51, "lim_big"));
    assert.equal(r.status, 429);
    const d = refusalData(r);
    assert.equal(d.code, -32005);
    assert.equal(d.reason, "rate_limit");
    assert.equal(d.limit, 50);
    assert.equal(d.id, null);
    assert.match(d.message, /split the batch or upgrade/);
    assert.equal(up.count("lim_big"), 0);
    // It consumed nothing: a full 50 still passes in the same second.
    const ok = await post(url, batchOf(50, "lim_big"));
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get("x-ratelimit-remaining"), "0");
    const metrics = await (await fetch(`${g.metricsBase}/metrics`)).text();
    assert.match(metrics, /rpcgw_limit_refusals_total\{endpoint="app",reason="batch_exceeds_limit"\} 1/);
    assert.match(
      metrics,
      /rpcgw_limit_refused_elements_total\{endpoint="app",reason="batch_exceeds_limit"\} 51/,
    );
    assert.match(metrics, /rpcgw_limits_redis_up\{component="ratelimit"\} 1/);
    assert.match(metrics, /rpcgw_limits_redis_up\{component="quota"\} 1/);
  });

  it("public endpoint: 50 req/s per client IP, separate budgets per X-Forwarded-For address behind a trusted proxy", async () => {
    const clock = new FakeClock(inSecond(200));
    const g = await start(clock, async () => {}, { TRUSTED_PROXIES: "127.0.0.1/32" });
    const url = `${g.base}/eth/public`;
    const from = (ip: string) => ({ "x-forwarded-for": ip });
    const one = await Promise.all(
      Array.from({ length: 50 }, (_, i) => post(url, call("lim_pub", i), from("198.51.100.7"))),
    );
    for (const r of one) assert.equal(r.status, 200, r.text);
    const over = await post(url, call("lim_pub", 50), from("198.51.100.7"));
    assertRateRefusal(over, 50);
    // Another client behind the same proxy has its own 50.
    const two = await Promise.all(
      Array.from({ length: 50 }, (_, i) => post(url, call("lim_pub", i), from("198.51.100.8"))),
    );
    for (const r of two) assert.equal(r.status, 200, r.text);
    assertRateRefusal(await post(url, call("lim_pub", 50), from("198.51.100.8")), 50);
    assert.equal(up.count("lim_pub"), 100);
    // Batches count per element here too.
    clock.advance(1000);
    const b = await post(url, batchOf(40, "lim_pub"), from("198.51.100.7"));
    assert.equal(b.status, 200);
    assert.equal(b.headers.get("x-ratelimit-remaining"), "10");
    const b11 = await post(url, batchOf(11, "lim_pub"), from("198.51.100.7"));
    assert.equal(b11.status, 429);
    assert.equal(refusalData(b11).reason, "rate_limit");
    assert.equal(b11.headers.get("x-ratelimit-remaining"), "10", "a refused batch consumes nothing");
    const metrics = await (await fetch(`${g.metricsBase}/metrics`)).text();
    assert.match(metrics, /rpcgw_limit_refusals_total\{endpoint="public",reason="rate_limit"\} 3/);
  });

  it("daily limit: refused with daily_limit and Retry-After until 00:00 UTC, admitted again after midnight", async () => {
    const midnight = nextUtcMidnightMs(Date.now());
    const clock = new FakeClock(midnight - 10_000);
    let key = "";
    const g = await start(clock, async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan(50, 5) });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    for (let i = 0; i < 5; i++) assert.equal((await post(url, call("lim_day", i))).status, 200);
    const r = await post(url, call("lim_day", 5));
    assert.equal(r.status, 429, r.text);
    const d = refusalData(r);
    assert.equal(d.code, -32005);
    assert.equal(d.reason, "daily_limit");
    assert.equal(d.limit, 5);
    assert.equal(d.retryAfterMs, 10_000);
    assert.equal(d.id, 5);
    assert.equal(r.headers.get("retry-after"), "10");
    assert.ok(r.headers.get("x-ratelimit-limit"), "X-RateLimit-* on a quota refusal too");
    // A batch that would cross the limit is refused whole as well.
    clock.advance(1500);
    const rb = await post(url, batchOf(2, "lim_day"));
    assert.equal(rb.status, 429);
    assert.equal(refusalData(rb).id, null);
    assert.equal(refusalData(rb).reason, "daily_limit");
    assert.equal(rb.headers.get("retry-after"), "9");
    assert.equal(up.count("lim_day"), 5);
    const beforeMidnight = clock.now();
    assert.equal(await usage!.waitFor(WS, 5, beforeMidnight), 5);
    // 00:00 UTC: a new day, a new count.
    clock.t = midnight;
    const next = await post(url, call("lim_day", 6));
    assert.equal(next.status, 200, next.text);
    assert.equal(await usage!.waitFor(WS, 1, midnight), 1);
    assert.equal((await usage!.read(WS, beforeMidnight)).count, 5, "yesterday's count is kept apart");
    assert.ok(utcDayStartMs(midnight) === midnight);
  });

  it("monthly limit: refused with monthly_limit (a batch crossing it too)", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(clock, async (s) => {
      key = await s.putKey({
        workspaceId: WS,
        plan: { name: "m", requestsPerSecond: 50, dailyRequestLimit: 100, monthlyRequestLimit: 3 },
      });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    assert.equal((await post(url, batchOf(3, "lim_month"))).status, 200);
    const r = await post(url, call("lim_month", 9));
    assert.equal(r.status, 429);
    assert.equal(refusalData(r).reason, "monthly_limit");
    assert.equal(refusalData(r).limit, 3);
    assert.ok(Number(r.headers.get("retry-after")) >= 1);
  });

  it("applies a plan upgrade (workspace.update) within a second, without restart", async () => {
    const clock = new FakeClock(inSecond(100));
    let key = "";
    const g = await start(clock, async (s) => {
      key = await s.putKey({ workspaceId: WS, plan: plan(10) });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const first = await Promise.all(Array.from({ length: 10 }, (_, i) => post(url, call("lim_up", i))));
    for (const r of first) assert.equal(r.status, 200);
    assertRateRefusal(await post(url, call("lim_up", 10)), 10);
    // The control plane rewrites every key record of the workspace, then publishes workspace.update.
    await g.seeder.putKey({ ...defaultKeyRecord(), workspaceId: WS, plan: plan(100) }, key);
    await g.seeder.publish({ type: "workspace.update", workspaceId: WS });
    // Asked until the new limit shows (how soon is the bench's concern, not this test's): the fake clock
    // holds the same second throughout.
    const r = await eventually(async () => {
      const a = await post(url, call("lim_up", 11));
      return a.headers.get("x-ratelimit-limit") === "100" ? a : undefined;
    }, "the new plan's limit");
    assert.equal(r.status, 200, "the same second, the higher limit admits more");
  });
});
