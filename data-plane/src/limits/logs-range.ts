import { GatewayError } from "../../../shared/src/jsonrpc/errors";

/** Methods whose filter object spans a block range (eth_newFilter's range is what eth_getFilterLogs reads). */
export function hasLogsRange(method: string): boolean {
  return method === "eth_getLogs" || method === "eth_newFilter";
}

/** A refusal: the row (LogsRangeTooLarge), its message naming the range and the limit, and `data.limit`. */
export interface LogsRangeRefusal {
  readonly row: typeof GatewayError.LogsRangeTooLarge;
  readonly message: string;
  readonly limit: number;
}

const HEX_QUANTITY = /^0x[0-9a-fA-F]{1,16}$/;

/**
 * A block parameter as a height: hex quantities as given, `earliest` = 0, the other tags (latest, safe,
 * finalized, pending) = `head` (safe / finalized are at or below it, so a range ending there is never
 * larger than computed). Undefined when it cannot be resolved (a format the node will refuse itself, or a
 * tag while the head is unknown).
 */
function height(v: unknown, head: number): number | undefined {
  if (v === undefined || v === null) return head >= 0 ? head : undefined; // JSON-RPC default: latest
  if (typeof v !== "string") return undefined;
  if (HEX_QUANTITY.test(v)) return Number.parseInt(v, 16);
  switch (v) {
    case "earliest":
      return 0;
    case "latest":
    case "safe":
    case "finalized":
    case "pending":
      return head >= 0 ? head : undefined;
    default:
      return undefined;
  }
}

/**
 * Checks an eth_getLogs / eth_newFilter call's block range against the network's limit before it is
 * forwarded. `head` is the pool's head (-1 = unknown), `max` the limit (0 = none). Filters by blockHash
 * have no range. Returns undefined when the call may go on (including params the node will reject itself,
 * and a range that cannot be resolved because the head is not known yet).
 */
export function checkLogsRange(
  method: string,
  params: unknown,
  head: number,
  max: number,
): LogsRangeRefusal | undefined {
  if (max <= 0 || !Array.isArray(params)) return undefined;
  const filter = params[0] as Record<string, unknown> | undefined;
  if (filter === null || typeof filter !== "object" || Array.isArray(filter)) return undefined;
  if (filter.blockHash !== undefined && filter.blockHash !== null) return undefined;
  const from = height(filter.fromBlock, head);
  const to = height(filter.toBlock, head);
  if (from === undefined || to === undefined || to < from) return undefined;
  const blocks = to - from + 1;
  if (blocks <= max) return undefined;
  return {
    row: GatewayError.LogsRangeTooLarge,
    message: `${method} block range too large: ${blocks} blocks, max range ${max}`,
    limit: max,
  };
}
