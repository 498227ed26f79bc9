import { Cluster, type ClusterOptions, Redis, type RedisOptions } from "ioredis";

/**
 * Every Redis connection of the data plane, the control plane, the worker and the CLIs is made here, so
 * one setting (`REDIS_CLUSTER_NODES`) moves all of them from a single Redis to a Redis Cluster.
 */

/** A client of either kind; the code that needs to tell them apart uses `isCluster`. */
export type RedisClient = Redis | Cluster;

export interface RedisNodeAddress {
  host: string;
  port: number;
}

/** Where Redis is. */
export interface RedisTarget {
  /**
   * `REDIS_URL`: the server when `clusterNodes` is empty. With a cluster, its user, password and TLS
   * (`rediss:`) apply to every node, and its host is not used.
   */
  url: string;
  /** `REDIS_CLUSTER_NODES`: some (or all) masters of a Redis Cluster to discover it from; empty = single Redis. */
  clusterNodes?: readonly RedisNodeAddress[];
}

/**
 * What a connection is for; each purpose has the options its users had before cluster support (the
 * ioredis options of a single-Redis connection, mapped to their cluster equivalents).
 */
export type RedisPurpose =
  /** Data plane, request path: key records on a cache miss, networks, the marker. One retry, offline queue on. */
  | "dp-commands"
  /** Data plane, the events subscription. */
  | "dp-events"
  /** Data plane, dedicated-node records on a cache miss. */
  | "dp-nodes"
  /**
   * Data plane, background loops (rate-limit sync, quota flush, usage flush): no offline queue and no
   * retry, so a command while Redis is away fails at once and the loop keeps its state for the next tick.
   */
  | "dp-background"
  /**
   * Control plane, worker and CLIs: publication, throttles, node records. Two retries. (The node status
   * subscriber is a `duplicateRedis` of it.)
   */
  | "cp-commands"
  /** BullMQ queues and workers, and the usage stream consumer: blocking commands, never failed by a retry count. */
  | "blocking";

export interface RedisConnectOptions {
  /** CLIENT SETNAME on every connection (CLIENT LIST shows it); with a cluster, on every node's. */
  name?: string;
  /** Per-command timeout, ms (every node's, with a cluster). */
  commandTimeoutMs?: number;
  /** Overrides the purpose's default (connect at once, or at `connect()` / the first command). */
  lazyConnect?: boolean;
}

/**
 * How often a cluster client reloads the slot map (CLUSTER SLOTS, on a short connection of its own), ms.
 * ioredis 5 does not by default: it reloads it on a MOVED reply or a closed connection only. A master
 * that stops answering (a hung host, a partition) keeps its connections open, so after its replica took
 * over, the commands for its slots still went to it and timed out, and a subscription on it heard nothing,
 * for as long as TCP kept those connections (minutes; forever for a stopped process). The reload drops it
 * from the client (commands waiting on it are retried on the new master) within this long after the
 * promotion.
 */
const CLUSTER_SLOTS_REFRESH_MS = 5_000;

/** Reconnect backoff of the data plane: 50 ms more per attempt, at most 1 s. */
const fastReconnect = (times: number) => Math.min(50 * times, 1000);

interface PurposeOptions {
  lazyConnect?: boolean;
  maxRetriesPerRequest?: number | null;
  enableOfflineQueue?: boolean;
  retryStrategy?: (times: number) => number;
}

const PURPOSES: Record<RedisPurpose, PurposeOptions> = {
  "dp-commands": {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    retryStrategy: fastReconnect,
  },
  "dp-events": {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    retryStrategy: fastReconnect,
  },
  "dp-nodes": { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: fastReconnect },
  "dp-background": {
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: fastReconnect,
  },
  "cp-commands": { maxRetriesPerRequest: 2 },
  blocking: { maxRetriesPerRequest: null },
};

/** True for a Redis Cluster client. */
export function isCluster(client: RedisClient): client is Cluster {
  return client.isCluster;
}

/**
 * Credentials and TLS of `url`, for every node of a cluster (a cluster's nodes share them; the URL's host
 * and database are not used: Redis Cluster has database 0 only).
 */
