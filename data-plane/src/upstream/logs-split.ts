import { ErrorCategory, type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { height, isHeadTag, UNREADABLE } from "../limits/logs-range";
import { type CallResult, type Reply, ReplyKind } from "./reply";

/**
 * eth_getLogs over a long block range, split (docs/contracts.md#eth_getlogs-splitting): the range is cut into
 * sub-ranges of at most the network's logsChunkBlocks, sent in parallel (at most `concurrency` at once) and
 * merged in range order. Each node answers its sub-range in (block, logIndex) order and the sub-ranges are
 * disjoint and ascending, so concatenating their arrays in range order is exactly the whole range's answer.
 *
 * A node's "range too large / too many results" refusal halves the chunk (for that sub-range and every one not
 * sent yet) and retries, down to one block; that one block refused again is the client's answer. Any other
 * failure (node error, gateway error row, an answer that is not an array) is the whole call's answer: no
 * partial result. The pool (network-pool.ts) plans, sends each sub-call as its own heavy exchange and counts.
 */

/** A split eth_getLogs call: its resolved range and how to write one sub-range's params. */
export interface LogsSplit {
  readonly from: number;
  readonly to: number;
  /** The call's params with the filter's range set to [a, b] (a <= b, within [from, to]). */
  params(a: number, b: number): unknown;
}

const hex = (n: number): string => `0x${n.toString(16)}`;

/**
 * The split of an eth_getLogs call, or undefined when it goes out whole: chunk 0, a range of at most `chunk`
 * blocks, a blockHash filter, or bounds the gateway cannot pin to heights. Bounds are read as
 * limits/logs-range.ts reads them (every spelling nodes take); `earliest` = 0. A toBlock of `latest` /
 * `pending` / absent is resolved to `head` for planning, and the last sub-range keeps the client's own
 * spelling, so the tail is whatever the node serving it calls latest (as one node would answer; a numbered
 * bound a lagging node has not reached is refused by nodes such as anvil). `safe` / `finalized` ends, and any
 * head tag as fromBlock, are not split: their height is the node's to know (and such a fromBlock starts a
 * range of a few blocks at most).
 */
export function planLogsSplit(params: unknown, head: number, chunk: number): LogsSplit | undefined {
  if (chunk <= 0 || params === null || typeof params !== "object") return undefined;
  const positional = Array.isArray(params);
  // Positional, or by name (jsonrpsee-based nodes such as reth take `{"filter": {...}}`).
  const filter = (positional ? params[0] : (params as { filter?: unknown }).filter) as
    | Record<string, unknown>
    | undefined;
  if (filter === null || typeof filter !== "object" || Array.isArray(filter)) return undefined;
  if (filter.blockHash !== undefined && filter.blockHash !== null) return undefined;
  const fromTag = filter.fromBlock;
  const toTag = filter.toBlock;
  if (isHeadTag(fromTag)) return undefined;
  const from = height(fromTag, head);
  if (from === UNREADABLE) return undefined;
  let to: number;
  const keepTo = isLatest(toTag);
  if (keepTo) {
    if (head < 0) return undefined;
    to = head;
  } else {
    if (isHeadTag(toTag)) return undefined; // safe / finalized
    to = height(toTag, head);
    if (to === UNREADABLE) return undefined;
  }
  if (to < from || to - from + 1 <= chunk) return undefined;
  const hasTo = "toBlock" in filter;
  const rest = positional ? (params as unknown[]).slice(1) : undefined;
  return {
    from,
    to,
    params(a: number, b: number): unknown {
      const f: Record<string, unknown> = { ...filter, fromBlock: hex(a) };
      if (b === to && keepTo) {
        if (!hasTo) delete f.toBlock;
      } else {
        f.toBlock = hex(b);
      }
      return rest !== undefined ? [f, ...rest] : { ...(params as object), filter: f };
    },
  };
}

/** `latest`, `pending` or absent (the JSON-RPC default): the head as the node serving the call sees it. */
function isLatest(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (typeof v !== "string") return false;
  const t = v.trim().toLowerCase();
  return t === "latest" || t === "pending";
}

/**
 * A node's refusal of an eth_getLogs range as too large or too productive, in the wordings nodes and
 * providers use (Infura / geth / zkEVM "query returned more than 10000 results", reth "query exceeds max
 * results" / "max block range", Alchemy "Log response size exceeded ... up to a 2K block range", BSC / geth
 * forks "exceed maximum block range: 5000", QuickNode / BlockPI "limited to a 10,000 range", Ankr / Moonbeam
 * "block range is too wide", Optimism / Base "Block range is too large", Chainstack "Block range limit
 * exceeded", Arbitrum "logs matched by query exceeds limit", Cloudflare "Max range", Besu "exceeds maximum
 * RPC range limit"), whatever the code (-32005, -32602, -32600, -32000 are all seen). A smaller range can
 * succeed where these failed; "block range extends beyond current head" and "invalid block range" are not
 * matched: halving cannot fix them.
 */
const RANGE_REFUSAL =
  /more than [\d,.]+ (results|logs)|exceeds? (the )?max(imum)? (results|(block |rpc )?range)|max(imum)? block range|block range (is )?too (large|wide|big)|range is too (large|wide|big)|block range (limit exceeded|exceeds|greater than)|response size (exceeded|should not|too large|is larger)|response too large|limited to (a )?[\d,.]+|too many (logs|results|blocks)|logs matched by query exceeds|range allowed for your plan|limit the query to at most|max range:|maximum allowed number of requested blocks|requested range exceeds/i;

/** Whether a node's error answer (a Reply tail `,"error":{...}}`) is a range refusal worth halving for. */
export function isRangeRefusal(tail: string): boolean {
  let message: unknown;
  try {
    message = (JSON.parse(`{${tail.slice(1)}`) as { error?: { message?: unknown } }).error?.message;
  } catch {
    return false;
  }
  return typeof message === "string" && RANGE_REFUSAL.test(message);
}

const RESULT_ARRAY = ',"result":[';

/**
 * The items of an eth_getLogs answer's array as JSON text (between the brackets, "" when empty), undefined
 * when the result is no array. Fast path: a node's compact `,"result":[...]}` is sliced, not parsed (answers
 * run to megabytes); anything else is parsed. A `null` result (no logs, on some nodes) is an empty list.
 */
export function logItems(reply: Reply): string | undefined {
  if (reply.kind === ReplyKind.NullResult) return "";
  const tail = reply.tail;
  if (tail.startsWith(RESULT_ARRAY) && tail.endsWith("]}")) return tail.slice(RESULT_ARRAY.length, -2).trim();
  try {
    const v = (JSON.parse(`{${tail.slice(1)}`) as { result?: unknown }).result;
    return Array.isArray(v) ? JSON.stringify(v).slice(1, -1) : undefined;
  } catch {
    return undefined;
  }
}

/** Bytes of the response envelope around the merged result (`{"jsonrpc":"2.0","id":<up to 10 digits>`). */
const ENVELOPE_BYTES = 40;

export interface SplitOptions {
  /** Blocks per sub-range to start with (logsChunkBlocks, > 0). */
  readonly chunk: number;
  /** Sub-calls in flight at once (LOGS_SPLIT_CONCURRENCY, >= 1). */
  readonly concurrency: number;
  /**
   * Most bytes of the merged answer (UPSTREAM_MAX_RESPONSE_BYTES: the cap one node's answer for the whole
   * range would meet); past it the call fails with `tooLarge`. Log JSON is ASCII, so string length = bytes.
   */
  readonly maxBytes: number;
  readonly tooLarge: ErrorRow;
  /** Sends one sub-call with these params (one heavy exchange, with failover). Must not reject. */
  send(params: unknown): Promise<CallResult>;
}

export interface SplitOutcome {
  readonly result: CallResult;
  /** Sub-calls sent (retries after a halving included). */
  readonly subCalls: number;
  /** Range refusals that halved the chunk. */
  readonly halvings: number;
}

/**
 * Runs a split: sub-ranges cut from the front of the remaining range at the current chunk size, at most
 * `concurrency` in flight. Resolves once: with the merged answer when every sub-range is in, or with the
 * first failure at once (sub-calls still in flight finish unread: an exchange cannot be taken back, and
 * their answers are dropped).
 */
export function runLogsSplit(split: LogsSplit, o: SplitOptions): Promise<SplitOutcome> {
  return new Promise<SplitOutcome>((resolve) => {
    let chunk = o.chunk;
    let limit = Math.max(1, o.concurrency);
    /** Ranges not sent yet, [from, to] inclusive; sub-ranges are cut from the front of queue[0]. */
    const queue: [number, number][] = [[split.from, split.to]];
    const pieces: { from: number; items: string }[] = [];
    let inFlight = 0;
    let subCalls = 0;
    let halvings = 0;
    let bytes = ENVELOPE_BYTES + RESULT_ARRAY.length + 2;
    let done = false;

    const finish = (result: CallResult): void => {
      if (done) return;
      done = true;
      resolve({ result, subCalls, halvings });
    };

    /** Takes in one sub-call's result; returns the whole call's failure, if this result is one. */
    const take = (a: number, b: number, r: CallResult): CallResult | undefined => {
      if (r.ok && r.reply.kind !== ReplyKind.Error) {
        const items = logItems(r.reply);
        if (items === undefined) return { ok: false, error: GatewayError.UpstreamBadResponse };
        if (items !== "") {
          bytes += items.length + 1;
          if (bytes > o.maxBytes) return { ok: false, error: o.tooLarge };
          pieces.push({ from: a, items });
        }
        return undefined;
      }
      if (r.ok) {
        // The node's error: a range refusal halves the chunk and puts the sub-range back; one block refused
        // is final, as is any other error (the client gets the node's own answer).
        if (a === b || !isRangeRefusal(r.reply.tail)) return r;
        halvings++;
        chunk = Math.min(chunk, Math.max(1, Math.floor((b - a + 1) / 2)));
        queue.unshift([a, b]);
        return undefined;
      }
      if (r.error === GatewayError.UpstreamBusy && inFlight > 0) {
        // Every node's heavy-call share is taken, partly by this split's own sub-calls: wait for one of them
        // rather than fail, and send no more at once than are in flight now.
        queue.unshift([a, b]);
        limit = inFlight;
        return undefined;
      }
      return r;
    };

    const settle = (a: number, b: number, r: CallResult): void => {
      inFlight--;
      if (done) return;
      const failure = take(a, b, r);
      if (failure !== undefined) finish(failure);
      else pump();
    };

    const pump = (): void => {
      while (!done && inFlight < limit && queue.length > 0) {
        const range = queue[0]!;
        const a = range[0];
        const b = Math.min(range[1], a + chunk - 1);
        if (b === range[1]) queue.shift();
        else range[0] = b + 1;
        inFlight++;
        subCalls++;
        void o.send(split.params(a, b)).then(
          (r) => settle(a, b, r),
          () => settle(a, b, { ok: false, error: GatewayError.Internal }),
        );
      }
      if (!done && inFlight === 0 && queue.length === 0) finish(merged(pieces));
    };

    pump();
  });
}

function merged(pieces: { from: number; items: string }[]): CallResult {
  pieces.sort((x, y) => x.from - y.from);
  const body = pieces.map((p) => p.items).join(",");
  const reply: Reply = {
    tail: `${RESULT_ARRAY}${body}]}`,
    kind: ReplyKind.Result,
    category: ErrorCategory.Success,
  };
  return { ok: true, reply };
}
