import { z } from "zod";
import { ErrorCategory } from "../jsonrpc/errors";

/**
 * Usage contract between the data plane (writer, `data-plane/src/usage`) and the usage worker (reader,
 * `control-plane/src/usage`). The data plane aggregates per minute x workspace x app x network x method x
 * category and XADDs one stream entry per flush; the worker folds entries into Postgres rollups.
 */

/**
 * Upper bounds (inclusive, milliseconds) of the latency histogram buckets; the last bucket is +Inf.
 * Fixed: the Postgres rollup tables have one column per bucket (`b00`..`b23`), so changing this list needs a
 * migration. Neighbouring bounds are at most ~1.5-2x apart, so "within one bucket" is a useful precision.
 */
export const LATENCY_BUCKET_BOUNDS_MS: readonly number[] = Object.freeze([
  1,
  2,
  3,
  5,
  7,
  10,
  15,
  20,
  30,
  50,
  75,
  100,
  150,
  200,
  300,
  500,
  750,
  1000,
  1500,
  2000,
  3000,
  5000,
  10000,
  Number.POSITIVE_INFINITY,
]);
export const BUCKET_COUNT = LATENCY_BUCKET_BOUNDS_MS.length;

/** Index of the bucket holding `latencyMs` (first bound >= value). Constant time (24 bounds). */
export function bucketIndex(latencyMs: number): number {
  if (!(latencyMs > 0)) return 0;
  let lo = 0;
  let hi = BUCKET_COUNT - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (latencyMs <= LATENCY_BUCKET_BOUNDS_MS[mid]!) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * Quantile `q` (0..1) from histogram bucket counts, interpolated linearly inside the bucket that holds the
 * rank; the +Inf bucket answers its lower bound. The result lies in the same bucket as the exact quantile.
 * Returns null when there are no observations.
 */
export function quantileFromBuckets(buckets: ArrayLike<number>, q: number): number | null {
  let total = 0;
  for (let i = 0; i < buckets.length; i++) total += buckets[i]!;
  if (total <= 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let cum = 0;
  for (let i = 0; i < buckets.length; i++) {
    const c = buckets[i]!;
    if (c <= 0) continue;
    if (cum + c >= rank) {
      const lower = i === 0 ? 0 : LATENCY_BUCKET_BOUNDS_MS[i - 1]!;
      const upper = LATENCY_BUCKET_BOUNDS_MS[i]!;
      if (!Number.isFinite(upper)) return lower;
      return lower + ((upper - lower) * (rank - cum)) / c;
    }
    cum += c;
  }
  return LATENCY_BUCKET_BOUNDS_MS[BUCKET_COUNT - 2]!;
}

export const USAGE_CATEGORIES = [
  ErrorCategory.Success,
  ErrorCategory.ServiceError,
  ErrorCategory.NodeError,
  ErrorCategory.ClientError,
  ErrorCategory.TooManyRequests,
  ErrorCategory.UnknownError,
] as const;

/** Method name used for everything the bounding rule folds away. */
export const OTHER_METHOD = "other";

/** Shape of method names accepted beyond the well-known list (`eth_foo`, `state_getStorage`, ...). */
export const METHOD_NAME_RE = /^[a-z][a-zA-Z0-9]{0,30}_[a-zA-Z0-9]{1,60}$/;

/** Well-known EVM and Substrate methods: always kept, never count against the per-minute cap. */
export const KNOWN_METHODS: ReadonlySet<string> = new Set([
  // EVM
  "web3_clientVersion",
  "web3_sha3",
  "net_version",
  "net_listening",
  "net_peerCount",
  "eth_chainId",
  "eth_blockNumber",
  "eth_syncing",
  "eth_gasPrice",
  "eth_maxPriorityFeePerGas",
  "eth_feeHistory",
  "eth_blobBaseFee",
  "eth_accounts",
  "eth_coinbase",
  "eth_mining",
  "eth_hashrate",
  "eth_protocolVersion",
  "eth_getBalance",
  "eth_getStorageAt",
  "eth_getTransactionCount",
  "eth_getCode",
  "eth_getProof",
  "eth_call",
  "eth_estimateGas",
  "eth_createAccessList",
  "eth_getBlockByNumber",
  "eth_getBlockByHash",
  "eth_getBlockReceipts",
  "eth_getBlockTransactionCountByHash",
  "eth_getBlockTransactionCountByNumber",
  "eth_getUncleCountByBlockHash",
  "eth_getUncleCountByBlockNumber",
  "eth_getUncleByBlockHashAndIndex",
  "eth_getUncleByBlockNumberAndIndex",
  "eth_getTransactionByHash",
  "eth_getTransactionByBlockHashAndIndex",
  "eth_getTransactionByBlockNumberAndIndex",
  "eth_getTransactionReceipt",
  "eth_getLogs",
  "eth_newFilter",
  "eth_newBlockFilter",
  "eth_newPendingTransactionFilter",
  "eth_getFilterChanges",
  "eth_getFilterLogs",
  "eth_uninstallFilter",
  "eth_sendRawTransaction",
  "eth_sendTransaction",
  "eth_sign",
  "eth_signTransaction",
  "eth_subscribe",
  "eth_unsubscribe",
  "debug_traceTransaction",
  "debug_traceCall",
  "debug_traceBlockByNumber",
  "debug_traceBlockByHash",
  "trace_block",
  "trace_transaction",
  "trace_filter",
  "trace_call",
  "trace_replayTransaction",
  "txpool_status",
  "txpool_content",
  // Substrate
  "system_chain",
  "system_name",
  "system_version",
  "system_health",
  "system_properties",
  "system_chainType",
  "system_peers",
  "system_syncState",
  "system_localPeerId",
  "system_accountNextIndex",
  "system_dryRun",
  "chain_getBlock",
  "chain_getBlockHash",
  "chain_getHeader",
  "chain_getFinalizedHead",
  "chain_getFinalisedHead",
  "chain_getHead",
  "chain_getRuntimeVersion",
  "chain_subscribeNewHeads",
  "chain_subscribeNewHead",
  "chain_subscribeFinalizedHeads",
  "chain_subscribeAllHeads",
  "chain_unsubscribeNewHeads",
  "chain_unsubscribeFinalizedHeads",
  "chain_unsubscribeAllHeads",
  "state_call",
  "state_getStorage",
  "state_getStorageAt",
  "state_getStorageHash",
  "state_getStorageSize",
  "state_getKeys",
  "state_getKeysPaged",
  "state_getPairs",
  "state_getMetadata",
  "state_getRuntimeVersion",
  "state_queryStorage",
  "state_queryStorageAt",
  "state_getReadProof",
  "state_subscribeStorage",
  "state_unsubscribeStorage",
  "state_subscribeRuntimeVersion",
  "state_unsubscribeRuntimeVersion",
  "state_traceBlock",
  "author_submitExtrinsic",
  "author_submitAndWatchExtrinsic",
  "author_unwatchExtrinsic",
  "author_pendingExtrinsics",
  "payment_queryInfo",
  "payment_queryFeeDetails",
  "grandpa_roundState",
  "babe_epochAuthorship",
  "beefy_getFinalizedHead",
  "mmr_generateProof",
  "rpc_methods",
  "chainHead_v1_follow",
  "chainHead_v1_unfollow",
  "chainHead_v1_header",
  "chainHead_v1_body",
  "chainHead_v1_call",
  "chainHead_v1_storage",
  "chainHead_v1_unpin",
  "chainSpec_v1_chainName",
  "chainSpec_v1_genesisHash",
  "chainSpec_v1_properties",
  "transaction_v1_broadcast",
  "transaction_v1_stop",
]);

/** Default cap on distinct non-well-known method names per network per minute (the rest fold to other). */
export const DEFAULT_MAX_METHODS_PER_NETWORK_MINUTE = 100;

/**
 * Keeps method-name cardinality bounded: well-known names pass; other names that match METHOD_NAME_RE pass
 * until `maxPerNetworkMinute` distinct such names were seen for the network in the current minute;
 * everything else is `other`. `reset()` is called when the minute changes.
 */
export class MethodBounder {
  private readonly seen = new Map<string, Set<string>>();

  constructor(private readonly maxPerNetworkMinute = DEFAULT_MAX_METHODS_PER_NETWORK_MINUTE) {}

  bound(network: string, method: string): string {
    if (KNOWN_METHODS.has(method)) return method;
    if (typeof method !== "string" || !METHOD_NAME_RE.test(method)) return OTHER_METHOD;
    let set = this.seen.get(network);
    if (!set) {
      set = new Set();
      this.seen.set(network, set);
    }
    if (set.has(method)) return method;
    if (set.size >= this.maxPerNetworkMinute) return OTHER_METHOD;
    set.add(method);
    return method;
  }

  reset(): void {
    this.seen.clear();
  }
}

/** Network slugs are short identifiers; anything else is stored under this name. */
export const UNKNOWN_NETWORK = "unknown";
export const NETWORK_NAME_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;

/**
 * Ids as the data plane knows them (KeyRecord.workspaceId / appId). The control plane issues UUIDs; the
 * worker skips rows whose ids are not UUIDs (no workspace of it can own them) instead of failing the batch.
 */
const id = z.string().min(1).max(128);
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** One aggregate: minute x workspace x app x network x method x category. */
export const UsageRowSchema = z.object({
  /** Start of the UTC minute, epoch milliseconds. */
  minute: z
    .number()
    .int()
    .refine((v) => v % 60_000 === 0, { error: "minute must be a whole minute" }),
  /** Null for unknown-key and public-endpoint traffic. */
  workspaceId: id.nullable(),
  appId: id.nullable(),
  network: z.string().regex(NETWORK_NAME_RE),
  method: z.string().min(1).max(128),
  category: z.enum(USAGE_CATEGORIES),
  count: z.number().int().positive(),
  /**
   * Compute units of those `count` request objects (the method's weight each, NetworkRecord.methodCosts).
   * Absent (rows from data planes older than compute units): `count` (a weight of 1).
   */
  computeUnits: z.number().int().nonnegative().optional(),
  latencySumMs: z.number().nonnegative(),
  /** BUCKET_COUNT counts, one per LATENCY_BUCKET_BOUNDS_MS entry. */
  buckets: z.array(z.number().int().nonnegative()).length(BUCKET_COUNT),
});
export type UsageRow = z.infer<typeof UsageRowSchema>;

/**
 * One data-plane flush, the JSON value of the `batch` field of a stream entry (see RedisNames.usageStream).
 * `batchId` (= `instanceId:sequence`) is unique per flush and reused when a flush is retried, so the worker
 * deduplicates on it: a redelivered entry, or a retried XADD whose first reply was lost, is counted once.
 */
export const UsageBatchSchema = z.object({
  v: z.literal(1),
  batchId: z.string().min(1).max(200),
  instanceId: z.string().min(1).max(128),
  /** Epoch ms when the batch was cut. */
  createdAt: z.number().int(),
  rows: z.array(UsageRowSchema),
});
export type UsageBatch = z.infer<typeof UsageBatchSchema>;

/** The batch envelope with rows left unchecked: the reader validates rows one by one and skips bad ones. */
export const UsageBatchEnvelopeSchema = UsageBatchSchema.extend({ rows: z.array(z.unknown()) });

/** Stream entry field holding the JSON UsageBatch. */
export const USAGE_STREAM_FIELD = "batch";
/** Consumer group of the usage workers. */
export const USAGE_CONSUMER_GROUP = "usage-ingest";
/** Default approximate MAXLEN of the usage stream (entries, not rows). */
export const DEFAULT_USAGE_STREAM_MAXLEN = 100_000;
