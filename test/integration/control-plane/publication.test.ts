import assert from "node:assert/strict";
import { Redis } from "ioredis";
import type { DataSource } from "typeorm";
import { loadConfig } from "../../../control-plane/src/config";
import { PublicationService } from "../../../control-plane/src/publication/publication.service";
import { startWorker } from "../../../control-plane/src/worker/worker";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { createLogger } from "../../../shared/src/log/logger";
import { type RedisClient, scanKeys } from "../../../shared/src/redis/connect";
import { PlaneEvent } from "../../../shared/src/redis/records";
import { eventually } from "../../helpers/eventually";
import { freePort } from "../../helpers/ports";
import { describeOverRedis } from "../../helpers/redis";
import { post } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";
import { ADMIN_TOKEN, createApp, Harness, startHarness, startHarnessDataPlane } from "./harness";

/** Every key under `prefix` with its value (on a cluster: every master scanned). */
async function dumpPrefix(
  redis: RedisClient,
  prefix: string,
  exclude: RegExp,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  await scanKeys(redis, `${prefix}*`, async (keys) => {
    for (const k of keys) {
      if (exclude.test(k)) continue;
      const type = await redis.type(k);
      out[k] = type === "hash" ? JSON.stringify(await redis.hgetall(k)) : ((await redis.get(k)) ?? "");
    }
  });
  return out;
}

/** Deletes every key under `prefix`, one DEL per key (keys of many slots on a cluster). */
async function flushPrefix(redis: RedisClient, prefix: string): Promise<void> {
  await scanKeys(redis, `${prefix}*`, async (keys) => {
    await Promise.all(keys.map((k) => redis.del(k)));
  });
}

