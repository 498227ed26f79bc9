/**
 * Which answers may be cached, per method (after MetaMask's eth-json-rpc-middleware and eRPC):
 * - Permanent: cannot change (chain id, data addressed by block hash).
 * - PerBlock: valid for one head; keyed to the network's resolved head height, so `latest` (or no block
 *   argument) means "as of head N" and a new head means new keys. Data addressed by block number is also
 *   per-block (a reorg near the head can change it), unless the block is at or below the network's
 *   finalized head (see finalizableBlock): the forwarding core then keeps it as permanent.
 * - Never: sends, pending state, filters, subscriptions, node-local state, and anything not listed.
 */
export const CacheRule = { Never: 0, Permanent: 1, PerBlock: 2 } as const;
export type CacheRule = (typeof CacheRule)[keyof typeof CacheRule];

const PERMANENT = new Set([
  "eth_chainId",
  "net_version",
  "eth_getBlockByHash",
  "eth_getBlockTransactionCountByHash",
  "eth_getTransactionByBlockHashAndIndex",
  "eth_getUncleByBlockHashAndIndex",
  "eth_getUncleCountByBlockHash",
  "web3_sha3",
  "system_chain",
  "system_chainType",
  "system_properties",
]);

/** Per-block methods; the number is the index of an optional block argument that, when a hash, makes the answer permanent. */
const PER_BLOCK = new Map<string, number>([
  ["eth_blockNumber", -1],
  ["eth_gasPrice", -1],
  ["eth_maxPriorityFeePerGas", -1],
  ["eth_blobBaseFee", -1],
  ["eth_feeHistory", -1],
  ["eth_getBalance", 1],
  ["eth_getCode", 1],
  ["eth_getTransactionCount", 1],
  ["eth_getStorageAt", 2],
  ["eth_call", 1],
  ["eth_estimateGas", 1],
  ["eth_getProof", 2],
  ["eth_getBlockByNumber", -1],
  ["eth_getBlockTransactionCountByNumber", -1],
  ["eth_getTransactionByBlockNumberAndIndex", -1],
  ["eth_getTransactionByHash", -1],
  ["eth_getTransactionReceipt", -1],
  ["eth_getBlockReceipts", -1],
  ["eth_getLogs", -1],
  ["chain_getBlockHash", -1],
  ["chain_getHeader", 0],
  ["chain_getBlock", 0],
  ["chain_getFinalizedHead", -1],
  ["state_getMetadata", 0],
  ["state_getRuntimeVersion", 0],
  ["state_getStorage", 1],
  ["state_getStorageHash", 1],
  ["state_getStorageSize", 1],
  ["state_getKeysPaged", 3],
  ["state_call", 2],
]);

const BLOCK_HASH = /^0x[0-9a-fA-F]{64}$/;

export function cacheRule(method: string, params: unknown): CacheRule {
  if (PERMANENT.has(method)) return CacheRule.Permanent;
  const hashAt = PER_BLOCK.get(method);
  if (hashAt === undefined) return CacheRule.Never;
  if (mentionsPending(params)) return CacheRule.Never;
  if (method === "chain_getBlockHash" && Array.isArray(params) && params[0] === 0) return CacheRule.Permanent;
  if (hashAt >= 0 && Array.isArray(params)) {
    const arg = params[hashAt];
    if (typeof arg === "string" && BLOCK_HASH.test(arg)) return CacheRule.Permanent;
    if (
      arg !== null &&
      typeof arg === "object" &&
      typeof (arg as { blockHash?: unknown }).blockHash === "string"
    ) {
      return CacheRule.Permanent;
    }
  }
  return CacheRule.PerBlock;
}

/** True when any top-level param (or a top-level field of an object param) is the "pending" tag. */
function mentionsPending(params: unknown): boolean {
  if (params === undefined || params === null || typeof params !== "object") return false;
  if (Array.isArray(params)) {
    for (let i = 0; i < params.length; i++) {
      const p = params[i];
      if (p === "pending") return true;
      if (p !== null && typeof p === "object" && !Array.isArray(p) && objectHasPending(p)) return true;
    }
    return false;
  }
  return objectHasPending(params);
}

function objectHasPending(o: object): boolean {
  for (const k in o) if ((o as Record<string, unknown>)[k] === "pending") return true;
  return false;
}

