import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import {
  createRedis,
  type RedisClient,
  type RedisNodeAddress,
  type RedisPurpose,
  scanKeys,
} from "../../shared/src/redis/connect";
import { TestRedisCluster } from "./redis-cluster";

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** The Redis a test runs against: the machine's single Redis, or a private Redis Cluster. */
export interface TestRedisTarget {
  readonly kind: "single" | "cluster";
  /** REDIS_URL. With a cluster, a master's address: code that ignored the cluster setting would fail. */
  readonly url: string;
  /** REDIS_CLUSTER_NODES as parsed (empty for a single Redis). */
  readonly clusterNodes: readonly RedisNodeAddress[];
  /** REDIS_URL and REDIS_CLUSTER_NODES for a config or a child process's environment. */
  env(): Record<string, string>;
  /** A client of the test's own (for seeding and assertions), made the way the processes make theirs. */
  client(purpose?: RedisPurpose): RedisClient;
}

function target(
  kind: "single" | "cluster",
  url: string,
  nodes: readonly RedisNodeAddress[],
): TestRedisTarget {
  return {
    kind,
    url,
    clusterNodes: nodes,
    env: () => ({
      REDIS_URL: url,
      REDIS_CLUSTER_NODES: nodes.map((n) => `${n.host}:${n.port}`).join(","),
    }),
    client: (purpose = "cp-commands") => createRedis({ url, clusterNodes: nodes }, purpose),
  };
}

/** A private cluster as a target (REDIS_URL names its first master: code ignoring the cluster setting fails). */
export function clusterTarget(cluster: TestRedisCluster): TestRedisTarget {
  const first = cluster.nodes[0]!;
  return target("cluster", `redis://${first.host}:${first.port}`, cluster.nodes);
}

/** The machine's Redis (TEST_REDIS_URL). */
export const SINGLE_REDIS: TestRedisTarget = target("single", TEST_REDIS_URL, []);

/**
 * Registers, for each Redis kind, a `describe` named `${title} [single Redis]` / `[Redis Cluster]`. The
 * body runs as the suite's function (`this.timeout()` works) and gets the target, and its kind: known when
 * tests are registered, so a test that only makes sense on one kind is registered only there.
 */
export function describeOverRedis(
  title: string,
  body: (this: Mocha.Suite, redis: () => TestRedisTarget, kind: TestRedisTarget["kind"]) => void,
): void {
  describe(`${title} [single Redis]`, function () {
    body.call(this, () => SINGLE_REDIS, "single");
  });
  describeOnRedisCluster(title, function (redis) {
    body.call(this, redis, "cluster");
  });
}

/**
 * A `describe` named `${title} [Redis Cluster]` on a private cluster of 3 masters on free loopback ports,
 * started in a `before` hook that runs ahead of the body's own, and stopped after the body's `after` hooks.
 */
export function describeOnRedisCluster(
  title: string,
  body: (this: Mocha.Suite, redis: () => TestRedisTarget) => void,
): void {
  describe(`${title} [Redis Cluster]`, function () {
    let cluster: TestRedisCluster | undefined;
    let t: TestRedisTarget | undefined;
    before(async function () {
      this.timeout(60_000);
      cluster = await new TestRedisCluster(3).start();
      t = clusterTarget(cluster);
    });
    body.call(this, () => {
      if (t === undefined) throw new Error("the test cluster is not started");
      return t;
    });
    // Registered after the body's hooks, so it runs after them (they close what they opened first).
    after(async () => {
      await cluster?.stop();
    });
  });
}

export interface TestRedisNamespace {
  prefix: string;
  /** Where the namespace lives. */
  redis: TestRedisTarget;
  /** Deletes every key under the prefix (BullMQ keys included when BullMQ uses the same prefix). */
  cleanup(): Promise<void>;
}

/** A key prefix unique to this test run, so runs sharing the machine's Redis never see each other. */
export function createTestRedisNamespace(redis: TestRedisTarget = SINGLE_REDIS): TestRedisNamespace {
  const prefix = `rgtest:${Date.now().toString(36)}${randomBytes(3).toString("hex")}:`;
  return {
    prefix,
    redis,
    async cleanup() {
      if (redis.kind === "single") {
        // The plain client of old: this also runs while other suites cut or restart their own Redis.
        const r = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
        await r.connect();
        try {
          await scanKeys(r, `${prefix}*`, async (keys) => {
            await r.del(...keys);
          });
        } finally {
          r.disconnect();
        }
        return;
      }
      const c = redis.client();
      try {
        // Keys of many slots: one DEL each (a multi-key DEL must stay within one slot).
        await scanKeys(c, `${prefix}*`, async (keys) => {
          await Promise.all(keys.map((k) => c.del(k)));
        });
      } finally {
        c.disconnect();
      }
    },
  };
}