describeOverRedis("control-plane: publication to Redis", (redis) => {
  let h: Harness;
  let user: { token: string; workspaceId: string };
  let graceOld: string;
  before(async () => {
    h = await startHarness({ REPUBLISH_INTERVAL_SECONDS: "5" }, { redis: redis() });
    user = await h.signUp();
    await h.ok(
      `mutation { createNetwork(input: { slug: "n1", name: "N1", protocol: EVM, chainId: 1 }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    await h.ok(
      `mutation { addUpstream(networkSlug: "n1", input: { httpUrl: "http://127.0.0.1:1" }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    const app = await createApp(h, user.token, "one");
    await createApp(h, user.token, "two");
    await h.ok(
      `mutation($a: ID!) { addAllowlistEntry(appId: $a, input: { kind: ORIGIN, value: "https://x.example.com" }) { id } }`,
      { a: app.id },
      user.token,
    );
    await h.ok(
      `mutation($a: ID!) { regenerateApiKey(appId: $a, gracePeriodSeconds: 600) { id } }`,
      { a: app.id },
      user.token,
    );
    graceOld = app.apiKey;
  });
  after(async () => {
    await h?.close();
  });

  it("republishAll after a FLUSH of the prefix restores every record identically, and announces resync", async () => {
    // Rate-limit counters (login, sign-up) and BullMQ queues (the key regeneration queued a webhook event)
    // are not published records.
    const skip = /published-at$|login:|signup:|bull:/;
    const before = await dumpPrefix(h.redis, h.ns.prefix, skip);
    assert.ok(Object.keys(before).length >= 6, JSON.stringify(Object.keys(before)));
    const ttlBefore = await h.redis.pttl(h.names.apiKey(hashApiKey(graceOld)));
    const sub = h.ns.redis.client("dp-events");
    let events: PlaneEvent[] = [];
    await sub.subscribe(h.names.eventsChannel());
    sub.on("message", (_c, m) => events.push(JSON.parse(m)));
    // Announcements of the set-up's mutations still crossing a cluster's bus are not republishAll's: a
    // marker published after them arrives after them.
    await h.redis.publish(h.names.eventsChannel(), JSON.stringify({ type: "test.marker" }));
    await eventually(() => events.some((e) => (e as { type: string }).type === "test.marker"), "the marker");
    events = [];
    await flushPrefix(h.redis, h.ns.prefix);
    assert.deepEqual(await dumpPrefix(h.redis, h.ns.prefix, skip), {});
    try {
      const res = await h.cp.services.publication.republishAll();
      assert.equal(res.keys, 3); // two current keys + one in its grace period
      assert.deepEqual(await dumpPrefix(h.redis, h.ns.prefix, skip), before);
      const ttl = await h.redis.pttl(h.names.apiKey(hashApiKey(graceOld)));
      assert.ok(
        ttl > 0 && Math.abs(ttl - ttlBefore) < 5000,
        `grace key keeps its expiry (${ttl} vs ${ttlBefore})`,
      );
      assert.ok(Date.parse((await h.redis.get(h.names.publishedAt()))!) > Date.now() - 5000);
      await eventually(() => events.length > 0, "the resync event");
      assert.deepEqual(events, [{ type: "resync" }]);
    } finally {
      sub.disconnect();
    }
  });

  it("republishAll removes stale key records (found by SCAN) and keeps live ones", async () => {
    const stale = h.names.apiKey("deadbeef".repeat(8));
    await h.redis.set(stale, "{}");
    const res = await h.cp.services.publication.republishAll();
    assert.equal(res.staleKeysRemoved, 1);
    assert.equal(await h.redis.exists(stale), 0);
    assert.equal(await h.redis.exists(h.names.apiKey(hashApiKey(graceOld))), 1);
  });

  it("the worker's repeatable RepublishAll job repairs a flushed Redis; starting twice keeps one scheduler", async () => {
    const config = loadConfig({
      DATABASE_URL: h.db.url,
      ...h.ns.redis.env(),
      REDIS_KEY_PREFIX: h.ns.prefix,
      LOG_LEVEL: "silent",
      REPUBLISH_INTERVAL_SECONDS: "5",
    });
    const w1 = await startWorker(config);
    const w2 = await startWorker(config);
    try {
      assert.equal((await w1.queue.getJobSchedulers()).length, 1);
      // Two DELs: the keys are in different slots on a cluster.
      await h.redis.del(h.names.publishedAt());
      await h.redis.del(h.names.networks());
      await eventually(
        async () => (await h.redis.exists(h.names.publishedAt())) === 1,
        "the worker's republish",
        15_000,
      );
      assert.equal(await h.redis.exists(h.names.publishedAt()), 1, "republished by the worker");
      assert.equal(await h.redis.hexists(h.names.networks(), "n1"), 1);
    } finally {
      await w2.close();
      await w1.close();
    }
  });

  it("a failed publication does not fail the committed mutation (logged; repaired by re-publish)", async () => {
    const pub = h.cp.services.publication as unknown as { publishKeys: (...a: unknown[]) => Promise<void> };
    const original = pub.publishKeys;
    pub.publishKeys = async () => {
      throw new Error("redis down (simulated)");
    };
    let app: { id: string; apiKey: string };
    try {
      app = await createApp(h, user.token, "while-redis-down");
    } finally {
      pub.publishKeys = original;
    }
    assert.equal(await h.redis.exists(h.names.apiKey(hashApiKey(app.apiKey))), 0);
    await h.cp.services.publication.republishAll();
    assert.equal(await h.redis.exists(h.names.apiKey(hashApiKey(app.apiKey))), 1);
  });

  it("a key revoked through GraphQL stops working on a data plane within 1 s; a new key works at once", async () => {
    const stub = await new StubUpstream().start();
    await h.ok(
      `mutation($u: String!) {
        n: createNetwork(input: { slug: "n2", name: "N2", protocol: EVM, chainId: 31337 }) { id }
        u: addUpstream(networkSlug: "n2", input: { httpUrl: $u }) { id } }`,
      { u: stub.url },
      ADMIN_TOKEN,
    );
    const dp = await startHarnessDataPlane(h, {
      RATE_LIMIT_MODE: "off",
      QUOTA_MODE: "off",
      USAGE_MODE: "off",
    });
    try {
      const app = await createApp(h, user.token, "revoked-later");
      const body = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
      const url = (key: string) => `http://127.0.0.1:${dp.port}/n2/rpc?apikey=${key}`;
      // Cached as valid by the data plane before the change.
      assert.equal((await post(url(app.apiKey), body)).status, 200);
      const regenerated = await h.ok<{ regenerateApiKey: { apiKey: string } }>(
        `mutation($a: ID!) { regenerateApiKey(appId: $a, gracePeriodSeconds: 0) { apiKey } }`,
        { a: app.id },
        user.token,
      );
      assert.equal((await post(url(regenerated.regenerateApiKey.apiKey), body)).status, 200);
      await eventually(
        async () => (await post(url(app.apiKey), body)).status === 401,
        "the revoked key refused",
      );
      assert.equal(await h.redis.exists(h.names.apiKey(hashApiKey(app.apiKey))), 0);
    } finally {
      await dp.close();
      await stub.stop();
    }
  });

  it("while Redis is unreachable the retry timer does not read Postgres (no attempt can land)", async () => {
    // Nothing listens on this loopback port: the connection never becomes ready.
    const down = new Redis(`redis://127.0.0.1:${await freePort()}`, {
      maxRetriesPerRequest: 1,
      retryStrategy: () => 100,
    });
    down.on("error", () => undefined);
    const real = h.cp.services.publication.dataSource;
    let queries = 0;
    const counting = {
      query: (...args: Parameters<DataSource["query"]>) => {
        queries++;
        return real.query(...args);
      },
    } as unknown as DataSource;
    const pub = new PublicationService(counting, down, h.names, createLogger("test", "silent"), {
      minMs: 20,
      maxMs: 40,
    });
    try {
      await pub.safely("simulated", () => Promise.reject(new Error("redis down (simulated)")));
      await eventually(() => pub.retryRounds >= 5, "five retry rounds");
      assert.equal(queries, 0, "each timer attempt read Postgres while Redis was down");
      assert.equal(pub.pendingRetry, true, "still waiting to re-publish");
    } finally {
      pub.stop();
      down.disconnect();
    }
  });
});
