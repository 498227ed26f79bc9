import {
  UPSTREAM_METHOD_FAMILIES,
  type UpstreamArchiveMode,
  type UpstreamMethodFamily,
  type UpstreamRecord,
} from "../../../shared/src/redis/records";
import { paramAt } from "../rpc/param-at";

/**
 * What an upstream can serve (docs/contracts.md#upstream-capabilities): the oldest block whose state it
 * keeps (declared ARCHIVE, or probed: see state-probe.ts), the method families it declares (`debug`,
 * `trace`), and its requests-per-second budget. NetworkPool ranks upstreams by these for each call's Need.
 */

/** Bit of each family in a family mask (UPSTREAM_METHOD_FAMILIES order). */
export const FAMILY_BIT: Readonly<Record<UpstreamMethodFamily, number>> = { debug: 1, trace: 2 };

/** What a call (or a batch of calls sent in one exchange) requires of the upstream that gets it. */
export interface Need {
  /** Block whose state the call reads; -1 = none (no block argument, or a head tag). */
  readonly block: number;
  /** FAMILY_BIT mask of the families the calls belong to; 0 = none. */
  readonly families: number;
  /**
   * The call reads the head (`latest`, `pending`, no block argument; Substrate: no block hash): it prefers
   * an upstream at the served head (NetworkPool.select), and is never refused for want of one.
   */
  readonly head?: boolean;
}

/** The need of a call that only reads the head (one shared object: no allocation per call). */
export const AT_HEAD: Need = Object.freeze({ block: -1, families: 0, head: true });

/** Whether a need can restrict where a call goes (a block's state, a family), beyond a preference. */
export function restricts(need: Need): boolean {
  return need.block >= 0 || need.families !== 0;
}

/** blockNeedOfCall's answer for a call that reads the head (`latest`, `pending`, no block argument). */
export const HEAD_BLOCK = -2;

/**
 * Where a method's block argument is (`index`) and what it names:
 * - `state`: the method reads the state at that block (a height routes it to an upstream that keeps it),
 *   and `parent` when it re-executes that block (traces), so needs the state after its parent;
 * - not `state`: a block's data (kept by every node), so only the head tags route it (to the served head);
 * - `hash`: Substrate's optional block hash (`at`): absent or null = the best block, a hash names no height.
 * Block hashes name no height: such calls are routed as any other (see blockNeedOfCall).
 */
interface BlockArg {
  readonly index: number;
  readonly parent: boolean;
  readonly state: boolean;
  readonly hash: boolean;
}

const stateAt = (index: number, parent = false): BlockArg => ({ index, parent, state: true, hash: false });
const blockAt = (index: number): BlockArg => ({ index, parent: false, state: false, hash: false });
const hashAt = (index: number): BlockArg => ({ index, parent: false, state: false, hash: true });

