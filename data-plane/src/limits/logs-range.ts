import { GatewayError } from "../../../shared/src/jsonrpc/errors";

/**
 * Methods whose filter object spans a block range (eth_newFilter's range is what eth_getFilterLogs reads),
 * in any case and with surrounding spaces (the method policy lets `eth_getlogs` through to nodes, and a
 * node that matches names loosely must not get it unchecked). Exact names cost two comparisons; other
 * spellings are normalised only when they could be one (first character `e`/`E` or a space).
 */
export function hasLogsRange(method: string): boolean {
  if (method === "eth_getLogs" || method === "eth_newFilter") return true;
  const c = method.charCodeAt(0);
  if ((c | 0x20) !== 0x65 && c > 0x20) return false;
  const n = method.length;
  if (n > 64) return false;
  // Printable ASCII at both ends: nothing to trim, so only the two names' lengths can match (this runs for
  // every eth_* call: no trimmed, lowercased copy for them).
  const last = method.charCodeAt(n - 1);
  if (c > 0x20 && c < 0x7f && last > 0x20 && last < 0x7f && n !== 11 && n !== 13) return false;
  const m = method.trim().toLowerCase();
  return m === "eth_getlogs" || m === "eth_newfilter";
}

/** The filter members a node reads, spelt as the range check reads them (and only these go upstream). */
const FILTER_MEMBERS = ["fromBlock", "toBlock", "blockHash", "address", "topics"] as const;

/**
 * An eth_getLogs / eth_newFilter call's params as they go upstream: the filter object rebuilt from the
 * five members the range check reads, by their exact names (the last of repeated keys, as JSON.parse kept
 * it); every other member is dropped. A node decoding with Go's encoding/json (geth, erigon, bor) reads
 * "FromBlock", "TOBLOCK" or "ſ"-spelt keys as the members themselves, the last one winning, so a filter
 * forwarded as written could ask it for a wider range than the one checked. The same params object when
 * there is nothing to drop (the filter already holds only those members), so the usual call allocates
 * nothing. Params with no filter object are returned as they are (the node refuses them).
 */
export function checkedFilterParams(params: unknown): unknown {
  if (params === null || typeof params !== "object") return params;
  if (Array.isArray(params)) {
    const filter = params[0];
    const checked = checkedFilter(filter);
    if (checked === filter) return params;
    const copy = params.slice();
    copy[0] = checked;
    return copy;
  }
  // By name (jsonrpsee-based nodes such as reth take `{"filter": {...}}`): only `filter` is kept.
  // Without a `filter` object there is nothing the range check read (the node refuses such params).
  const named = params as Record<string, unknown>;
  const filter = named.filter;
  if (filter === null || typeof filter !== "object" || Array.isArray(filter)) return params;
  const checked = checkedFilter(filter);
  return checked === filter && onlyKey(named, "filter") ? params : { filter: checked };
}

function checkedFilter(filter: unknown): unknown {
  if (filter === null || typeof filter !== "object" || Array.isArray(filter)) return filter;
  const f = filter as Record<string, unknown>;
  let kept = 0;
  for (const k of FILTER_MEMBERS) if (Object.hasOwn(f, k)) kept++;
  if (Object.keys(f).length === kept) return filter;
  const out: Record<string, unknown> = {};
  for (const k of FILTER_MEMBERS) if (Object.hasOwn(f, k)) out[k] = f[k];
  return out;
}

function onlyKey(o: Record<string, unknown>, key: string): boolean {
  const keys = Object.keys(o);
  return keys.length === 1 && keys[0] === key;
}

/** A refusal: the row (LogsRangeTooLarge), its message naming the range and the limit, and `data.limit`. */
export interface LogsRangeRefusal {
  readonly row: typeof GatewayError.LogsRangeTooLarge;
  readonly message: string;
  readonly limit: number;
}

/** Bound resolved to the head while the head is unknown (see height). */
export const NEEDS_HEAD = -1;
/** Bound that is no block number or tag this check can read (see height). */
export const UNREADABLE = -2;

/** A tag resolved against the head: latest, safe, finalized, pending (absent = latest). */
const HEAD_TAGS = new Set(["latest", "safe", "finalized", "pending"]);

/** Most significant digits of a block number read (a u64 is 16 hex / 20 decimal digits). */
const MAX_HEX_DIGITS = 16;
const MAX_DECIMAL_DIGITS = 20;

