/**
 * Which `null` answers may only mean "this node has not got there yet", so that another node may have the
 * answer (see NetworkPool.retryEmpty): a block, transaction or receipt looked up by block number (the
 * node's head is below it, or it pruned that history) or by hash (the node has not seen that block yet).
 */

/** emptyAnswerAsk: a lookup by hash (any node whose head is above the answering node's may know it). */
export const BY_HASH = -2;
/** emptyAnswerAsk: a null here is a final answer (not a block lookup, or a tag such as `latest`). */
export const NOT_RETRIED = -1;

/** Index of the block number / hash argument of each method whose null answer may be a lagging node's. */
const BLOCK_ARG = new Map<string, number>([
  ["eth_getBlockByNumber", 0],
  ["eth_getBlockByHash", 0],
  ["eth_getBlockReceipts", 0],
  ["eth_getBlockTransactionCountByNumber", 0],
  ["eth_getBlockTransactionCountByHash", 0],
  ["eth_getTransactionByBlockNumberAndIndex", 0],
  ["eth_getTransactionByBlockHashAndIndex", 0],
  ["eth_getTransactionByHash", 0],
  ["eth_getTransactionReceipt", 0],
  ["chain_getBlock", 0],
  ["chain_getHeader", 0],
  ["chain_getBlockHash", 0],
]);

const HEX_NUMBER = /^0x[0-9a-fA-F]{1,13}$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;

/**
 * What a `null` answer to this call asked for: a block number (>= 0: retried on a node whose head is at
 * or above it), BY_HASH (retried on a node whose head is above the answering node's), or NOT_RETRIED.
 * Transaction and receipt lookups are by transaction hash: BY_HASH.
 */
export function emptyAnswerAsk(method: string, params: unknown): number {
  const at = BLOCK_ARG.get(method);
  if (at === undefined || !Array.isArray(params)) return NOT_RETRIED;
  const arg: unknown = params[at];
  if (typeof arg === "string") {
    if (HASH.test(arg)) return BY_HASH;
    if (HEX_NUMBER.test(arg)) return Number.parseInt(arg, 16);
    return arg === "earliest" ? 0 : NOT_RETRIED;
  }
  // chain_getBlockHash takes a plain number; eth_getBlockReceipts also takes {blockHash} / {blockNumber}.
  if (typeof arg === "number") return Number.isSafeInteger(arg) && arg >= 0 ? arg : NOT_RETRIED;
  if (arg !== null && typeof arg === "object") {
    const o = arg as { blockHash?: unknown; blockNumber?: unknown };
    if (typeof o.blockHash === "string" && HASH.test(o.blockHash)) return BY_HASH;
    if (typeof o.blockNumber === "string" && HEX_NUMBER.test(o.blockNumber)) {
      return Number.parseInt(o.blockNumber, 16);
    }
  }
  return NOT_RETRIED;
}
