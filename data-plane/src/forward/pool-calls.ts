import { blake2b } from "@noble/hashes/blake2b";
import { keccak_256 } from "@noble/hashes/sha3";
import { FILTER_METHODS, type GatewayFilters, replyValue, resultReply } from "../filters/gateway-filters";
import type { Clock } from "../ratelimit/clock";
import type { RpcCall } from "../rpc/parse";
import type { NetworkPool } from "../upstream/network-pool";
import { type CallResult, ReplyKind } from "../upstream/reply";
import type { Upstream } from "../upstream/upstream";

/**
 * Calls whose right answer on a pool of nodes is not any one node's (issue: answers a client can trust
 * from a pool of nodes), answered here by asking the pool the right way, for HTTP (single and batch) and
 * WebSocket alike, through the forwarding core (forward.ts) after every check a call gets:
 * - filters (eth_newFilter & co.): kept by the gateway (filters/gateway-filters.ts);
 * - `eth_getTransactionCount(addr, "pending")` and Substrate's `system_accountNextIndex`: the highest
 *   value among the healthy upstreams (a node behind, or one that missed a transaction, answers lower;
 *   a nonce from it is one the network has used);
 * - `eth_sendRawTransaction` / `author_submitExtrinsic`: sent to SEND_BROADCAST_UPSTREAMS healthy
 *   upstreams at once (0 = all); the first acceptance answers; "already known" (and "nonce too low" for a
 *   transaction the node has under that hash; Substrate's 1013 "Transaction Already Imported") count as
 *   acceptance;
 * - `eth_getTransactionByHash` / `eth_getTransactionReceipt` of a transaction sent through this thread
 *   in the last SENT_MEMORY_MS: asked first of an upstream that accepted it.
 * Only on networks with more than one upstream (one node is its own truth) and, for filters, only EVM.
 */

/** How long a sent transaction's accepting upstreams are remembered (reading one's own write). */
export const SENT_MEMORY_MS = 120_000;
/** Sent transactions remembered at most (the oldest forgotten first). */
const SENT_MEMORY_MAX = 10_000;

const SENDS = new Set(["eth_sendRawTransaction", "author_submitExtrinsic"]);
const OWN_READS = new Set(["eth_getTransactionByHash", "eth_getTransactionReceipt"]);

/** A node's error that says it has this very transaction already (geth, erigon, nethermind, besu; Substrate 1013). */
const ALREADY_KNOWN = /already known|known transaction|alreadyknown|already imported|already in pool/i;
/** A node's error that says the nonce is used: the same transaction mined already, or another one (checked by hash). */
const NONCE_TOO_LOW = /nonce too low|nonce is too low|oldnonce/i;

export interface PoolCallsOptions {
  readonly filters?: GatewayFilters;
  /** SEND_BROADCAST_UPSTREAMS: 0 = every healthy upstream. */
  readonly broadcastUpstreams: number;
  readonly clock: Clock;
}

export class PoolCalls {
  /** Transaction hash (lowercase) -> the ids of the upstreams that accepted it, and when it was sent. */
  private readonly sent = new Map<string, { ids: string[]; atMs: number }>();

  constructor(private readonly opts: PoolCallsOptions) {}

  /** Whether `call` on `pool` is answered here rather than by one upstream. */
  handles(pool: NetworkPool, call: RpcCall): boolean {
    const m = call.method;
    const evm = pool.record.protocol === "EVM";
    if (evm && FILTER_METHODS.has(m)) return this.opts.filters !== undefined;
    if (pool.record.upstreams.length < 2) return false;
    if (SENDS.has(m)) return true;
    if (m === "system_accountNextIndex") return !evm;
    if (m === "eth_getTransactionCount") return evm && paramAt(call, 1) === "pending";
    if (OWN_READS.has(m) && this.sent.size > 0) {
      const hash = paramAt(call, 0);
      return typeof hash === "string" && this.remembered(hash) !== undefined;
    }
    return false;
  }

