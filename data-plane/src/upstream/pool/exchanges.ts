import type { ErrorRow } from "../../../../shared/src/jsonrpc/errors";
import type { RpcCall } from "../../rpc/parse";
import { AT_HEAD, type Need } from "../capabilities";
import { hedgeable } from "../hedge";
import { type CallResult, type Reply, ReplyKind } from "../reply";
import { ExchangeKind, exchangeFailureRow, INVALID_REPLY, type Upstream } from "../upstream";
import type { ExchangeBook } from "./booking";
import type { PoolClock } from "./clock";
import type { EmptyRetry } from "./empty-retry";
import type { Failover } from "./failover";
import { readVerbatimReply, VerbatimRefusal, type VerbatimReply } from "./verbatim-reply";
import {
  batchBody,
  type IdSequence,
  isHeavy,
  NOT_BAD,
  type OutgoingCall,
  parseBatchReply,
  REFUSED,
  singleBody,
  singleCheck,
} from "./wire";

/**
 * The shapes of exchange the pool sends: one call (with failover, or to one node alone), a batch of
 * calls under the pool's own ids, and a client's batch as its own text (verbatim). Each reads the
 * node's answer, retries a null a lagging node gave (EmptyRetry), and notes a node that takes no batches.
 */
export class PoolExchanges {
  /** Set once a node answered a batch with a single error: coalescing is off for this network from then on. */
  batchesRefused = false;

  constructor(
    private readonly failover: Failover,
    private readonly emptyRetry: EmptyRetry,
    private readonly book: ExchangeBook,
    private readonly ids: IdSequence,
    private readonly clock: PoolClock,
  ) {}

  /** One call with failover (`first`: the node to try first), its null retried (EmptyRetry). Never throws. */
  async single(
    c: OutgoingCall,
    paramsJson: string | undefined,
    need: Need | undefined,
    first?: Upstream,
  ): Promise<CallResult> {
    const gid = this.ids.take(1);
    const r = await this.failover.exchange(
      singleBody(gid, c, paramsJson),
      first,
      singleCheck(gid),
      isHeavy(c.method) ? ExchangeKind.Heavy : ExchangeKind.Light,
      need,
      1,
      hedgeable(c.method),
      c.span?.traceparent,
    );
    if (!r.ok) return r;
    const reply = r.value;
    if (reply.kind === ReplyKind.NullResult) {
      const again = this.emptyRetry.retry(c, paramsJson, reply, r.upstream);
      if (again !== undefined) return again;
    }
    return { ok: true, reply };
  }

  /**
   * Sends one call to `u` alone: no failover, no coalescing, no hedge, booked as any exchange (metrics,
   * back-off, probe after a timeout). Never throws.
   */
  async on(u: Upstream, c: OutgoingCall): Promise<CallResult> {
    const gid = this.ids.take(1);
    const start = this.clock.monotonic();
    const kind = isHeavy(c.method) ? ExchangeKind.Heavy : ExchangeKind.Light;
    const res = await u.exchange(singleBody(gid, c, undefined), kind, singleCheck(gid));
    const failure = this.book.book(u, res, start);
    if (failure !== undefined) return { ok: false, error: exchangeFailureRow(failure, u) };
    return { ok: true, reply: (res as { value: Reply }).value };
  }

  /**
   * Sends `calls` as one upstream batch with failover (`first`: the node to try first), results in call
   * order; a null answer is retried as for a single call. A failed exchange fails every call with its row.
   */
  async chunk(
    calls: readonly OutgoingCall[],
    paramsJson?: readonly (string | undefined)[],
    first?: Upstream,
    need?: Need,
    traceparent?: string,
  ): Promise<CallResult[]> {
    const base = this.ids.take(calls.length);
    const body = batchBody(base, calls, paramsJson);
    let kind: ExchangeKind = ExchangeKind.Light;
    // A copy of the batch may go to a second node only when every call in it may (hedge.ts).
    let hedge = true;
    for (const c of calls) {
      if (isHeavy(c.method)) kind = ExchangeKind.Heavy;
      if (hedge && !hedgeable(c.method)) hedge = false;
    }
    const r = await this.failover.exchange(
      body,
      first,
      (reply) => {
        const replies = parseBatchReply(reply.text, base, calls.length);
        if (replies === undefined) return INVALID_REPLY;
        if (replies !== REFUSED) return replies;
        // A healthy node that does not take batches: no penalty; stop coalescing for this network.
        this.batchesRefused = true;
        return NOT_BAD;
      },
      kind,
      need,
      calls.length,
      hedge,
      traceparent,
    );
    if (!r.ok) {
      const error = r.error;
      return calls.map(() => ({ ok: false as const, error }));
    }
    const results = r.value;
    let retries: Promise<void>[] | undefined;
    for (let i = 0; i < results.length; i++) {
      const e = results[i]!;
      if (!e.ok || e.reply.kind !== ReplyKind.NullResult) continue;
      const again = this.emptyRetry.retry(calls[i]!, paramsJson?.[i], e.reply, r.upstream);
      if (again === undefined) continue;
      const settled = again.then((x) => {
        results[i] = x;
      });
      if (retries === undefined) retries = [settled];
      else retries.push(settled);
    }
    if (retries !== undefined) await Promise.all(retries);
    return results;
  }

  /**
   * Forwards a client batch as its own text (forward/verbatim.ts: the caller checked it may, and that no
   * call is handled on its own: NetworkPool.sendsApart) to one upstream, with failover like any exchange;
   * the node's answer text comes back with each call's category. `text` may be its UTF-8 bytes (sent as
   * they are, without encoding a string). It prefers an upstream at the served head as a head read does
   * (whether its calls read the head is not looked up per call: nodes at the head are the usual case).
   */
  verbatim(
    text: string | Uint8Array,
    calls: readonly RpcCall[],
    traceparent?: string,
  ): Promise<{ ok: true; value: VerbatimReply } | { ok: false; error: ErrorRow }> {
    let kind: ExchangeKind = ExchangeKind.Light;
    let hedge = true;
    let method: string | undefined;
    for (const c of calls) {
      if (c.method === method) continue; // a run of one method: looked up once
      method = c.method;
      if (isHeavy(method)) kind = ExchangeKind.Heavy;
      if (!hedgeable(method)) hedge = false;
    }
    return this.failover.exchange(
      text,
      undefined,
      (reply) => {
        const v = readVerbatimReply(reply, calls);
        if (v === VerbatimRefusal.Invalid) return INVALID_REPLY;
        if (v !== VerbatimRefusal.BatchesRefused) return v;
        // As in chunk: a healthy node that does not take batches; no penalty, no more coalescing.
        this.batchesRefused = true;
        return NOT_BAD;
      },
      kind,
      AT_HEAD,
      calls.length,
      hedge,
      traceparent,
    );
  }
}
