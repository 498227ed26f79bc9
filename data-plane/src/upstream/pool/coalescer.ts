import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { mergeNeeds, type Need, restricts } from "../capabilities";
import type { CallResult } from "../reply";
import type { PoolClock } from "./clock";
import type { PoolExchanges } from "./exchanges";
import { isHeavy, type OutgoingCall } from "./wire";

/**
 * Methods never coalesced into an upstream batch: sends (keep their exchange to themselves) and answers
 * that can be large (one big reply would delay every call batched with it, and nodes cap batch response
 * sizes).
 */
const NOT_COALESCED = new Set([
  "eth_sendRawTransaction",
  "eth_getLogs",
  "eth_getBlockReceipts",
  "eth_getBlockByNumber",
  "eth_getBlockByHash",
  "eth_getFilterChanges",
  "eth_getFilterLogs",
  "chain_getBlock",
  "state_getMetadata",
  "author_submitExtrinsic",
]);

export function coalescible(method: string): boolean {
  return !NOT_COALESCED.has(method) && !isHeavy(method);
}

/**
 * Coalescing bounds, in bytes of JSON: a call whose params are larger goes out by itself, and a coalesced
 * batch is cut before its body would pass COALESCE_MAX_BODY_BYTES. Nodes cap request bodies (geth: 5 MiB,
 * answered 413): one client's big calls must not make other clients' calls share such a refusal.
 */
export const COALESCE_MAX_PARAMS_BYTES = 64 * 1024;
export const COALESCE_MAX_BODY_BYTES = 1024 * 1024;
/** Bytes of one batch element besides its params (envelope, id, method name, comma). */
const ELEMENT_OVERHEAD_BYTES = 64;

const NO_CAPABLE_REASON = GatewayError.NoCapableUpstream.reason;

/** What the coalescer sends through (PoolExchanges). */
export type CoalescerExchanges = Pick<PoolExchanges, "single" | "chunk" | "batchesRefused">;

interface Queued {
  readonly call: OutgoingCall;
  /** The params serialised (undefined when the call has none). */
  readonly paramsJson: string | undefined;
  /** What the upstream must serve (undefined: anything does). */
  readonly need: Need | undefined;
  readonly resolve: (r: CallResult) => void;
}

/**
 * Coalescing: under load, single calls that arrive in the same event-loop turn are sent as one upstream
 * JSON-RPC batch (ids rewritten, answers split back per call): one upstream exchange instead of many,
 * which is where most of the per-request cost goes. A lone call goes out by itself at once.
 */
export class Coalescer {
  private queue: Queued[] = [];
  private flushScheduled = false;

  constructor(
    /** Single calls arriving in the same event-loop turn are sent as one upstream batch of up to this many; 1 = off. */
    private readonly coalesceMax: number,
    private readonly exchanges: CoalescerExchanges,
    private readonly clock: PoolClock,
  ) {}

  /** Sends one call: queued for this turn's upstream batch when it may be coalesced, else at once. */
  route(c: OutgoingCall, paramsJson: string | undefined, need: Need | undefined): Promise<CallResult> {
    if (this.coalesceMax <= 1 || this.exchanges.batchesRefused || !coalescible(c.method)) {
      return this.exchanges.single(c, paramsJson, need);
    }
    // Serialised here rather than in the exchange: the size decides whether the call is coalesced.
    const pj = paramsJson ?? (c.params === undefined ? undefined : JSON.stringify(c.params));
    if (pj !== undefined && pj.length > COALESCE_MAX_PARAMS_BYTES) return this.exchanges.single(c, pj, need);
    return new Promise<CallResult>((resolve) => {
      this.queue.push({ call: c, paramsJson: pj, need, resolve });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        this.clock.setImmediate(this.flush);
      }
    });
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    const q = this.queue;
    this.queue = [];
    let needy = false;
    for (const e of q) if (e.need !== undefined && restricts(e.need)) needy = true;
    if (!needy) {
      this.sendQueued(q);
      return;
    }
    // Calls with a need that restricts their upstream batched apart, so that the others still go to any
    // upstream (head reads among them: a preference, which the batch takes on).
    this.sendQueued(q.filter((e) => e.need === undefined || !restricts(e.need)));
    this.sendQueued(q.filter((e) => e.need !== undefined && restricts(e.need)));
  };

  private sendQueued(q: Queued[]): void {
    if (q.length === 0) return;
    if (q.length === 1) {
      const e = q[0]!;
      void this.exchanges.single(e.call, e.paramsJson, e.need).then(e.resolve);
      return;
    }
    // Parts of at most coalesceMax calls and COALESCE_MAX_BODY_BYTES (string length: bytes for ASCII JSON,
    // a bound to within the UTF-8 expansion otherwise).
    const max = this.coalesceMax;
    let start = 0;
    let bytes = 0;
    for (let i = 0; i < q.length; i++) {
      const e = q[i]!;
      const size = ELEMENT_OVERHEAD_BYTES + e.call.method.length + (e.paramsJson?.length ?? 0);
      if (i > start && (i - start >= max || bytes + size > COALESCE_MAX_BODY_BYTES)) {
        this.sendPart(q, start, i);
        start = i;
        bytes = 0;
      }
      bytes += size;
    }
    this.sendPart(q, start, q.length);
  }

  private sendPart(q: Queued[], start: number, end: number): void {
    if (end - start === 1) {
      const e = q[start]!;
      void this.exchanges.single(e.call, e.paramsJson, e.need).then(e.resolve);
    } else {
      void this.sendCoalesced(q.slice(start, end));
    }
  }

  private async sendCoalesced(part: Queued[]): Promise<void> {
    let need: Need | undefined;
    // One header per exchange: the first sampled call's traceparent stands for every call in the batch.
    let sent: string | undefined;
    for (const e of part) {
      need = mergeNeeds(need, e.need);
      if (sent === undefined) sent = e.call.span?.traceparent;
    }
    const results = await this.exchanges.chunk(
      part.map((e) => e.call),
      part.map((e) => e.paramsJson),
      undefined,
      need,
      sent,
    );
    // A node that does not take batches, a combined answer over the size cap, or the combined request
    // refused (413: each of the calls may fit): send these calls one by one instead, so only a call whose
    // own answer or request is too large fails. Likewise when no upstream serves every call's need at
    // once (an archive node without trace_*, a trace node without old state): each finds its own.
    const first = results[0];
    if (
      results.every((r) => !r.ok && r.error === GatewayError.UpstreamBadResponse) ||
      (first?.ok === false &&
        (first.error.reason === GatewayError.UpstreamResponseTooLarge.reason ||
          first.error === GatewayError.UpstreamRequestRefused ||
          first.error.reason === NO_CAPABLE_REASON))
    ) {
      await Promise.all(part.map((e) => this.exchanges.single(e.call, e.paramsJson, e.need).then(e.resolve)));
      return;
    }
    if (sent !== undefined) for (const e of part) e.call.span?.coalesced(part.length, sent);
    for (let j = 0; j < part.length; j++) part[j]!.resolve(results[j]!);
  }
}
