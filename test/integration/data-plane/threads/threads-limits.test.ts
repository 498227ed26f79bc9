import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { eventually, nextSecond } from "../../../helpers/eventually";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../../helpers/seed-redis";
import { post } from "../harness";
import { call, LIMITS_ENV, RecordingUpstream, UsageReader } from "../limits/fixtures";
import {
  instancesSeeEachOther,
  perThreadDelta,
  scrape,
  startThreadedPlane,
  type ThreadedPlane,
} from "./fixture";

const WS = "ws-threads-limits";

function plan(requestsPerSecond: number, dailyRequestLimit = 10_000_000) {
  return { name: "test", requestsPerSecond, dailyRequestLimit, monthlyRequestLimit: null };
}

/**
 * Limits with DATA_PLANE_THREADS=2. The per-second counts are the process's (one table in shared memory,
 * one rate-limit instance in Redis: exact within the process, threads-seed-limit.test.ts); so are the
 * quotas' (quota/shared-quota-counts.ts: each thread flushes its own units to Redis, under its own
 * instance id, but decides on the units every thread has recorded).
 */
describe("data plane with DATA_PLANE_THREADS=2: rate limits and quotas across the threads", function () {
  this.timeout(120_000);
  let up: RecordingUpstream;
  let ns: TestRedisNamespace;
  let seeder: RedisSeeder;
  let usage: UsageReader;
  let redis: Redis;
  let plane: ThreadedPlane | undefined;
  /** A second process, for the test across processes. */
  let other: ThreadedPlane | undefined;

  beforeEach(async () => {
    up = await new RecordingUpstream().start();
    ns = createTestRedisNamespace();
    seeder = new RedisSeeder(ns.prefix);
    usage = new UsageReader(ns.prefix);
    redis = new Redis(TEST_REDIS_URL);
    await seeder.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
  });

  afterEach(async () => {
    await plane?.proc.stop(20_000);
    plane = undefined;
    await other?.proc.stop(20_000);
    other = undefined;
    redis.disconnect();
    await usage.close();
    await seeder.close();
    await up.stop();
    await ns.cleanup();
  });

  const start = async () => {
    plane = await startThreadedPlane(ns.prefix, {
      ...LIMITS_ENV,
      SHARED_NODE_EXTRA_NAMESPACES: "lim",
      LOG_LEVEL: "warn",
      USAGE_MODE: "off",
    });
    // The process announces itself in the rate limiter's instances hash (heartbeat every 500 ms), once
    // for both threads: they reconcile its shared count as one instance.
    const instances = new RedisNames(ns.prefix).rateLimitInstances();
    await eventually(
      async () => (await redis.hlen(instances)) >= 1,
      "the process registered as a rate-limit instance",
    );

    return plane;
  };

  interface Outcome {
    ok: number;
    refused: number;
    other: string[];
    /** data.reason of the 429s -> how many. */
    reasons: Map<string, number>;
  }

  /** `loops` concurrent request loops on the global fetch pool (one connection each) until `until`. */
  /** `refusedAt` is called on each 429 (the caller notes its second). */
  const hammer = async (
    url: string,
    method: string,
    loops: number,
    until: (o: Outcome) => boolean,
    refusedAt?: (o: Outcome) => void,
  ) => {
    const out: Outcome = { ok: 0, refused: 0, other: [], reasons: new Map() };
    const loop = async () => {
      while (!until(out)) {
        const r = await post(url, call(method));
        if (r.status === 200) out.ok++;
        else if (r.status === 429) {
          out.refused++;
          refusedAt?.(out);
          const reason = r.json?.error?.data?.reason as string;
          out.reasons.set(reason, (out.reasons.get(reason) ?? 0) + 1);
        } else out.other.push(`${r.status} ${r.text}`);
      }
    };
    await Promise.all(Array.from({ length: loops }, loop));
    return out;
  };

  it("a per-second limit shared by both threads: each loaded second within 10% of the limit", async () => {
    // As the two-instance test (limits/cluster-limits.test.ts): high enough that the few requests
    // admitted just before a second's end and counted by the upstream in the next second stay well
    // inside 10% (at 50/s, three of them already made 56), low enough for a loaded machine to cross it
    // (at 200/s it did not).
    const limit = 100;
    const key = await seeder.putKey({ workspaceId: WS, plan: plan(limit) });
    const p = await start();
    up.watch = "lim_threads";
    const before = await scrape(p.metricsBase);
    await nextSecond();
    const first = Math.floor(Date.now() / 1000);
    const endMs = (first + 3) * 1000;
    const url = `${p.base}/eth/rpc?apikey=${key}`;
    const r = await hammer(url, "lim_threads", 24, () => Date.now() >= endMs);
    assert.deepEqual(r.other, []);
    const d = perThreadDelta(before, await scrape(p.metricsBase));
    const perSecond = [first, first + 1, first + 2].map((s) => up.perSecond.get(s) ?? 0);
    console.log(
      `      limit ${limit}/s over 2 threads: admitted per second ${perSecond.join(", ")}; ${r.ok} served, ` +
        `${r.refused} refused; answered by thread 1: ${d.get("1")}, thread 2: ${d.get("2")}`,
    );
    // Both threads took a real share of the load, so both limited it together.
    for (const [t, n] of d) assert.ok(n >= (r.ok + r.refused) * 0.2, `thread ${t} answered only ${n}`);
    assert.ok(r.refused > 0, `the load never crossed the limit: ${r.ok} served, ${r.refused} refused`);
    assert.equal(r.reasons.get("rate_limit"), r.refused);
    for (const n of perSecond) {
      assert.ok(n <= limit * 1.1, `admitted ${n} in a second, limit ${limit}`);
    }
    // Each of the three seconds was loaded (the 24 loops run throughout): within 10% below too, but a
    // stall of this shared machine can starve one second, so at least two of the three must be.
    assert.ok(
      perSecond.filter((n) => n >= limit * 0.9).length >= 2,
      `fewer than two seconds reached 90% of ${limit}: ${perSecond}`,
    );
    assert.equal(up.count("lim_threads"), r.ok);
    // Three seconds of load: both threads have heartbeated several times, into one field.
    const instances = await redis.hlen(new RedisNames(ns.prefix).rateLimitInstances());
    assert.equal(instances, 1, "the two threads registered as two rate-limit instances");
  });

  it("two processes of two threads each on one key: one rate-limit instance per process, each loaded second within 10% of the limit", async () => {
    const limit = 100;
    const key = await seeder.putKey({ workspaceId: WS, plan: plan(limit) });
    const env = { ...LIMITS_ENV, SHARED_NODE_EXTRA_NAMESPACES: "lim", LOG_LEVEL: "warn", USAGE_MODE: "off" };
    [plane, other] = await Promise.all([
      startThreadedPlane(ns.prefix, env),
      startThreadedPlane(ns.prefix, env),
    ]);
    // Four threads, two processes: two instances reconcile through Redis (heartbeats every 500 ms).
    const instances = new RedisNames(ns.prefix).rateLimitInstances();
    await instancesSeeEachOther(redis, ns.prefix, 2);
    up.watch = "lim_procs";
    await nextSecond();
    const first = Math.floor(Date.now() / 1000);
    const endMs = (first + 3) * 1000;
    const clientSide = new Map<number, number>();
    const count429 = () => {
      const sec = Math.floor(Date.now() / 1000) - first;
      clientSide.set(sec, (clientSide.get(sec) ?? 0) + 1);
    };
    const [ra, rb] = await Promise.all(
      [plane, other].map((p) =>
        hammer(`${p.base}/eth/rpc?apikey=${key}`, "lim_procs", 12, () => Date.now() >= endMs, count429),
      ),
    );
    assert.deepEqual([...ra!.other, ...rb!.other], []);
    const perSecond = [first, first + 1, first + 2].map((s) => up.perSecond.get(s) ?? 0);
    console.log(
      `      limit ${limit}/s over 2 processes x 2 threads: admitted per second ${perSecond.join(", ")}; ` +
        `${ra!.ok + rb!.ok} served, ${ra!.refused + rb!.refused} refused; 429s per second ${JSON.stringify([...clientSide])}`,
    );
    assert.ok(ra!.refused + rb!.refused > 0, "the load never crossed the limit");
    // As between two single-thread processes (limits/cluster-limits.test.ts): never more than 10% over;
    // within 10% below in a second that saw 429s, and at least two of the three seconds loaded.
    let loaded = 0;
    perSecond.forEach((n, i) => {
      assert.ok(n <= limit * 1.1, `admitted ${n} in a second, limit ${limit}`);
      if ((clientSide.get(i) ?? 0) > 0) {
        loaded++;
        assert.ok(n >= limit * 0.9, `admitted ${n} in a loaded second, limit ${limit}`);
      }
    });
    assert.ok(loaded >= 2, "the load crossed the limit in at least two of the three seconds");
    assert.equal(await redis.hlen(instances), 2, "four threads registered as more than two instances");
    assert.equal(up.count("lim_procs"), ra!.ok + rb!.ok);
  });

  it("a daily quota shared by both threads: served to the limit, over by no more than the calls in flight, then counted exactly", async () => {
    const daily = 1500;
    const loops = 24;
    const key = await seeder.putKey({ workspaceId: WS, plan: plan(1_000_000, daily) });
    const p = await start();
    const before = await scrape(p.metricsBase);
    const url = `${p.base}/eth/rpc?apikey=${key}`;
    const deadline = Date.now() + 60_000;
    // Until the quota has clearly closed: 200 refusals seen (or a minute, which fails below).
    const r = await hammer(url, "lim_quota", loops, (o) => o.refused >= 200 || Date.now() > deadline);
    assert.deepEqual(r.other, []);
    const d = perThreadDelta(before, await scrape(p.metricsBase));
    console.log(
      `      daily limit ${daily} over 2 threads: ${r.ok} served (${((r.ok / daily - 1) * 100).toFixed(1)}% off), ` +
        `${r.refused} refused; answered by thread 1: ${d.get("1")}, thread 2: ${d.get("2")}`,
    );
    for (const [t, n] of d) assert.ok(n >= (r.ok + r.refused) * 0.2, `thread ${t} answered only ${n}`);
    // A call is checked when admitted and counted when answered: the calls in flight at the limit (one per
    // loop at most) pass on its last units. Nothing else, however fast the threads serve: each decides on
    // the other's units before they are flushed (per thread, 50 ms of flushes let 12.9% more through).
    assert.ok(r.ok >= daily && r.ok <= daily + loops, `served ${r.ok}, daily limit ${daily}`);
    assert.equal(r.reasons.get("daily_limit"), r.refused);
    // SIGTERM: each thread flushes its last counts; the day's count is then exactly what was served.
    assert.equal(await p.proc.stop(20_000), 0, p.proc.output());
    assert.equal((await usage.read(WS)).count, r.ok);
    assert.equal(up.count("lim_quota"), r.ok);
  });
});