  /** Answers a call `handles` claimed, for `tenant` (the app's limit id: filters are the app's). Never throws. */
  answer(pool: NetworkPool, tenant: string, call: RpcCall): Promise<CallResult> {
    const m = call.method;
    if (FILTER_METHODS.has(m) && this.opts.filters !== undefined)
      return this.opts.filters.answer(pool, tenant, call);
    if (SENDS.has(m)) return this.broadcast(pool, call);
    if (OWN_READS.has(m)) return this.ownRead(pool, call);
    return this.highest(pool, call);
  }

  /** The highest count among the healthy upstreams' answers (hex quantity on EVM, a number on Substrate). */
  private async highest(pool: NetworkPool, call: RpcCall): Promise<CallResult> {
    const ups = pool.selectableAt(-1);
    if (ups.length < 2) return pool.call(call);
    const results = await Promise.all(ups.map((u) => pool.callOn(u, call)));
    let best: CallResult | undefined;
    let bestValue = -1n;
    for (const r of results) {
      if (!r.ok || r.reply.kind !== ReplyKind.Result) continue;
      const v = count(replyValue(r.reply));
      if (v !== undefined && v > bestValue) {
        best = r;
        bestValue = v;
      }
    }
    // No node gave a count: the first node's answer (its error) or failure, as a single call would get.
    return best ?? results.find((r) => r.ok) ?? results[0]!;
  }

  /**
   * Sends to SEND_BROADCAST_UPSTREAMS healthy upstreams (the pool's own pick first); answers with the
   * first acceptance, without waiting for the others (their acceptances are still remembered). When none
   * accepts: the transaction's hash if some node already has it, else the first node's error.
   */
  private broadcast(pool: NetworkPool, call: RpcCall): Promise<CallResult> {
    const all = pool.selectableAt(-1);
    if (all.length < 2) return this.sendOne(pool, call);
    const first = pool.select(undefined);
    const order = first === undefined ? all : [first, ...all.filter((u) => u !== first)];
    const n =
      this.opts.broadcastUpstreams === 0
        ? order.length
        : Math.min(this.opts.broadcastUpstreams, order.length);
    const targets = order.slice(0, n);
    const evmHash = call.method === "eth_sendRawTransaction" ? rawTxHash(paramAt(call, 0)) : undefined;
    const hash =
      evmHash ?? (call.method === "author_submitExtrinsic" ? extrinsicHash(paramAt(call, 0)) : undefined);
    return new Promise<CallResult>((resolve) => {
      let settled = false;
      let pending = targets.length;
      let firstError: CallResult | undefined;
      let firstKnown: CallResult | undefined;
      const knownOn: Upstream[] = [];
      const done = () => {
        if (--pending > 0 || settled) return;
        settled = true;
        if (knownOn.length > 0 && hash !== undefined) {
          this.remember(hash, knownOn);
          resolve({ ok: true, reply: resultReply(JSON.stringify(hash)) });
          return;
        }
        // Known to some node, but its hash not computable (params that are not hex bytes): that node's
        // answer stands; else the first refusal (a node's error before an exchange failure).
        resolve(firstKnown ?? firstError!);
      };
      for (const u of targets) {
        void this.sendTo(pool, u, call, evmHash).then((out) => {
          if (out.accepted) {
            const hash = out.r.ok ? replyValue(out.r.reply) : undefined;
            if (typeof hash === "string") this.remember(hash, [u]);
            if (!settled) {
              settled = true;
              resolve(out.r);
            }
          } else if (out.known) {
            knownOn.push(u);
            firstKnown ??= out.r;
          } else if (firstError === undefined || (!firstError.ok && out.r.ok)) {
            // A node's answer (its error) before an exchange failure: it is what the client can act on.
            firstError = out.r;
          }
          done();
        });
      }
    });
  }

