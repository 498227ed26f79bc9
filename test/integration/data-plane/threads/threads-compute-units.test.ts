import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { RedisNames } from "../../../../shared/src/redis/keys";
import type { NetworkRecord } from "../../../../shared/src/redis/records";
import { eventually, nextSecond } from "../../../helpers/eventually";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../../helpers/seed-redis";
import { post } from "../harness";
import { batchOf, call, LIMITS_ENV, RecordingUpstream } from "../limits/fixtures";
import {
  instancesSeeEachOther,
  perThreadDelta,
  scrape,
  startThreadedPlane,
  type ThreadedPlane,
} from "./fixture";

const WS = "ws-threads-cu";
/**
 * Each call of the watched method weighs 4: the 160 compute units/s limit admits 40 calls a second, few
 * enough for a loaded 2-core machine to offer more.
 */
const WEIGHT = 4;
const LIMIT_CU = 160;

/**
 * A per-second limit in compute units with DATA_PLANE_THREADS=2, and across two such processes: the
 * compute-unit window is one more identifier in the same process table and Redis reconciliation as the
 * request windows (threads-limits.test.ts), so it must hold as closely: exact within a process, never more
 * than 10% over across processes, and near the limit while loaded.
 */
describe("data plane with DATA_PLANE_THREADS=2: a compute-unit limit across threads and processes", function () {
  this.timeout(120_000);
  let up: RecordingUpstream;
  let ns: TestRedisNamespace;
  let seeder: RedisSeeder;
  let redis: Redis;
  const planes: ThreadedPlane[] = [];
  const env = { ...LIMITS_ENV, SHARED_NODE_EXTRA_NAMESPACES: "lim", LOG_LEVEL: "warn", USAGE_MODE: "off" };

  beforeEach(async () => {
    up = await new RecordingUpstream().start();
    ns = createTestRedisNamespace();
    seeder = new RedisSeeder(ns.prefix);
    redis = new Redis(TEST_REDIS_URL);
    const net: NetworkRecord = {
      ...evmNetwork("eth", [{ id: "up", httpUrl: up.url }]),
      methodCosts: { defaultUnits: 1, methods: { lim_cu: WEIGHT } },
    };
    await seeder.putNetwork(net);
  });

  afterEach(async () => {
    for (const p of planes.splice(0)) await p.proc.stop(20_000);
    redis.disconnect();
    await seeder.close();
    await up.stop();
    await ns.cleanup();
  });

  const putKey = () =>
    seeder.putKey({
      workspaceId: WS,
      plan: {
        name: "cu",
        requestsPerSecond: 1_000_000,
        dailyRequestLimit: 10_000_000,
        monthlyRequestLimit: null,
        computeUnitsPerSecond: LIMIT_CU,
      },
    });

  /** Loops of single calls on each url until `endMs`; counts answers and notes each 429's second. */
  const hammer = async (urls: string[], loops: number, endMs: number, first: number) => {
    const out = { ok: 0, refused: 0, other: [] as string[], reasons: new Map<string, number>() };
    const refusedIn = new Map<number, number>();
    const loop = async (url: string) => {
      while (Date.now() < endMs) {
        const r = await post(url, call("lim_cu"));
        if (r.status === 200) out.ok++;
        else if (r.status === 429) {
          out.refused++;
          const sec = Math.floor(Date.now() / 1000) - first;
          refusedIn.set(sec, (refusedIn.get(sec) ?? 0) + 1);
          const reason = r.json?.error?.data?.reason as string;
          out.reasons.set(reason, (out.reasons.get(reason) ?? 0) + 1);
        } else out.other.push(`${r.status} ${r.text}`);
      }
    };
    await Promise.all(urls.flatMap((url) => Array.from({ length: loops }, () => loop(url))));
    return { ...out, refusedIn };
  };

  /** Compute units admitted per second (what the upstream received, times the weight), checked. */
  /**
   * Compute units the upstream received per second (calls x weight), checked against the limit. A call
   * reaches the upstream a moment after its admission, so on a loaded machine part of one second's
   * admissions arrive in the next: per-second arrivals are not per-second admissions, but arrivals never
   * lead admissions. So through each second k of the load, what arrived is at most k + 1 windows' worth
   * (times `over`: 1 within one process, exact; 1.1 across processes, reconciled), and what arrived in the
   * three seconds and the one after covers at least 90% of each second that saw 429s.
   */
  const checkSeconds = (first: number, refusedIn: Map<number, number>, label: string, over: number) => {
    const arrived = [0, 1, 2, 3].map((i) => (up.perSecond.get(first + i) ?? 0) * WEIGHT);
    console.log(
      `      ${label}: compute units arriving per second ${arrived.join(", ")} (limit ${LIMIT_CU}/s)`,
    );
    let sum = 0;
    for (let k = 0; k < 3; k++) {
      sum += arrived[k]!;
      assert.ok(
        sum <= (k + 1) * LIMIT_CU * over,
        `${sum} compute units through second ${k}, limit ${LIMIT_CU}/s`,
      );
    }
    const loaded = [0, 1, 2].filter((i) => (refusedIn.get(i) ?? 0) > 0).length;
    assert.ok(loaded >= 2, "the load crossed the limit in at least two of the three seconds");
    const total = arrived.reduce((a, b) => a + b, 0);
    assert.ok(total >= loaded * LIMIT_CU * 0.9, `${total} compute units over ${loaded} loaded seconds`);
  };

  it("one process, two threads: the limit holds for the process; a batch is admitted whole or not at all", async () => {
    const key = await putKey();
    const p = await startThreadedPlane(ns.prefix, env);
    planes.push(p);
    const instances = new RedisNames(ns.prefix).rateLimitInstances();
    await eventually(async () => (await redis.hlen(instances)) >= 1, "the process registered");
    up.watch = "lim_cu";
    const before = await scrape(p.metricsBase);
    const url = `${p.base}/eth/rpc?apikey=${key}`;
    await nextSecond();
    const first = Math.floor(Date.now() / 1000);
    const r = await hammer([url], 24, (first + 3) * 1000, first);
    assert.deepEqual(r.other, []);
    assert.ok(r.refused > 0, `the load never crossed the limit: ${r.ok} served`);
    assert.equal(r.reasons.get("rate_limit"), r.refused);
    checkSeconds(first, r.refusedIn, "2 threads", 1);
    assert.equal(up.count("lim_cu"), r.ok);
    const d = perThreadDelta(before, await scrape(p.metricsBase));
    for (const [t, n] of d) assert.ok(n >= (r.ok + r.refused) * 0.2, `thread ${t} answered only ${n}`);
  });

  it("one process, two threads: batches racing single calls for the window are admitted whole or not at all", async () => {
    const key = await putKey();
    const p = await startThreadedPlane(ns.prefix, env);
    planes.push(p);
    const url = `${p.base}/eth/rpc?apikey=${key}`;
    const endMs = Date.now() + 3000;
    // Batches of 10 (20 compute units) alongside single calls, in the same window: each batch is served
    // whole or refused whole, never split, whatever the other thread admitted meanwhile.
    const batches = { whole: 0, refused: 0, other: [] as string[] };
    const batchLoop = async () => {
      while (Date.now() < endMs) {
        const b = await post(url, batchOf(10, "lim_cu"));
        const all = Array.isArray(b.json) && b.json.every((e: { result?: string }) => e.result === "0x1");
        if (b.status === 200 && all) batches.whole++;
        else if (b.status === 429 && b.json?.error?.data?.reason === "rate_limit") batches.refused++;
        else batches.other.push(`${b.status} ${b.text.slice(0, 200)}`);
      }
    };
    const [r] = await Promise.all([
      hammer([url], 16, endMs, Math.floor(Date.now() / 1000)),
      batchLoop(),
      batchLoop(),
      batchLoop(),
      batchLoop(),
    ]);
    console.log(
      `      2 threads: ${r.ok} single calls served, ${r.refused} refused; ` +
        `batches of 10: ${batches.whole} whole, ${batches.refused} refused`,
    );
    assert.deepEqual(r.other, []);
    assert.deepEqual(batches.other, []);
    assert.ok(batches.refused > 0 && batches.whole > 0, "batches were both served and refused");
    // Everything the upstream saw was answered: single calls, and batches served whole.
    assert.equal(up.count("lim_cu"), r.ok + batches.whole * 10);
  });

  it("two processes of two threads each on one key: never more than 10% over the limit, near it while loaded", async () => {
    const key = await putKey();
    planes.push(
      ...(await Promise.all([startThreadedPlane(ns.prefix, env), startThreadedPlane(ns.prefix, env)])),
    );
    await instancesSeeEachOther(redis, ns.prefix, 2);
    up.watch = "lim_cu";
    await nextSecond();
    const first = Math.floor(Date.now() / 1000);
    const r = await hammer(
      planes.map((p) => `${p.base}/eth/rpc?apikey=${key}`),
      12,
      (first + 3) * 1000,
      first,
    );
    assert.deepEqual(r.other, []);
    assert.ok(r.refused > 0, "the load never crossed the limit");
    assert.equal(r.reasons.get("rate_limit"), r.refused);
    checkSeconds(first, r.refusedIn, "2 processes x 2 threads", 1.1);
    assert.equal(up.count("lim_cu"), r.ok);
  });
});
