import type { Logger } from "../../../shared/src/log/logger";
import { createRedis, type RedisClient, type RedisNodeAddress } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import {
  type NodeRecord,
  NodeRecordSchema,
  type NodeSessionKeysRecord,
  type PlaneEvent,
} from "../../../shared/src/redis/records";

export interface NodeDirectoryOptions {
  url: string;
  /** REDIS_CLUSTER_NODES (empty or absent: the single Redis at `url`). */
  clusterNodes?: readonly RedisNodeAddress[];
  prefix: string;
  commandTimeoutMs: number;
  /** How long a read record is trusted without an event (events invalidate at once). */
  ttlMs?: number;
  logger: Logger;
}

/** Where a dedicated node is and whether it may serve: `NodeRecord`s from Redis, cached in process. */
export interface NodeLookup {
  get(nodeId: string): NodeRecord | null | Promise<NodeRecord | null>;
  /** Tells the control plane that `author_rotateKeys` succeeded on the node (validator checklist). */
  recordSessionKeys(nodeId: string, keys: string): Promise<void>;
  onEvent(event: PlaneEvent): void;
  clear(): void;
  /**
   * After a lost Redis connection: every record is read again before its next use, and served as it was
   * only while it cannot be read (as when a cached record's TTL lapses during a blip).
   */
  revalidate(): void;
  close(): Promise<void>;
}

interface Entry {
  rec: NodeRecord | null;
  atMs: number;
}

export class RedisNodeDirectory implements NodeLookup {
  private readonly names: RedisNames;
  private readonly redis: RedisClient;
  private readonly cache = new Map<string, Entry>();
  private generation = 0;
  private readonly ttlMs: number;

  constructor(private readonly opts: NodeDirectoryOptions) {
    this.names = new RedisNames(opts.prefix);
    this.ttlMs = opts.ttlMs ?? 5000;
    this.redis = createRedis({ url: opts.url, clusterNodes: opts.clusterNodes }, "dp-nodes", {
      commandTimeoutMs: opts.commandTimeoutMs,
      name: `data-plane:${opts.prefix}nodes`,
    });
    this.redis.on("error", (err) => opts.logger.warn({ err: err.message }, "redis (nodes) connection error"));
  }

  get(nodeId: string): NodeRecord | null | Promise<NodeRecord | null> {
    const hit = this.cache.get(nodeId);
    if (hit !== undefined && Date.now() - hit.atMs < this.ttlMs) return hit.rec;
    return this.load(nodeId, hit);
  }

  private async load(nodeId: string, stale: Entry | undefined): Promise<NodeRecord | null> {
    const gen = this.generation;
    try {
      const raw = await this.redis.get(this.names.node(nodeId));
      let rec: NodeRecord | null = null;
      if (raw !== null) {
        const parsed = NodeRecordSchema.safeParse(JSON.parse(raw));
        if (parsed.success) rec = parsed.data;
        else this.opts.logger.warn({ nodeId }, "malformed node record in redis");
      }
      if (gen === this.generation) {
        if (this.cache.size > 100_000) this.cache.clear();
        this.cache.set(nodeId, { rec, atMs: Date.now() });
      }
      return rec;
    } catch (err) {
      // Redis blip: keep serving on what we had.
      if (stale !== undefined) return stale.rec;
      throw err;
    }
  }

  async recordSessionKeys(nodeId: string, keys: string): Promise<void> {
    const rec: NodeSessionKeysRecord = { nodeId, keys, atMs: Date.now() };
    await this.redis.set(this.names.nodeSessionKeys(nodeId), JSON.stringify(rec));
  }

  onEvent(event: PlaneEvent): void {
    if (event.type === "node.update") {
      this.generation++;
      this.cache.delete(event.nodeId);
    } else if (event.type === "resync") {
      this.clear();
    }
  }

  clear(): void {
    this.generation++;
    this.cache.clear();
  }

  revalidate(): void {
    // A read already under way may return a record from before the loss: it does not refill the cache.
    this.generation++;
    for (const e of this.cache.values()) e.atMs = Number.NEGATIVE_INFINITY;
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => undefined);
    this.redis.disconnect();
  }
}
