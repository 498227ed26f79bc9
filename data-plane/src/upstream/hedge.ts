/**
 * Hedged reads (NetworkPool): when the upstream a read went to has not answered after the usual time (the
 * best healthy node's p95 of recent answers, see hedgeDelayMs, within HEDGE_MIN_DELAY_MS..HEDGE_MAX_DELAY_MS), a copy goes to
 * another healthy upstream; the first good answer is used and the other exchange is cancelled.
 *
 * Only for methods known to be idempotent reads: sending a copy of anything else could do it twice
 * (eth_sendRawTransaction, eth_sendTransaction, author_submitExtrinsic, author_submitAndWatchExtrinsic),
 * or its answer depends on which node and when (filters: eth_newFilter, eth_getFilterChanges; node-local
 * state such as txpool_*, personal_*). A method not listed here is never hedged.
 *
 * Left out although idempotent:
 * - heavy calls (eth_getLogs, debug_*, trace_*, state_getKeysPaged, ...; isHeavy): their time is the
 *   call's (the range or trace the client asked for), not the node's, so the second node would spend the
 *   same time on the same work exactly when the network is busiest with such calls. A node's p95 over
 *   ordinary calls says nothing about how long they take, and each node has only a share of its
 *   connections for them (UPSTREAM_HEAVY_SHARE_PERCENT);
 * - state_getMetadata: megabytes, slow on every node for its size, and cached.
 */
const HEDGEABLE = new Set([
  // EVM
  "eth_chainId",
  "net_version",
  "net_listening",
  "net_peerCount",
  "web3_clientVersion",
  "web3_sha3",
  "eth_protocolVersion",
  "eth_syncing",
  "eth_blockNumber",
  "eth_gasPrice",
  "eth_maxPriorityFeePerGas",
  "eth_blobBaseFee",
  "eth_feeHistory",
  "eth_getBalance",
  "eth_getCode",
  "eth_getTransactionCount",
  "eth_getStorageAt",
  "eth_call",
  "eth_estimateGas",
  "eth_createAccessList",
  "eth_getProof",
  "eth_getBlockByNumber",
  "eth_getBlockByHash",
  "eth_getBlockReceipts",
  "eth_getBlockTransactionCountByNumber",
  "eth_getBlockTransactionCountByHash",
  "eth_getTransactionByHash",
  "eth_getTransactionByBlockHashAndIndex",
  "eth_getTransactionByBlockNumberAndIndex",
  "eth_getTransactionReceipt",
  "eth_getUncleByBlockHashAndIndex",
  "eth_getUncleByBlockNumberAndIndex",
  "eth_getUncleCountByBlockHash",
  "eth_getUncleCountByBlockNumber",
  // Substrate
  "chain_getBlockHash",
  "chain_getHeader",
  "chain_getBlock",
  "chain_getFinalizedHead",
  "chain_getFinalisedHead",
  "state_getRuntimeVersion",
  "state_getStorage",
  "state_getStorageHash",
  "state_getStorageSize",
  "state_getReadProof",
  "state_call",
  "system_chain",
  "system_chainType",
  "system_name",
  "system_version",
  "system_properties",
  "system_health",
  "system_accountNextIndex",
  "payment_queryInfo",
  "payment_queryFeeDetails",
  "rpc_methods",
]);

/** Whether a copy of this call may be sent to a second upstream (see HEDGEABLE). */
export function hedgeable(method: string): boolean {
  return HEDGEABLE.has(method);
}

export interface HedgeOptions {
  /** HEDGE_ENABLED. */
  readonly enabled: boolean;
  /** HEDGE_MIN_DELAY_MS: the earliest a copy is sent, whatever the node's p95. */
  readonly minDelayMs: number;
  /** HEDGE_MAX_DELAY_MS: the latest; also the delay while a node's p95 is not known yet. */
  readonly maxDelayMs: number;
  /** HEDGE_MAX_PERCENT: hedges per 100 hedgeable exchanges, at most (see HedgeBudget). */
  readonly maxPercent: number;
}

/**
 * The wait before a copy of a read goes to another node: the best p95 among the network's healthy nodes
 * (the lowest; -1 = none known yet: too few answers), within minDelayMs..maxDelayMs; none known:
 * maxDelayMs.
 *
 * Why the best node's: the copy is worth sending once the answer is later than a good node would have
 * been. The chosen node's own p95 is its slowness itself (a node that answers 30% of calls late has that
 * lateness as its p95, so its copies would go out when its late answers arrive anyway), and a network p95
 * over all nodes is pushed up by the same slow node exactly when hedging is needed. This is "the
 * 95th-percentile expected latency for this class of requests" after which Dean & Barroso ("The Tail at
 * Scale") send the second request, measured where it is expected to be met.
 */
export function hedgeDelayMs(bestP95Ms: number, o: HedgeOptions): number {
  if (bestP95Ms < 0) return o.maxDelayMs;
  return Math.min(o.maxDelayMs, Math.max(o.minDelayMs, Math.ceil(bestP95Ms)));
}

/** Hedges that may be sent back to back before the budget has to be earned (see HedgeBudget). */
export const HEDGE_BURST = 10;

/**
 * Caps hedges at `maxPercent` of a network's hedgeable exchanges, so that a network where every node is
 * slow (where the p95 delays keep firing) gets at most that share of extra load, never twice the load.
 * A token bucket counted in exchanges, not time: each hedgeable exchange earns maxPercent/100 of a hedge,
 * each hedge spends one, and at most HEDGE_BURST are saved up (none at 0%: no hedges at all).
 */
export class HedgeBudget {
  private tokens: number;
  private readonly burst: number;
  private readonly perExchange: number;

  constructor(maxPercent: number) {
    this.perExchange = maxPercent / 100;
    this.burst = maxPercent > 0 ? HEDGE_BURST : 0;
    this.tokens = this.burst;
  }

  /** A hedgeable exchange was sent. */
  earn(): void {
    this.tokens = Math.min(this.tokens + this.perExchange, this.burst);
  }

  /** Spends one hedge; false when the budget is spent. */
  take(): boolean {
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