  /** A send to one node: accepted (a hash), known (it has this transaction already), or refused / failed. */
  private async sendTo(
    pool: NetworkPool,
    u: Upstream,
    call: RpcCall,
    evmHash: string | undefined,
  ): Promise<{ r: CallResult; accepted: boolean; known: boolean }> {
    const r = await pool.callOn(u, call);
    if (!r.ok) return { r, accepted: false, known: false };
    if (r.reply.kind === ReplyKind.Result) return { r, accepted: true, known: false };
    if (r.reply.kind !== ReplyKind.Error) return { r, accepted: false, known: false };
    const tail = r.reply.tail;
    if (ALREADY_KNOWN.test(tail)) return { r, accepted: false, known: true };
    if (evmHash !== undefined && NONCE_TOO_LOW.test(tail)) {
      // Only when the node has this very transaction (mined, or pending): another one with that nonce is a real error.
      const has = await pool.callOn(u, { method: "eth_getTransactionByHash", params: [evmHash] });
      const known = has.ok && has.reply.kind === ReplyKind.Result;
      return { r, accepted: false, known };
    }
    return { r, accepted: false, known: false };
  }

  private async sendOne(pool: NetworkPool, call: RpcCall): Promise<CallResult> {
    const r = await pool.call(call);
    if (r.ok && r.reply.kind === ReplyKind.Result) {
      const hash = replyValue(r.reply);
      const u = pool.selectableAt(-1)[0];
      if (typeof hash === "string" && u !== undefined) this.remember(hash, [u]);
    }
    return r;
  }

  /** A lookup of a transaction sent through here: first an upstream that accepted it, then the pool. */
  private async ownRead(pool: NetworkPool, call: RpcCall): Promise<CallResult> {
    const hash = paramAt(call, 0);
    const ids = typeof hash === "string" ? this.remembered(hash) : undefined;
    const healthy = pool.selectableAt(-1);
    for (const id of ids ?? []) {
      const u = healthy.find((h) => h.id === id);
      if (u === undefined) continue;
      const r = await pool.callOn(u, call);
      if (r.ok && r.reply.kind === ReplyKind.Result) return r;
    }
    return pool.call(call);
  }

  private remember(hash: string, ups: readonly Upstream[]): void {
    const key = hash.toLowerCase();
    const now = this.opts.clock.now();
    const entry = this.sent.get(key);
    if (entry !== undefined && now - entry.atMs < SENT_MEMORY_MS) {
      for (const u of ups) if (!entry.ids.includes(u.id)) entry.ids.push(u.id);
      return;
    }
    this.sent.delete(key);
    this.sent.set(key, { ids: ups.map((u) => u.id), atMs: now });
    if (this.sent.size > SENT_MEMORY_MAX) this.sent.delete(this.sent.keys().next().value!);
  }

  private remembered(hash: string): string[] | undefined {
    const entry = this.sent.get(hash.toLowerCase());
    if (entry === undefined) return undefined;
    if (this.opts.clock.now() - entry.atMs >= SENT_MEMORY_MS) {
      this.sent.delete(hash.toLowerCase());
      return undefined;
    }
    return entry.ids;
  }
}

function paramAt(call: RpcCall, i: number): unknown {
  const p = call.params;
  return Array.isArray(p) ? p[i] : undefined;
}

/** A count answer: an EVM hex quantity or a Substrate number. */
function count(v: unknown): bigint | undefined {
  if (typeof v === "number") return Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : undefined;
  if (typeof v === "string" && /^0x[0-9a-fA-F]{1,64}$/.test(v)) return BigInt(v);
  return undefined;
}

const RAW_TX = /^0x(?:[0-9a-fA-F]{2})+$/;

/** The hash a Substrate node gives an extrinsic: 32-byte BLAKE2b of its bytes; undefined when not hex bytes. */
export function extrinsicHash(raw: unknown): string | undefined {
  if (typeof raw !== "string" || !RAW_TX.test(raw) || raw.length > 2 + 2 * 256 * 1024) return undefined;
  return `0x${Buffer.from(blake2b(Buffer.from(raw.slice(2), "hex"), { dkLen: 32 })).toString("hex")}`;
}

/** keccak256 of a signed raw EVM transaction (its hash), undefined when it is not hex bytes. */
export function rawTxHash(raw: unknown): string | undefined {
  if (typeof raw !== "string" || !RAW_TX.test(raw) || raw.length > 2 + 2 * 256 * 1024) return undefined;
  return `0x${Buffer.from(keccak_256(Buffer.from(raw.slice(2), "hex"))).toString("hex")}`;
}
