import { givesHeadHint } from "../cache/policy";
import { hasLogsRange } from "../limits/logs-range";
import type { RpcCall } from "../rpc/parse";

// The node's answer to such a batch is read by the upstream pool (upstream/pool/verbatim-reply.ts).
export { readVerbatimReply, VerbatimRefusal, type VerbatimReply } from "../upstream/pool/verbatim-reply";

/**
 * Verbatim batches: a client batch whose every element is forwarded goes upstream as the client's own
 * text, and the node's answer comes back to the client as the node's own bytes. The gateway still validates
 * the batch (rpc/parse.ts scans it as strictly as JSON.parse), polices and counts every element, and
 * reads each element's category from the answer; it skips what costs most per element on the usual path:
 * re-serialising each call with a rewritten id, parsing the answer and re-serialising each result. Ids
 * are the client's own, which is safe because each upstream exchange is its own HTTP request: no other
 * client's ids share it.
 *
 * What the node receives must be what the gateway checked: the parser lets a text go verbatim only when
 * no element repeats a member (JSON.parse keeps the last of repeated keys, a node may keep the first) and
 * every id is echoed as written (ParseResult `verbatim`); the transports pass the text to forwardPlan
 * only then. What is left to check here is per call.
 */

/** Whether a batch of `calls` (every element valid and forwarded, its text `verbatim`) may go upstream as it is. */
export function verbatimEligible(calls: readonly RpcCall[]): boolean {
  const n = calls.length;
  let answered = 0;
  let method: string | undefined;
  for (let i = 0; i < n; i++) {
    const c = calls[i]!;
    // Their answers feed the head tracking (and empty-answer handling), read per element on the usual path.
    if (c.method !== method) {
      method = c.method;
      if (givesHeadHint(method)) return false;
      // The range check reads the filter's fromBlock / toBlock / blockHash as JSON.parse does (the last of
      // repeated keys); a node that keeps the first could be asked a wider range than was checked, so
      // these are re-serialised from what was checked.
      if (hasLogsRange(method)) return false;
    }
    const id = c.idText;
    if (id !== undefined) {
      if (!portableId(id)) return false;
      answered++;
    }
  }
  // A batch of notifications only gets no answer at all, which is no JSON-RPC batch answer.
  return answered > 0;
}

/**
 * Ids every node takes as they are: the usual path sends its own small integers, so the client's ids must
 * be ones no node refuses or rewrites (jsonrpsee nodes, Substrate's and anvil, take only u64 numbers,
 * strings and null): null, an integer of at most 15 digits, or a string without escapes.
 */
function portableId(id: string): boolean {
  const c = id.charCodeAt(0);
  if (c === 0x22 /* " */) return !id.includes("\\");
  if (id === "null") return true;
  if (id.length > 15) return false;
  for (let i = 0; i < id.length; i++) {
    const d = id.charCodeAt(i);
    if (d < 0x30 || d > 0x39) return false;
  }
  return true;
}
