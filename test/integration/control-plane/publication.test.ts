import assert from "node:assert/strict";
import { Redis } from "ioredis";
import type { DataSource } from "typeorm";
import { loadConfig } from "../../../control-plane/src/config";
import { PublicationService } from "../../../control-plane/src/publication/publication.service";
import { startWorker } from "../../../control-plane/src/worker/worker";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { createLogger } from "../../../shared/src/log/logger";
import { PlaneEvent } from "../../../shared/src/redis/records";
import { freePort } from "../../helpers/ports";
import { TEST_REDIS_URL } from "../../helpers/redis";
import { ADMIN_TOKEN, createApp, Harness, startHarness } from "./harness";

async function dumpPrefix(redis: Redis, prefix: string, exclude: RegExp): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    for (const k of keys) {
      if (exclude.test(k)) continue;
      const type = await redis.type(k);
      out[k] = type === "hash" ? JSON.stringify(await redis.hgetall(k)) : ((await redis.get(k)) ?? "");
    }
  } while (cursor !== "0");
  return out;
}

async function flushPrefix(redis: Redis, prefix: string): Promise<void> {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
}

describe("control-plane: publication to Redis", () => {
  let h: Harness;
  let user: { token: string; workspaceId: string };
  let graceOld: string;
  before(async () => {
    h = await startHarness({ REPUBLISH_INTERVAL_SECONDS: "5" });
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
    await flushPrefix(h.redis, h.ns.prefix);
    assert.deepEqual(await dumpPrefix(h.redis, h.ns.prefix, skip), {});

    const sub = new Redis(TEST_REDIS_URL);
    const events: PlaneEvent[] = [];
    await sub.subscribe(h.names.eventsChannel());
    sub.on("message", (_c, m) => events.push(JSON.parse(m)));
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
      await new Promise((r) => setTimeout(r, 30));
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
      REDIS_URL: TEST_REDIS_URL,
      REDIS_KEY_PREFIX: h.ns.prefix,
      LOG_LEVEL: "silent",
      REPUBLISH_INTERVAL_SECONDS: "5",
    });
    const w1 = await startWorker(config);
    const w2 = await startWorker(config);
    try {
      assert.equal((await w1.queue.getJobSchedulers()).length, 1);
      await h.redis.del(h.names.publishedAt(), h.names.networks());
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline && !(await h.redis.exists(h.names.publishedAt()))) {
        await new Promise((r) => setTimeout(r, 100));
      }
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
      await new Promise((r) => setTimeout(r, 600)); // ~15 retry intervals
      assert.equal(queries, 0, "each timer attempt read Postgres while Redis was down");
      assert.equal(pub.pendingRetry, true, "still waiting to re-publish");
    } finally {
      pub.stop();
      down.disconnect();
    }
  });
});
