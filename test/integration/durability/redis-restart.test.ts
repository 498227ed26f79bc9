import assert from "node:assert/strict";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";
import { type DataPlane, startDataPlane } from "../../../data-plane/src/data-plane";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { QueueName } from "../../../shared/src/queue/names";
import { USAGE_CONSUMER_GROUP } from "../../../shared/src/usage/contract";
import { eventually } from "../../helpers/eventually";
import { PrivateRedis } from "../../helpers/redis-server";
import { usageSettled } from "../../helpers/usage-stream";
import {
  createApp,
  createStubNetwork,
  type Harness,
  type Json,
  startHarness,
} from "../control-plane/harness";
import { post, sleep } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";

/**
 * Redis faults against the running stack (control plane, worker and data plane in this process, on a
 * private redis-server that the test shuts down with SHUTDOWN NOSAVE and starts again, empty, on the same
 * port).
 */
describe("durability: Redis down and Redis restarted empty", function () {
  this.timeout(120_000);
  let redis: PrivateRedis;
  let h: Harness;
  let stub: StubUpstream;
  let probe: Redis;
  const planes: DataPlane[] = [];
  let worker: ControlPlaneWorker | undefined;

  const startDp = async (): Promise<DataPlane> => {
    const dp = await startDataPlane(
      loadDataPlaneConfig({
        REDIS_URL: redis.url,
        REDIS_KEY_PREFIX: h.ns.prefix,
        DATA_PLANE_PORT: "0",
        DATA_PLANE_HOST: "127.0.0.1",
        LOG_LEVEL: process.env.LOG_LEVEL ?? "silent",
        HEALTH_CHECK_INTERVAL_MS: "200",
        USAGE_FLUSH_INTERVAL_MS: "200",
        RATE_LIMIT_MODE: "off",
        QUOTA_MODE: "off",
        SHUTDOWN_LINGER_MS: "0",
      }),
    );
    planes.push(dp);
    return dp;
  };
  const call = (dp: DataPlane, key: string, id: number | string = 1) =>
    post(`http://127.0.0.1:${dp.port}/evm-stub/rpc?apikey=${key}`, {
      jsonrpc: "2.0",
      id,
      method: "eth_blockNumber",
    });

  before(async () => {
    redis = await new PrivateRedis().start();
    stub = await new StubUpstream().start();
    h = await startHarness({ REDIS_URL: redis.url, PUBLICATION_RETRY_MIN_MS: "100" });
    probe = new Redis(redis.url, { maxRetriesPerRequest: 1, lazyConnect: true });
    probe.on("error", () => undefined);
    await probe.connect();
    await createStubNetwork(h, stub.url);
  });

  after(async () => {
    for (const dp of planes) await dp.close();
    await worker?.close();
    probe?.disconnect();
    await h?.close();
    await stub?.stop();
    await redis?.stop();
  });

  for (const withData of [false, true]) {
    it(`a key regenerated and an app deleted while Redis is down stop working within seconds of it coming back (${withData ? "with its data" : "empty"})`, async () => {
      const a = await h.signUp();
      const regen = await createApp(h, a.token, "regen");
      const doomed = await createApp(h, a.token, "doomed");
      const dp = await startDp();
      assert.equal((await call(dp, regen.apiKey)).status, 200);
      assert.equal((await call(dp, doomed.apiKey)).status, 200);

      if (withData) await redis.shutdownSave();
      else await redis.shutdownNoSave();
      // Postgres is the source of truth: both mutations succeed with Redis down; the publication is retried.
      const m0 = performance.now();
      const r = await h.ok<Json>(
        `mutation($id: ID!) { regenerateApiKey(appId: $id, gracePeriodSeconds: 0) { apiKey } }`,
        { id: regen.id },
        a.token,
      );
      const newKey: string = r.regenerateApiKey.apiKey;
      assert.notEqual(newKey, regen.apiKey);
      await h.ok(`mutation($id: ID!) { deleteApp(id: $id) }`, { id: doomed.id }, a.token);
      const mutationsMs = performance.now() - m0;
      assert.equal(h.cp.services.publication.pendingRetry, true, "the failed publication is pending");
      const rounds = h.cp.services.publication.retryRounds;
      // While Redis is down the data plane serves from its cache (old keys included: it cannot know).
      assert.equal((await call(dp, regen.apiKey)).status, 200);
      // Redis stays down over at least one retry round of the publication (which waits for it).
      await eventually(
        () => h.cp.services.publication.retryRounds > rounds,
        "a publication retry round while Redis is down",
      );

      await redis.start(); // same port, empty or with the old records (the old keys still in it)
      const back = performance.now();
      if (withData) assert.equal(await probe.exists(h.names.publishedAt()), 1, "restarted with its data");
      await eventually(async () => {
        const [o, d] = await Promise.all([call(dp, regen.apiKey), call(dp, doomed.apiKey)]);
        return o.status === 401 && d.status === 401;
      }, "the old keys refused after Redis came back");
      const oldRefusedMs = performance.now() - back;
      assert.equal((await call(dp, newKey)).status, 200, "the regenerated key works");
      assert.equal(h.cp.services.publication.pendingRetry, false);
      assert.equal(await probe.exists(h.names.publishedAt()), 1, "the retry was a full re-publish");
      console.log(
        `      old key and deleted app's key refused ${Math.round(oldRefusedMs)} ms after Redis came back ${withData ? "with its data" : "empty"}; the two mutations took ${Math.round(mutationsMs)} ms with Redis down`,
      );
    });
  }

  it("without the worker, the control plane notices the lost publication on reconnect and re-publishes", async () => {
    assert.equal(worker, undefined, "this test runs before the worker is started");
    const a = await h.signUp();
    const app = await createApp(h, a.token, "no-worker");
    const dp = await startDp();
    assert.equal((await call(dp, app.apiKey)).status, 200);
    await redis.shutdownNoSave();
    // Down for a while (the control plane notices the lost connection); a slower machine only makes the
    // outage longer, which the repair must survive anyway.
    await sleep(500);
    const applied = dp.eventsApplied();
    await redis.start();
    const back = performance.now();
    await eventually(
      async () => (await probe.exists(h.names.publishedAt()).catch(() => 0)) === 1,
      "the re-publish after Redis came back",
    );
    const repairedMs = performance.now() - back;
    assert.equal(
      await probe.exists(h.names.apiKey(hashApiKey(app.apiKey))),
      1,
      "the key record is back in Redis",
    );
    // The data plane kept serving and took the re-publish (its caches dropped by the resync, or by the
    // reconnect that read the new marker): the key is read again from Redis.
    await eventually(() => dp.eventsApplied() > applied, "the re-publish's resync applied by the plane");
    assert.equal((await call(dp, app.apiKey)).status, 200);
    console.log(`      marker back ${Math.round(repairedMs)} ms after Redis restarted empty (no worker)`);
  });

  it("Redis restarted empty mid-load: serving and counting recover without a hand", async () => {
    const a = await h.signUp();
    const app = await createApp(h, a.token, "steady");
    worker = await startWorker(h.config, undefined, {
      usage: { blockMs: 100, consumerName: "durability" },
    });
    const dp = await startDp();
    assert.equal((await call(dp, app.apiKey)).status, 200); // the key is cached
    const byStatus = new Map<number, number>();
    const timeline: { t: number; status: number }[] = [];
    let cut = 0;
    let stop = false;
    const loop = async (k: number) => {
      for (let i = 0; !stop; i++) {
        try {
          const res = await call(dp, app.apiKey, `${k}-${i}`);
          byStatus.set(res.status, (byStatus.get(res.status) ?? 0) + 1);
          timeline.push({ t: performance.now(), status: res.status });
        } catch {
          cut++;
        }
        await sleep(10);
      }
    };
    const t0 = performance.now();
    const loops = Array.from({ length: 4 }, (_, k) => loop(k));
    // Load before the outage: answers counted, not time.
    await eventually(() => timeline.length >= 50, "50 answers before the outage", 30_000);
    await redis.shutdownNoSave();
    // Down while the load goes on (a slower machine only makes the outage longer).
    await sleep(1_500);
    await redis.start();
    const back = performance.now();
    // Repaired without a hand: marker, consumer group and job schedulers are back.
    await eventually(
      async () => (await probe.exists(h.names.publishedAt()).catch(() => 0)) === 1,
      "the re-publish after Redis came back",
    );
    const repairedMs = performance.now() - back;
    // Load after the repair: answers counted, not time.
    const repaired = performance.now();
    await eventually(
      () => timeline.filter((x) => x.t > repaired).length >= 50,
      "50 answers after the repair",
      30_000,
    );
    stop = true;
    await Promise.all(loops);
    const answered = [...byStatus.values()].reduce((x, y) => x + y, 0);
    assert.equal(cut, 0, "requests cut without an answer");
    assert.deepEqual([...byStatus.keys()], [200], `statuses: ${JSON.stringify([...byStatus])}`);
    // The marker is written by the repair's re-publish, before it recreates the group, schedulers and
    // webhook jobs and counts the recovery: wait for that step to finish too.
    await eventually(() => worker!.recovery.recoveries >= 1, "the worker to notice the loss");

    const groups = (await probe.xinfo("GROUPS", h.names.usageStream())) as unknown[][];
    assert.ok(
      groups.some((g) => g.includes(USAGE_CONSUMER_GROUP)),
      "the usage consumer group was not recreated",
    );
    const schedulers = async (name: QueueName) => {
      const q = new Queue(name, { connection: probe, prefix: h.names.bullPrefix() });
      try {
        return (await q.getJobSchedulers()).length;
      } finally {
        await q.close();
      }
    };
    assert.ok((await schedulers(QueueName.Publication)) >= 1, "the re-publish scheduler was not re-added");
    assert.ok((await schedulers(QueueName.Usage)) >= 1, "the retention scheduler was not re-added");

    // Every answer (the ones served while Redis was down included) is counted once in Postgres.
    const total = async () =>
      (
        (await h.ok<Json>(
          `query($f: UsageFilter!) { usage(filter: $f) { requests24h { total success } } }`,
          {
            f: { appId: app.id },
          },
          a.token,
        )) as Json
      ).usage.requests24h as { total: number; success: number };
    // Everything flushed, read and acknowledged: the report is final.
    await usageSettled(probe, h.names.usageStream(), [dp]);
    const got = await total();
    // +1: the request that warmed the key cache.
    assert.deepEqual(got, { total: answered + 1, success: answered + 1 });
    console.log(
      `      ${answered} answered over ${Math.round((performance.now() - t0) / 1000)} s, all 200 and all counted; marker back ${Math.round(repairedMs)} ms after Redis restarted`,
    );
  });
});
