import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import type { RpcCall } from "../rpc/parse";
import type { NetworkPool } from "../upstream/network-pool";
import { type Reply, ReplyKind } from "../upstream/reply";

/**
 * A head that never goes back (docs/contracts.md): behind one URL, nodes a block or two apart would
 * answer `eth_blockNumber` and `eth_getBlockByNumber("latest")` with whichever head the chosen node has,
 * so two calls in a row could go backwards. The gateway serves them at the pool's served head
 * (NetworkPool.servedHead, which never decreases), as proxyd pins `latest`:
 * - `eth_blockNumber` is answered from the served head, without an upstream call;
 * - `eth_getBlockByNumber("latest", ...)` is sent as `eth_getBlockByNumber("0x<served head>", ...)`: a
 *   node that has not got that block answers null, which the pool asks again on a node whose head has it
 *   (NetworkPool.retryEmpty).
 * EVM networks only; other calls at `latest` are routed as before (docs/contracts.md says so).
 */

/** The gateway's own answer to `call` at the served head, or undefined to forward it. */
export function servedHeadReply(call: RpcCall, pool: NetworkPool): Reply | undefined {
  if (call.method !== "eth_blockNumber" || pool.record.protocol !== "EVM") return undefined;
  const head = pool.servedHead();
  if (head < 0) return undefined;
  return {
    tail: `,"result":"0x${head.toString(16)}"}`,
    kind: ReplyKind.Result,
    category: ErrorCategory.Success,
  };
}

/** `call` with a `latest` block tag pinned to the served head (see above); the call itself otherwise. */
export function atServedHead(call: RpcCall, pool: NetworkPool): RpcCall {
  if (call.method !== "eth_getBlockByNumber" || pool.record.protocol !== "EVM") return call;
  const params = call.params;
  if (!Array.isArray(params) || params[0] !== "latest") return call;
  const head = pool.servedHead();
  if (head < 0) return call;
  const pinned = params.slice();
  pinned[0] = `0x${head.toString(16)}`;
  return { method: call.method, params: pinned, idText: call.idText };
}
