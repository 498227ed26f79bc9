import { Redis } from "ioredis";

/**
 * A Redis connection for the limit and quota background loops. The offline queue is off so a command
 * issued while Redis is down fails at once (the loops keep their state and retry on the next tick)
 * instead of piling up; ioredis keeps reconnecting by itself.
 */
export function createLimitsRedis(
  url: string,
  opts: { commandTimeoutMs?: number; name?: string } = {},
): Redis {
  return new Redis(url, {
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: opts.commandTimeoutMs ?? 1_000,
    connectionName: opts.name ?? "data-plane:limits",
    retryStrategy: (times: number) => Math.min(50 * times, 1_000),
  });
}