const BLOCK_ARG = new Map<string, BlockArg>([
  ["eth_getBalance", stateAt(1)],
  ["eth_getCode", stateAt(1)],
  ["eth_getTransactionCount", stateAt(1)],
  ["eth_getStorageAt", stateAt(2)],
  ["eth_call", stateAt(1)],
  ["eth_estimateGas", stateAt(1)],
  ["eth_createAccessList", stateAt(1)],
  ["eth_getProof", stateAt(2)],
  ["debug_traceCall", stateAt(1)],
  ["trace_call", stateAt(2)],
  ["debug_traceBlockByNumber", stateAt(0, true)],
  ["trace_block", stateAt(0, true)],
  ["trace_replayBlockTransactions", stateAt(0, true)],
  // Reads of the head's block data: no argument at all (index past the params) is the head.
  ["eth_blockNumber", blockAt(0)],
  ["eth_gasPrice", blockAt(0)],
  ["eth_maxPriorityFeePerGas", blockAt(0)],
  ["eth_blobBaseFee", blockAt(0)],
  ["eth_feeHistory", blockAt(1)],
  ["eth_getBlockByNumber", blockAt(0)],
  ["eth_getBlockReceipts", blockAt(0)],
  ["eth_getBlockTransactionCountByNumber", blockAt(0)],
  ["eth_getTransactionByBlockNumberAndIndex", blockAt(0)],
  ["eth_getUncleCountByBlockNumber", blockAt(0)],
  ["eth_getUncleByBlockNumberAndIndex", blockAt(0)],
  // Substrate: the best block when no hash (chain_getBlockHash: no number) is given.
  ["chain_getHeader", hashAt(0)],
  ["chain_getBlock", hashAt(0)],
  ["chain_getBlockHash", hashAt(0)],
  ["chain_getRuntimeVersion", hashAt(0)],
  ["state_getRuntimeVersion", hashAt(0)],
  ["state_getMetadata", hashAt(0)],
  ["state_getStorage", hashAt(1)],
  ["state_getStorageAt", hashAt(1)],
  ["state_getStorageHash", hashAt(1)],
  ["state_getStorageHashAt", hashAt(1)],
  ["state_getStorageSize", hashAt(1)],
  ["state_getStorageSizeAt", hashAt(1)],
  ["state_getKeys", hashAt(1)],
  ["state_getPairs", hashAt(1)],
  ["state_getKeysPaged", hashAt(3)],
  ["state_getKeysPagedAt", hashAt(3)],
  ["state_getReadProof", hashAt(1)],
  ["state_queryStorageAt", hashAt(1)],
  ["state_call", hashAt(2)],
  ["state_callAt", hashAt(2)],
  ["childstate_getStorage", hashAt(2)],
  ["childstate_getStorageHash", hashAt(2)],
  ["childstate_getStorageSize", hashAt(2)],
  ["childstate_getKeys", hashAt(2)],
  ["state_getChildReadProof", hashAt(2)],
  ["payment_queryInfo", hashAt(1)],
  ["payment_queryFeeDetails", hashAt(1)],
]);

/**
 * The block a block argument names: a height >= 0, or -1 for the head tags (`latest`, `pending`, and `safe`
 * / `finalized`, within the finality lag that every pruned client keeps), an absent argument, a block hash
 * and anything unreadable (the node answers those itself). Spelled as nodes take it: hex with any
 * leading zeros or `0X`, decimal strings, JSON numbers, `earliest` = 0, EIP-1898 `{ blockNumber }`.
 */
export function blockOfArg(v: unknown): number {
  if (typeof v === "number") return Number.isSafeInteger(v) && v >= 0 ? v : -1;
  if (v !== null && typeof v === "object" && !Array.isArray(v)) {
    return blockOfArg((v as { blockNumber?: unknown }).blockNumber);
  }
  if (typeof v !== "string" || v.length === 0 || v.length > 66) return -1;
  // The usual spellings first, without allocating (this runs for every eth_call).
  if (v === "latest" || v === "pending" || v === "safe" || v === "finalized") return -1;
  if (v === "earliest") return 0;
  const c = v.charCodeAt(0);
  // "0x..." / decimal digits, else a tag.
  if (c === 0x30 && (v.charCodeAt(1) | 0x20) === 0x78) {
    if (v.length > 18 || !/^0[xX][0-9a-fA-F]+$/.test(v)) return -1; // a block hash has 64 digits
    const n = Number.parseInt(v.slice(2), 16);
    return Number.isSafeInteger(n) ? n : -1;
  }
  if (c >= 0x30 && c <= 0x39) {
    if (v.length > 16 || !/^[0-9]+$/.test(v)) return -1;
    return Number(v);
  }
  // Other spellings of the tags (nodes read them loosely), and anything else: nothing to require.
  return v.length <= 12 && v.trim().toLowerCase() === "earliest" ? 0 : -1;
}

/** The block whose state `method` reads with these params; -1 when it reads none or only the head's. */
export function stateBlockOf(method: string, params: unknown): number {
  return stateBlockOfCall({ method, params });
}

