import type { NetworkRecord, NodeRecord } from "../../../shared/src/redis/records";
import type { Metrics } from "../metrics/metrics";
import { NetworkPool, type PoolOptions } from "../upstream/network-pool";

/** Added to UPSTREAM_TIMEOUT_MS before a replaced node pool is closed. */
const RETIRE_MARGIN_MS = 1_000;

/**
 * Dedicated nodes as one-upstream NetworkPools, so a node endpoint forwards through the same core as a
 * shared network (cache, in-flight merge, coalescing, log splitting, head and finality tracking, the
 * undici client with its byte caps), one pool per node, replaced when its URL changes.
 *
 * What differs from a shared network is set in the options: one attempt (there is no other node to fail
 * over to) and a breaker that never opens (a dedicated node is the only node its owner can reach: every
 * call goes to it and the node's own answer, or failure, is what the owner sees).
 */
export class NodePools {
  private readonly byNode = new Map<string, NetworkPool>();
  private timer: NodeJS.Timeout | undefined;
  /** Makes each pool's cache keys its own: a replaced pool (new URL, maybe another chain) shares nothing. */
  private generation = 0;

  constructor(
    private readonly opts: PoolOptions & { healthCheckIntervalMs: number },
    private readonly metrics: Metrics,
  ) {
    this.opts = { ...opts, maxAttempts: 1, breakerThreshold: Number.MAX_SAFE_INTEGER, breakerCooldownMs: 0 };
  }

  /**
   * The pool of a node that serves (it has a URL), created on first use. Undefined when its URL cannot be
   * used (the record is the worker's): the caller answers as for a node that cannot be reached.
   */
  get(node: NodeRecord): NetworkPool | undefined {
    const url = node.httpUrl;
    if (url === null) return undefined;
    const have = this.byNode.get(node.nodeId);
    if (have !== undefined && have.record.upstreams[0]?.httpUrl === url) return have;
    let pool: NetworkPool;
    try {
      pool = new NetworkPool(this.record(node, url), this.opts, this.metrics);
    } catch {
      return undefined;
    }
    if (have !== undefined) this.retire(have);
    this.byNode.set(node.nodeId, pool);
    // Head (per-block cache keys, log ranges) known from the start; later rounds on the timer.
    void pool.healthCheck();
    this.startHealthChecks();
    return pool;
  }

  /**
   * A node's pool as a network record. The slug contains ':', which no network slug may (so a node's
   * cache entries and metrics never mix with a network's), plus the pool's generation.
   */
  private record(node: NodeRecord, url: string): NetworkRecord {
    this.generation++;
    return {
      slug: `node:${node.nodeId}:${this.generation}`,
      name: node.nodeId,
      protocol: node.protocol,
      chainId: null,
      // Shared-node policies do not apply: the node key's own Safe / Unsafe mode is the policy.
      allowDebug: true,
      upstreams: [{ id: `node-${node.nodeId}`, httpUrl: url, wsUrl: node.wsUrl, weight: 1 }],
      // The owner pays for the node: no range limit of the shared networks' kind.
      maxLogsBlockRange: 0,
    };
  }

  /** Closes one node's pool, if any (the node stopped serving). */
  forget(nodeId: string): void {
    const p = this.byNode.get(nodeId);
    if (p === undefined) return;
    this.byNode.delete(nodeId);
    this.retire(p);
  }

  /**
   * Closes a pool that is no longer used once its calls can have ended (UPSTREAM_TIMEOUT_MS and a
   * margin): closing at once would cut calls in flight to a node whose record just changed.
   */
  private retire(p: NetworkPool): void {
    setTimeout(() => void p.close(), this.opts.timeoutMs + RETIRE_MARGIN_MS).unref();
  }

  private startHealthChecks(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => {
      for (const p of this.byNode.values()) void p.healthCheck();
    }, this.opts.healthCheckIntervalMs);
    this.timer.unref();
  }

  /** Nodes with a pool now. */
  get size(): number {
    return this.byNode.size;
  }

  /** Closes every node's pool (shutdown). */
  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    const all = [...this.byNode.values()];
    this.byNode.clear();
    await Promise.all(all.map((p) => p.close()));
  }
}
