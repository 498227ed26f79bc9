import { generateApiKey, hashApiKey } from "../../shared/src/crypto/api-key";
import { createRedis, type RedisClient } from "../../shared/src/redis/connect";
import { RedisNames } from "../../shared/src/redis/keys";
import {
  type KeyRecord,
  KeyRecordSchema,
  type NetworkRecord,
  NetworkRecordSchema,
  type PlaneEvent,
  PlaneEventSchema,
} from "../../shared/src/redis/records";
import { SINGLE_REDIS, type TestRedisTarget } from "./redis";

/**
 * Writes what the control plane would publish, validated against the shared schemas, so data-plane tests
 * run against real Redis without the control plane.
 */
export class RedisSeeder {
  readonly names: RedisNames;
  private readonly redis: RedisClient;

  /** `target`: a test Redis (single or cluster), or the URL of a single Redis. */
  constructor(prefix: string, target: TestRedisTarget | string = SINGLE_REDIS) {
    this.names = new RedisNames(prefix);
    this.redis =
      typeof target === "string"
        ? createRedis({ url: target }, "cp-commands")
        : createRedis({ url: target.url, clusterNodes: target.clusterNodes }, "cp-commands");
  }

  /** Stores a key record (defaults: app key on the free plan, no allowlist) and returns the plaintext key. */
  async putKey(partial: Partial<KeyRecord> = {}, plaintext = generateApiKey()): Promise<string> {
    const record = KeyRecordSchema.parse({ ...defaultKeyRecord(), ...partial });
    await this.redis.set(this.names.apiKey(hashApiKey(plaintext)), JSON.stringify(record));
    return plaintext;
  }

  async deleteKey(plaintext: string): Promise<void> {
    await this.redis.del(this.names.apiKey(hashApiKey(plaintext)));
  }

  async putNetwork(record: NetworkRecord): Promise<void> {
    const valid = NetworkRecordSchema.parse(record);
    await this.redis.hset(this.names.networks(), valid.slug, JSON.stringify(valid));
  }

  async deleteNetwork(slug: string): Promise<void> {
    await this.redis.hdel(this.names.networks(), slug);
  }

  async publish(event: PlaneEvent): Promise<void> {
    await this.redis.publish(this.names.eventsChannel(), JSON.stringify(PlaneEventSchema.parse(event)));
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => undefined);
  }
}

export function defaultKeyRecord(): KeyRecord {
  return {
    kind: "app",
    workspaceId: "ws-test",
    appId: "app-test",
    nodeId: null,
    plan: { name: "free", requestsPerSecond: 50, dailyRequestLimit: 500_000, monthlyRequestLimit: null },
    allowlist: { origins: [], ips: [] },
    expiresAtMs: null,
    rpcMethods: null,
  };
}

export function evmNetwork(
  slug: string,
  upstreams: { id: string; httpUrl: string; weight?: number }[],
): NetworkRecord {
  return {
    slug,
    name: slug,
    protocol: "EVM",
    chainId: 31337,
    allowDebug: false,
    upstreams: upstreams.map((u) => ({ id: u.id, httpUrl: u.httpUrl, wsUrl: null, weight: u.weight ?? 100 })),
  };
}
