import { DEFAULT_HEAD_OUTLIER_BLOCKS, type HeadSource, networkHead } from "../head";

/** How far above the health-checked head an answer may prove a block exists before it is distrusted. */
const MAX_HEAD_JUMP = 64;

/**
 * A network's heads: the best health-checked head of its nodes, the highest head seen in answers passing
 * through (receipts, eth_blockNumber) ahead of the health checks, and the served head, which never goes
 * back (docs/contracts.md "A head that never goes back").
 */
export class HeadTracker {
  /** Highest head seen in answers passing through, ahead of health checks (-1 = none). */
  observed = -1;
  /** servedHead's high-water mark. */
  private served = -1;

  constructor(
    /** The nodes whose health-checked heads count (PoolMembership; read anew on every call). */
    private readonly members: { readonly upstreams: readonly HeadSource[] },
    /** HEAD_OUTLIER_BLOCKS (see head.ts networkHead). */
    private readonly outlierBlocks = DEFAULT_HEAD_OUTLIER_BLOCKS,
  ) {}

  /**
   * The network head among upstreams whose breaker is closed (-1 when unknown): the highest head another
   * upstream confirms, so that one node reporting a head far beyond the others (HEAD_OUTLIER_BLOCKS) cannot
   * set it (see head.ts networkHead for the rule and the two-upstream case).
   */
  best(): number {
    return networkHead(this.members.upstreams, this.outlierBlocks);
  }

  /**
   * The head the cache keys per-block entries to: the best health-checked head, or a newer one seen in
   * an answer (so a client that just saw a receipt in block N never gets a cached "latest" from before N).
   */
  cacheHead(): number {
    return Math.max(this.observed, this.best());
  }

  /** The served head (see NetworkPool.servedHead), given best() (`best`). */
  servedAt(best: number): number {
    // Far below the mark (HEAD_OUTLIER_BLOCKS) is no lagging node but a chain that started again (a
    // development node reset): the mark, and any head seen in an answer, follow it down rather than
    // serving a head that will not come.
    if (best >= 0 && best + this.outlierBlocks < this.served) {
      this.served = best;
      if (this.observed > best) this.observed = -1;
    }
    const h = Math.max(this.observed, best);
    if (h > this.served) this.served = h;
    return this.served;
  }

  /**
   * Records a head height seen in an answer. Heights implausibly far above the health-checked head
   * (a confused or hostile node) are ignored, so they cannot pin the cache to a head that never comes.
   */
  observe(n: number): void {
    if (n <= this.observed) return;
    const best = this.best();
    if (best >= 0 && n > best + MAX_HEAD_JUMP) return;
    this.observed = n;
  }

  /** A reorg from `fromHeight`: a head seen in an answer at or above it may be on the old branch. */
  reorged(fromHeight: number): void {
    if (this.observed >= fromHeight) this.observed = -1;
  }
}
