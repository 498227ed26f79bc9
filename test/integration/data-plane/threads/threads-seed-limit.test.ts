import assert from "node:assert/strict";
import { eventually } from "../../../helpers/eventually";
import { createTestRedisNamespace, type TestRedisNamespace } from "../../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../../helpers/seed-redis";
import { batchOf, LIMITS_ENV, RecordingUpstream } from "../limits/fixtures";
import {
  type Answer,
  connectionOn,
  startThreadedPlane,
  type ThreadConnection,
  type ThreadedPlane,
} from "./fixture";

const ROUNDS = 20;
/** A round is sent this early in its second at the latest (a stalled machine waits for the next one). */
const LATEST_START_MS = 300;

/**
 * Resolves early in a second the test has not used yet: at the next epoch-second boundary as the clock
 * reads it (the clock polled every millisecond; a late wake-up waits for the next one).
 */
async function nextSecond(after: number): Promise<number> {
  return eventually(
    () => {
      const now = Date.now();
      const second = Math.floor(now / 1000);
      return second > after && now % 1000 <= LATEST_START_MS ? second : undefined;
    },
    `a second after ${after}`,
    5_000,
    1,
  );
}

/** The reason of a 429 body (a batch is refused as an array of error objects, one per element). */
function reasonsOf(a: Answer): string[] {
  const list = Array.isArray(a.json) ? a.json : [a.json];
  return list.map((e: { error?: { data?: { reason?: string } } }) => e?.error?.data?.reason ?? "none");
}

/**
 * The seed's example (docs/contracts.md#how-requests-count): "With a 50 requests/second limit, two
 * simultaneous batches of 30 objects each: the second is rejected entirely." With DATA_PLANE_THREADS=2,
 * each batch on a connection served by a different thread, every round gives one 200 and one 429: the
 * threads admit against one per-second count of the process (ratelimit/window-counts.ts). Counted per
 * thread (the Redis reconciliation comes 25 ms later), both batches pass.
 */
describe("data plane with DATA_PLANE_THREADS=2: the seed's per-second example holds across the threads", function () {
  this.timeout(180_000);
  let up: RecordingUpstream;
  let ns: TestRedisNamespace;
  let seeder: RedisSeeder;
  let plane: ThreadedPlane | undefined;
  const conns: ThreadConnection[] = [];

  beforeEach(async () => {
    up = await new RecordingUpstream().start();
    ns = createTestRedisNamespace();
    seeder = new RedisSeeder(ns.prefix);
    await seeder.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
  });

  afterEach(async () => {
    for (const c of conns.splice(0)) c.close();
    await plane?.proc.stop(20_000);
    plane = undefined;
    await seeder.close();
    await up.stop();
    await ns.cleanup();
  });

  for (const mode of ["redis", "local"] as const) {
    it(`RATE_LIMIT_MODE=${mode}: ${ROUNDS} rounds of two simultaneous batches of 30 at 50/s, one per thread: one 200 and one 429 each`, async () => {
      const key = await seeder.putKey({
        workspaceId: `ws-seed-${mode}`,
        appId: "app-seed",
        plan: {
          name: "seed",
          requestsPerSecond: 50,
          dailyRequestLimit: 10_000_000,
          monthlyRequestLimit: null,
        },
      });
      plane = await startThreadedPlane(ns.prefix, {
        ...LIMITS_ENV,
        RATE_LIMIT_MODE: mode,
        SHARED_NODE_EXTRA_NAMESPACES: "lim",
        LOG_LEVEL: "warn",
        USAGE_MODE: "off",
      });
      const one = await connectionOn(plane.port, 1);
      conns.push(one);
      const two = await connectionOn(plane.port, 2);
      conns.push(two);
      const path = `/eth/rpc?apikey=${key}`;
      const rounds: string[] = [];
      let second = 0;
      for (let round = 0; round < ROUNDS; round++) {
        second = await nextSecond(second);
        const before = up.count("lim_seed");
        const [a, b] = await Promise.all([
          one.post(path, batchOf(30, "lim_seed", 1)),
          two.post(path, batchOf(30, "lim_seed", 101)),
        ]);
        const statuses = [a.status, b.status].sort();
        rounds.push(`${statuses.join("/")}`);
        assert.deepEqual(
          statuses,
          [200, 429],
          `round ${round}: ${a.status} ${a.text} | ${b.status} ${b.text}`,
        );
        const refused = a.status === 429 ? a : b;
        const served = a.status === 200 ? a : b;
        assert.deepEqual(new Set(reasonsOf(refused)), new Set(["rate_limit"]), refused.text);
        assert.equal(served.json.length, 30);
        // The refused batch was refused whole: only the admitted one's 30 reached the node.
        assert.equal(up.count("lim_seed") - before, 30, `round ${round}`);
      }
      console.log(`      ${ROUNDS} rounds (${mode}): ${rounds.join(", ")}`);
    });
  }
});