export function clusterNodeAuth(url: string): Pick<RedisOptions, "username" | "password" | "tls"> {
  const u = new URL(url);
  const out: Pick<RedisOptions, "username" | "password" | "tls"> = {};
  if (u.username !== "") out.username = decodeURIComponent(u.username);
  if (u.password !== "") out.password = decodeURIComponent(u.password);
  if (u.protocol === "rediss:") out.tls = {};
  return out;
}

/** A client for `target`: a `Redis` on `target.url`, or a `Cluster` discovered from `target.clusterNodes`. */
export function createRedis(
  target: RedisTarget,
  purpose: RedisPurpose,
  opts: RedisConnectOptions = {},
): RedisClient {
  const p = PURPOSES[purpose];
  const lazyConnect = opts.lazyConnect ?? p.lazyConnect;
  const perConnection: RedisOptions = {};
  if (p.maxRetriesPerRequest !== undefined) perConnection.maxRetriesPerRequest = p.maxRetriesPerRequest;
  if (opts.commandTimeoutMs !== undefined) perConnection.commandTimeout = opts.commandTimeoutMs;
  if (opts.name !== undefined) perConnection.connectionName = opts.name;
  if (lazyConnect !== undefined) perConnection.lazyConnect = lazyConnect;

  const nodes = target.clusterNodes ?? [];
  if (nodes.length === 0) {
    const single: RedisOptions = { ...perConnection };
    if (p.enableOfflineQueue !== undefined) single.enableOfflineQueue = p.enableOfflineQueue;
    if (p.retryStrategy !== undefined) single.retryStrategy = p.retryStrategy;
    return new Redis(target.url, single);
  }
  // Node connections: ioredis makes each lazily and never reconnects one by itself (the cluster refreshes
  // its slot map and makes new ones); offline queue and backoff are the cluster's.
  const { lazyConnect: _lazy, ...nodeOptions } = perConnection;
  const options: ClusterOptions = {
    redisOptions: { ...nodeOptions, ...clusterNodeAuth(target.url) },
    slotsRefreshInterval: CLUSTER_SLOTS_REFRESH_MS,
  };
  if (lazyConnect !== undefined) options.lazyConnect = lazyConnect;
  if (p.enableOfflineQueue !== undefined) options.enableOfflineQueue = p.enableOfflineQueue;
  if (p.retryStrategy !== undefined) options.clusterRetryStrategy = p.retryStrategy;
  return new Cluster(
    nodes.map((n) => ({ host: n.host, port: n.port })),
    options,
  );
}

/**
 * A second connection like `client` (same target and options) with `overrides`; for a subscriber made
 * from a command connection.
 */
export function duplicateRedis(
  client: RedisClient,
  overrides: { lazyConnect?: boolean; maxRetriesPerRequest?: number | null },
): RedisClient {
  if (!isCluster(client)) return client.duplicate(overrides);
  const { lazyConnect, ...perNode } = overrides;
  return client.duplicate([], {
    ...client.options,
    ...(lazyConnect === undefined ? {} : { lazyConnect }),
    redisOptions: { ...client.options.redisOptions, ...perNode },
  });
}

/**
 * The servers that hold keys: the client itself, or every master of the cluster (SCAN, KEYS and INFO
 * answer for one server only). With a cluster, its slot map must be loaded (the client is ready).
 */
export function masterNodes(client: RedisClient): Redis[] {
  return isCluster(client) ? client.nodes("master") : [client];
}

/**
 * Every key matching `pattern` (SCAN on every master, `COUNT` `count`), handed over one SCAN page at a
 * time. A key written or deleted during the scan may or may not be seen (SCAN's own guarantee).
 */
export async function scanKeys(
  client: RedisClient,
  pattern: string,
  onKeys: (keys: string[]) => void | Promise<void>,
  count = 1000,
): Promise<void> {
  if (isCluster(client) && client.status !== "ready") await client.ping();
  for (const node of masterNodes(client)) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", count);
      cursor = next;
      if (keys.length > 0) await onKeys(keys);
    } while (cursor !== "0");
  }
}