const HEAD_HINT_METHODS: Record<string, string> = {
  eth_blockNumber: ',"result":"0x',
  eth_getTransactionReceipt: '"blockNumber":"0x',
  eth_getBlockByNumber: '"number":"0x',
};

/** Whether a method's answers carry a head hint (see headHint). */
export function givesHeadHint(method: string): boolean {
  return HEAD_HINT_METHODS[method] !== undefined;
}

/**
 * A block height an answer proves exists (eth_blockNumber, a receipt's block, a fetched block), found
 * by a string search in the reply text rather than a parse; undefined when the method gives none.
 */
export function headHint(method: string, tail: string): number | undefined {
  const mark = HEAD_HINT_METHODS[method];
  if (mark === undefined) return undefined;
  const at = tail.indexOf(mark);
  if (at < 0) return undefined;
  const start = at + mark.length;
  const end = tail.indexOf('"', start);
  if (end < 0 || end - start > 13) return undefined;
  const n = Number.parseInt(tail.slice(start, end), 16);
  return Number.isFinite(n) ? n : undefined;
}

/**
 * Per-block methods whose answer is fixed once a block given by number is final: the index of that
 * block-number argument. eth_getLogs (filter object) and chain_getBlockHash are read apart.
 */
const NUMBER_AT = new Map<string, number>([
  ["eth_getBlockByNumber", 0],
  ["eth_getBlockTransactionCountByNumber", 0],
  ["eth_getTransactionByBlockNumberAndIndex", 0],
  ["eth_getBlockReceipts", 0],
  ["eth_getBalance", 1],
  ["eth_getCode", 1],
  ["eth_getTransactionCount", 1],
  ["eth_getStorageAt", 2],
  ["eth_call", 1],
  ["eth_getProof", 2],
  ["chain_getBlockHash", 0],
]);

/**
 * The highest block a per-block call's answer depends on when every block it names is given by number
 * (so the answer cannot change once that block is final), else -1: tags other than `earliest` (latest,
 * safe, finalized, pending: they move), hashes (already permanent by cacheRule), absent block arguments,
 * and spellings not read here (decimal strings, `0X`, more than 13 hex digits) stay per-block. eth_getLogs:
 * a filter whose fromBlock and toBlock are both numbers (or `earliest`), the answer depending on toBlock.
 * Reads the parsed params in place (no string is made): it runs on the cache-hit path.
 */
export function finalizableBlock(method: string, params: unknown): number {
  if (!Array.isArray(params)) return -1;
  if (method === "eth_getLogs") {
    const f = params[0];
    if (f === null || typeof f !== "object" || Array.isArray(f)) return -1;
    const filter = f as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown };
    if (filter.blockHash !== undefined && filter.blockHash !== null) return -1;
    const from = blockNumber(filter.fromBlock);
    const to = blockNumber(filter.toBlock);
    return from < 0 || to < 0 ? -1 : Math.max(from, to);
  }
  const at = NUMBER_AT.get(method);
  if (at === undefined) return -1;
  const arg = params[at];
  // EIP-1898: {"blockNumber": "0x..."} (a {"blockHash"} object is permanent by cacheRule).
  if (arg !== null && typeof arg === "object" && !Array.isArray(arg)) {
    return blockNumber((arg as { blockNumber?: unknown }).blockNumber);
  }
  return blockNumber(arg);
}

/** Most hex digits read: 13 stay below 2^53 (no chain is that long). */
const MAX_BLOCK_HEX_DIGITS = 13;

/**
 * A block argument as a number: `0x`-hex (any case of digits, leading zeros allowed), `earliest` (0), or a
 * JSON number (Substrate takes both); -1 for anything else. A char-code loop, no allocation.
 */
export function blockNumber(v: unknown): number {
  if (typeof v === "number") return Number.isSafeInteger(v) && v >= 0 ? v : -1;
  if (typeof v !== "string") return -1;
  if (v === "earliest") return 0;
  const len = v.length;
  if (len < 3 || len > 2 + MAX_BLOCK_HEX_DIGITS || v.charCodeAt(0) !== 48 || v.charCodeAt(1) !== 120) {
    return -1;
  }
  let n = 0;
  for (let i = 2; i < len; i++) {
    const c = v.charCodeAt(i);
    let d: number;
    if (c >= 48 && c <= 57) d = c - 48;
    else if (c >= 97 && c <= 102) d = c - 87;
    else if (c >= 65 && c <= 70) d = c - 55;
    else return -1;
    n = n * 16 + d;
  }
  return n;
}
