import { createRedis, type RedisClient, type RedisNodeAddress } from "../../../shared/src/redis/connect";

/**
 * A Redis connection for the limit and quota background loops (and the usage recorder). The offline queue
 * is off so a command issued while Redis is down fails at once (the loops keep their state and retry on
 * the next tick) instead of piling up; ioredis keeps reconnecting by itself. `clusterNodes` set: a Redis
 * Cluster (REDIS_CLUSTER_NODES).
 */
export function createLimitsRedis(
  url: string,
  opts: { commandTimeoutMs?: number; name?: string; clusterNodes?: readonly RedisNodeAddress[] } = {},
): RedisClient {
  return createRedis({ url, clusterNodes: opts.clusterNodes }, "dp-background", {
    commandTimeoutMs: opts.commandTimeoutMs ?? 1_000,
    name: opts.name ?? "data-plane:limits",
  });
}
