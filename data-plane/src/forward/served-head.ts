import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import { headHint } from "../cache/policy";
import type { RpcCall } from "../rpc/parse";
import type { NetworkPool } from "../upstream/network-pool";
import { type CallResult, type Reply, ReplyKind } from "../upstream/reply";

/**
 * A head that never goes back (docs/contracts.md): behind one URL, nodes a block or two apart would
 * answer `eth_blockNumber` and `eth_getBlockByNumber("latest")` with whichever head the chosen node has,
 * so two calls in a row could go backwards. Each such answer is checked against the pool's served head
 * (NetworkPool.servedHead, which never decreases) after it raised it:
 * - an `eth_blockNumber` below it (or above it by more than the pool believes) is answered with the served
 *   head instead;
 * - a `latest` block below it (or so far above) is asked again as `eth_getBlockByNumber("0x<served head>", ...)` (a node
 *   that has not got that block answers null, which the pool asks again on a node whose head has it).
 * An answer at or above it stands, so a node ahead of the gateway's health checks (a development chain
 * mining on demand) is served at once. EVM networks only; other calls at `latest` are routed as before.
 */

/** What to do with `reply`, the answer to `call`: undefined (it stands), the Reply to send instead, or the call to send instead. */
export function atServedHead(call: RpcCall, pool: NetworkPool, reply: Reply): Reply | RpcCall | undefined {
  const method = call.method;
  const latest = method === "eth_getBlockByNumber" && isLatest(call.params);
  if ((method !== "eth_blockNumber" && !latest) || reply.kind !== ReplyKind.Result) return undefined;
  if (pool.record.protocol !== "EVM") return undefined;
  const n = headHint(method, reply.tail);
  if (n === undefined) return undefined;
  // Raised by it unless it is implausibly far above the nodes' heads (NetworkPool.observeHead): then it
  // is replaced too, as a head the pool does not believe.
  pool.observeHead(n);
  const served = pool.servedHead();
  if (n === served) return undefined;
  const hex = `0x${served.toString(16)}`;
  if (!latest)
    return { tail: `,"result":"${hex}"}`, kind: ReplyKind.Result, category: ErrorCategory.Success };
  const pinned = (call.params as unknown[]).slice();
  pinned[0] = hex;
  return { method, params: pinned, idText: call.idText };
}

/** Whether `result` (from atServedHead) is a call to send instead. */
export function isCall(result: Reply | RpcCall): result is RpcCall {
  return (result as RpcCall).method !== undefined;
}

function isLatest(params: unknown): boolean {
  return Array.isArray(params) && params[0] === "latest";
}

/** Feeds a result's head hint (eth_blockNumber, receipts, blocks) to the pool's head tracking. */
export function observeHead(pool: NetworkPool, method: string, r: CallResult): void {
  if (!r.ok || r.reply.kind !== ReplyKind.Result) return;
  const n = headHint(method, r.reply.tail);
  if (n !== undefined) pool.observeHead(n);
}