/**
 * A block parameter as a height (>= 0), NEEDS_HEAD (a tag while the head is unknown) or UNREADABLE.
 * Spelled as nodes take it, not just as the spec writes it: anvil and reth take any number of leading
 * zeros, upper-case tags and `0X`; other clients take decimal strings and JSON numbers. Tags: `earliest` =
 * 0, the others = `head` (safe / finalized are at or below it, so a range ending there is never larger than
 * computed). Numbers above 2^53 are unreadable (no chain is that long; a node reads them as far beyond its
 * head).
 */
export function height(v: unknown, head: number): number {
  if (v === undefined || v === null) return head >= 0 ? head : NEEDS_HEAD; // JSON-RPC default: latest
  if (typeof v === "number") return Number.isSafeInteger(v) && v >= 0 ? v : UNREADABLE;
  if (typeof v !== "string") return UNREADABLE;
  const t = v.trim().toLowerCase();
  if (t === "earliest") return 0;
  if (HEAD_TAGS.has(t)) return head >= 0 ? head : NEEDS_HEAD;
  let digits: string;
  let radix: "0x" | "";
  if (t.startsWith("0x")) {
    digits = t.slice(2).replace(/^0+/, "");
    radix = "0x";
    if (!/^[0-9a-f]*$/.test(digits) || t.length === 2 || digits.length > MAX_HEX_DIGITS) return UNREADABLE;
  } else {
    digits = t.replace(/^0+/, "");
    radix = "";
    if (!/^[0-9]*$/.test(digits) || t.length === 0 || digits.length > MAX_DECIMAL_DIGITS) return UNREADABLE;
  }
  if (digits === "") return 0;
  const n = BigInt(radix + digits);
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? UNREADABLE : Number(n);
}

/** Whether a bound is a head tag (or absent = latest): two of them span the finality lag, not a client's choice. */
export function isHeadTag(v: unknown): boolean {
  return v === undefined || v === null || (typeof v === "string" && HEAD_TAGS.has(v.trim().toLowerCase()));
}

/** A bound as quoted in a message (bounded: it comes from the client). */
function quote(v: unknown): string {
  const s = typeof v === "string" ? JSON.stringify(v) : String(JSON.stringify(v) ?? v);
  return s.length > 40 ? `${s.slice(0, 40)}...` : s;
}

/**
 * Checks an eth_getLogs / eth_newFilter call's block range against the network's limit before it is
 * forwarded. `head` is the pool's head (-1 = unknown), `max` the limit (0 = none). Filters by blockHash
 * alone have no range; inverted ranges are the node's to refuse. A range that cannot be resolved (a bound
 * in no spelling read here, or a tag while the head is unknown) is refused with the same row: forwarding
 * it would let an odd spelling through unlimited. Params without a filter object are left to the node.
 */
export function checkLogsRange(
  method: string,
  params: unknown,
  head: number,
  max: number,
): LogsRangeRefusal | undefined {
  if (max <= 0 || params === null || typeof params !== "object") return undefined;
  // Positional, or by name (jsonrpsee-based nodes such as reth take `{"filter": {...}}`).
  const filter = (Array.isArray(params) ? params[0] : (params as { filter?: unknown }).filter) as
    | Record<string, unknown>
    | undefined;
  if (filter === null || typeof filter !== "object" || Array.isArray(filter)) return undefined;
  const fromGiven = filter.fromBlock !== undefined && filter.fromBlock !== null;
  const toGiven = filter.toBlock !== undefined && filter.toBlock !== null;
  if (filter.blockHash !== undefined && filter.blockHash !== null && !fromGiven && !toGiven) return undefined;
  if (isHeadTag(filter.fromBlock) && isHeadTag(filter.toBlock)) return undefined;
  const from = height(filter.fromBlock, head);
  const to = height(filter.toBlock, head);
  if (from === UNREADABLE || to === UNREADABLE) {
    const which = from === UNREADABLE ? "fromBlock" : "toBlock";
    return {
      row: GatewayError.LogsRangeTooLarge,
      message: `${method} block range cannot be checked: ${which} ${quote(filter[which])} is not a block number or tag; max range ${max}`,
      limit: max,
    };
  }
  if (from === NEEDS_HEAD || to === NEEDS_HEAD) {
    return {
      row: GatewayError.LogsRangeTooLarge,
      message: `${method} block range cannot be checked: the network's head block is not known yet; retry shortly or give both bounds as block numbers; max range ${max}`,
      limit: max,
    };
  }
  if (to < from) return undefined;
  const blocks = to - from + 1;
  if (blocks <= max) return undefined;
  return {
    row: GatewayError.LogsRangeTooLarge,
    message: `${method} block range too large: ${blocks} blocks, max range ${max}`,
    limit: max,
  };
}