/** stateBlockOf of a call, reading only its block argument (from its params' text when it has one). */
export function stateBlockOfCall(c: {
  readonly method: string;
  readonly params: unknown;
  param?(index: number): unknown;
}): number {
  const b = blockNeedOfCall(c);
  return b < 0 ? -1 : b;
}

/**
 * What a call's block argument asks of its upstream: the block whose state it reads (>= 0), HEAD_BLOCK
 * when it reads the head (`latest` or `pending`, exactly as spelled, or no argument; Substrate: no block
 * hash), else -1 (no block argument to read, a block's data at a height, a hash, `safe` / `finalized`).
 * One map lookup and, for the methods in it, one param read: no allocation.
 */
export function blockNeedOfCall(c: {
  readonly method: string;
  readonly params: unknown;
  param?(index: number): unknown;
}): number {
  const arg = BLOCK_ARG.get(c.method);
  if (arg === undefined) return -1;
  const v = paramAt(c, arg.index);
  if (v === undefined || v === null) return HEAD_BLOCK;
  if (arg.hash) return -1;
  if (v === "latest" || v === "pending") return HEAD_BLOCK;
  if (!arg.state) return -1;
  const b = blockOfArg(v);
  if (b < 0 || !arg.parent) return b;
  return b === 0 ? 0 : b - 1;
}

/** FAMILY_BIT of a method's family (`debug_*`, `trace_*`, any case); 0 for other methods. */
export function familyOf(method: string): number {
  const c = method.charCodeAt(0) | 0x20;
  if (c === 0x64 /* d */) {
    return method.length > 6 && method.slice(0, 6).toLowerCase() === "debug_" ? FAMILY_BIT.debug : 0;
  }
  if (c === 0x74 /* t */) {
    return method.length > 6 && method.slice(0, 6).toLowerCase() === "trace_" ? FAMILY_BIT.trace : 0;
  }
  return 0;
}

/** The need of several calls sent in one exchange: every block's state (the oldest) and every family. */
export function mergeNeeds(a: Need | undefined, b: Need | undefined): Need | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  // Head reads only (the usual coalesced batch): the shared need, no allocation.
  if (!restricts(a) && !restricts(b)) return a.head === true ? a : b;
  const block = a.block < 0 ? b.block : b.block < 0 ? a.block : Math.min(a.block, b.block);
  const families = a.families | b.families;
  return a.head === true || b.head === true ? { block, families, head: true } : { block, families };
}

/** The families of a mask. */
export function familyList(mask: number): UpstreamMethodFamily[] {
  return UPSTREAM_METHOD_FAMILIES.filter((f) => (mask & FAMILY_BIT[f]) !== 0);
}

/** Family mask as a message names it: `debug_*`, `debug_* and trace_*`. */
export function familyNames(mask: number): string {
  return familyList(mask)
    .map((f) => `${f}_*`)
    .join(" and ");
}

/** What an upstream is known to do with a block's state. */
export const Serves = { Yes: 0, Unknown: 1, No: 2 } as const;
export type Serves = (typeof Serves)[keyof typeof Serves];

/** Smallest safety margin, in blocks, above a pruned node's estimated oldest state (see oldestServed). */
const MIN_EDGE_MARGIN_BLOCKS = 2;

/**
 * An upstream's capabilities: the operator's settings from its record, what the state probe found, and
 * its budget's token bucket. Plain fields, read on every selection.
 */
export class UpstreamCapabilities {
  archiveMode: UpstreamArchiveMode = "AUTO";
  /** FAMILY_BIT mask of the declared families; 0 = none declared. */
  families = 0;
  /** Requests per second; 0 = no budget. */
  maxRequestsPerSecond = 0;
  /** Oldest block whose state the last conclusive probe found served; -1 = not probed (yet). */
  probedOldest = -1;
  /** The upstream's head when that probe ran. */
  probedAtHead = -1;
  /** A state probe of this upstream is running (at most one). */
  probeRunning = false;
  /** Budget tokens (requests); negative after a batch larger than what was left. */
  private tokens = 0;
  private refilledAtMs = 0;

