import { SYSTEM_NUMBER_KEY } from "../../../shared/src/substrate/storage-keys";
import { parseSingleReply, ReplyKind } from "./reply";
import { ExchangeKind, INVALID_REPLY, type ReplyBody, type Upstream } from "./upstream";

/**
 * The state probe: finds the oldest block whose state an upstream serves, with a few cheap reads
 * (EVM: `eth_getBalance(0x0, block)`; Substrate: `chain_getBlockHash(block)` then `state_getStorage` of
 * System::Number at that hash). A JSON-RPC error answer at a block means its state is gone ("missing
 * trie node", "header not found", anvil's "BlockOutOfRangeError", Substrate's "State already discarded"):
 * the wording differs per client, but the same read succeeds at the head.
 */

/** Whether the upstream serves the state at a block: true, false, or undefined = no verdict (stop). */
export type AskState = (block: number) => Promise<boolean | undefined>;

/** Most reads of one probe: a gallop and a bisection over 2^53 blocks stay well below it. */
const MAX_READS = 128;

/**
 * The oldest block whose state `ask` says is served, for an upstream at `head`; undefined when a read
 * gave no verdict (unreachable, throttled, or even the head's state missing). 0 when block 1's state is
 * served (a full-history node; block 0 is not asked: a hash-based geth keeps the genesis state even
 * when pruned). `guess` (the previous estimate) makes the usual case three reads: block 1, the guess,
 * the block before it. Otherwise it gallops down from the head (1, 2, 4... blocks) to the first block
 * not served, then bisects: about 2·log2(window) reads.
 */
export async function findOldestState(
  head: number,
  ask: AskState,
  guess?: number,
): Promise<number | undefined> {
  if (head < 1) return undefined;
  let reads = 0;
  const read = (b: number) => {
    reads++;
    return ask(b);
  };
  const first = await read(1);
  if (first === undefined) return undefined;
  if (first) return 0;
  /** Highest block known not served. */
  let lo = 1;
  /** Lowest block known served (0: none yet). */
  let hi = 0;
  if (guess !== undefined && guess > 1 && guess <= head) {
    const g = await read(guess);
    if (g === undefined) return undefined;
    if (g) hi = guess;
    else lo = guess;
  }
  if (hi === 0) {
    if (head <= lo) return undefined;
    const h = await read(head);
    if (!h) return undefined;
    hi = head;
  }
  for (let step = 1; hi - step > lo && reads < MAX_READS; step *= 2) {
    const r = await read(hi - step);
    if (r === undefined) return undefined;
    if (!r) {
      lo = hi - step;
      break;
    }
    hi -= step;
  }
  while (hi - lo > 1 && reads < MAX_READS) {
    const mid = lo + Math.floor((hi - lo) / 2);
    const r = await read(mid);
    if (r === undefined) return undefined;
    if (r) hi = mid;
    else lo = mid;
  }
  return hi - lo > 1 ? undefined : hi;
}

const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";

/** EVM AskState for `u`: eth_getBalance of the zero address (present on every chain, cheap) at the block. */
export function evmAsk(u: Upstream): AskState {
  return async (block) => {
    const body = `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["${ZERO_ADDRESS}","0x${block.toString(16)}"]}`;
    const r = await u.exchange(body, ExchangeKind.Capability, verdict);
    return r.ok ? r.value : undefined;
  };
}

/** Substrate AskState for `u`: the block's hash, then System::Number (every FRAME chain has it) there. */
export function substrateAsk(u: Upstream): AskState {
  return async (block) => {
    const hashReply = await u.exchange(
      `{"jsonrpc":"2.0","id":1,"method":"chain_getBlockHash","params":[${block}]}`,
      ExchangeKind.Capability,
      (body) => {
        const reply = parseSingleReply(body.text, 1);
        if (reply === undefined) return INVALID_REPLY;
        if (reply.kind !== ReplyKind.Result) return null; // null or an error: no such block here
        const v = JSON.parse(`{${reply.tail.slice(1)}`) as { result?: unknown };
        return typeof v.result === "string" ? v.result : null;
      },
    );
    if (!hashReply.ok) return undefined;
    // No hash: the node does not know the block (blocks pruned too), so nor its state.
    const hash = hashReply.value;
    if (hash === null || !/^0x[0-9a-fA-F]{64}$/.test(hash)) return false;
    const r = await u.exchange(
      `{"jsonrpc":"2.0","id":1,"method":"state_getStorage","params":["${SYSTEM_NUMBER_KEY}","${hash}"]}`,
      ExchangeKind.Capability,
      verdict,
    );
    return r.ok ? r.value : undefined;
  };
}

/** A read's verdict: a result = served; a JSON-RPC error = not served. A throttling error gives none. */
function verdict(body: ReplyBody): boolean | undefined | typeof INVALID_REPLY {
  const reply = parseSingleReply(body.text, 1);
  if (reply === undefined) return INVALID_REPLY;
  if (reply.kind !== ReplyKind.Error) return true; // null included: the state is there, the entry is not
  return /"code"\s*:\s*(-32005|429)\b|rate.?limit|too many requests/i.test(reply.tail) ? undefined : false;
}