  constructor(record: UpstreamRecord) {
    this.apply(record);
  }

  /** Takes the operator's settings from a (new version of the) record; keeps what was probed. */
  apply(record: UpstreamRecord): void {
    this.archiveMode = record.archiveMode ?? "AUTO";
    let mask = 0;
    for (const f of record.methodFamilies ?? []) mask |= FAMILY_BIT[f];
    this.families = mask;
    const rps = record.maxRequestsPerSecond ?? 0;
    if (rps !== this.maxRequestsPerSecond) {
      this.maxRequestsPerSecond = rps;
      this.tokens = rps;
      this.refilledAtMs = 0;
    }
  }

  /** Whether the state probe has anything to find out (ARCHIVE is taken at its word). */
  get wantsProbe(): boolean {
    return this.archiveMode !== "ARCHIVE";
  }

  /** Records a conclusive probe: state served from `oldest` up, found while the upstream's head was `head`. */
  recordProbe(oldest: number, head: number): void {
    this.probedOldest = oldest;
    this.probedAtHead = head;
  }

  /**
   * The oldest block whose state a call may be routed here for, given the upstream's current `head`;
   * -1 = unknown. Archive (declared, or AUTO and the probe found block 1 served): 0. Otherwise the kept
   * window is taken to move with the head (a pruned node drops a block's state for each new one), so the
   * probed oldest block advances by the blocks mined since the probe; plus a margin of max(2, window/8)
   * blocks, because the head here lags the node's by up to one health-check interval.
   */
  oldestServed(head: number): number {
    if (!this.pruned) return this.archiveMode === "ARCHIVE" || this.probedOldest === 0 ? 0 : -1;
    const window = this.probedAtHead - this.probedOldest;
    return this.rolled(head) + Math.max(MIN_EDGE_MARGIN_BLOCKS, Math.floor(window / 8));
  }

  /**
   * The oldest block whose state the upstream keeps now, as far as known (oldestServed without the
   * margin; the next probe's first guess): -1 unknown, 0 full history.
   */
  estimatedOldest(head: number): number {
    if (!this.pruned) return this.archiveMode === "ARCHIVE" || this.probedOldest === 0 ? 0 : -1;
    return this.rolled(head);
  }

  /**
   * Whether the probed window moves with the head: probed, and not found to reach block 1 unless the
   * operator said PRUNED (a chain younger than the node's window: its oldest state will go).
   */
  private get pruned(): boolean {
    if (this.archiveMode === "ARCHIVE" || this.probedOldest < 0) return false;
    return this.probedOldest > 0 || this.archiveMode === "PRUNED";
  }

  private rolled(head: number): number {
    return this.probedOldest + (head > this.probedAtHead ? head - this.probedAtHead : 0);
  }

  servesState(block: number, head: number): Serves {
    const o = this.oldestServed(head);
    if (o < 0) return Serves.Unknown;
    return block >= o ? Serves.Yes : Serves.No;
  }

  /** Whether the budget's tokens are spent (always false without a budget). */
  overBudget(nowMs: number): boolean {
    if (this.maxRequestsPerSecond === 0) return false;
    this.refill(nowMs);
    return this.tokens < 1;
  }

  /** Takes `n` requests from the budget; returns whether it was already spent before them. */
  spend(n: number, nowMs: number): boolean {
    if (this.maxRequestsPerSecond === 0) return false;
    this.refill(nowMs);
    const over = this.tokens < 1;
    this.tokens -= n;
    return over;
  }

  /** Token bucket: maxRequestsPerSecond per second, holding at most one second's worth (the burst). */
  private refill(nowMs: number): void {
    const rps = this.maxRequestsPerSecond;
    if (this.refilledAtMs === 0) {
      this.refilledAtMs = nowMs;
      return;
    }
    const elapsed = nowMs - this.refilledAtMs;
    if (elapsed <= 0) return;
    this.tokens = Math.min(rps, this.tokens + (elapsed * rps) / 1000);
    this.refilledAtMs = nowMs;
  }
}
