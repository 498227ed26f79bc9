import { type ErrorRow, GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { Need } from "../capabilities";
import {
  type ExchangeFailure,
  ExchangeKind,
  exchangeFailureRow,
  type INVALID_REPLY,
  type ReplyBody,
  type Upstream,
} from "../upstream";
import type { ExchangeBook } from "./booking";
import type { PoolClock } from "./clock";
import { final, type Hedger } from "./hedger";
import type { PoolMembership } from "./membership";
import type { PoolMetricHooks } from "./metric-hooks";
import type { Selector } from "./selector";
import type { NOT_BAD, RATE_LIMITED } from "./wire";

/** How an upstream exchange of Failover.exchange ended (`upstream`: the node whose answer it is). */
export type Outcome<T> = { ok: true; value: T; upstream: Upstream } | { ok: false; error: ErrorRow };

/** The row after every attempt failed: no upstream could be tried, else the last failure's. */
function failureRow(f: ExchangeFailure | undefined, u: Upstream | undefined): ErrorRow {
  if (f === undefined || u === undefined) return GatewayError.NoUpstream;
  return exchangeFailureRow(f, u);
}

/** Failover: one exchange moved from node to node until one answers (with hedged copies when on). */
export class Failover {
  constructor(
    private readonly opts: { readonly maxAttempts: number },
    private readonly members: PoolMembership,
    private readonly selector: Selector,
    private readonly book: ExchangeBook,
    /** Hedged reads when on (HEDGE_ENABLED), else undefined. */
    private readonly hedger: Hedger | undefined,
    private readonly hooks: PoolMetricHooks,
    private readonly clock: PoolClock,
  ) {}

  /**
   * Sends `body` to `first` (else the best upstream), moving to another healthy upstream on a failed
   * exchange or an unusable reply, up to UPSTREAM_MAX_ATTEMPTS upstreams. `parse` turns the reply text
   * into the answer, or returns INVALID_REPLY (not JSON-RPC: the exchange settles as a breaker failure,
   * never a success), NOT_BAD (unusable here, but no fault of the upstream's) or RATE_LIMITED (the node's
   * JSON-RPC "slow down": backed off). It runs before the upstream settles the exchange.
   *
   * A timeout makes the pool probe that node (a node that also times out on eth_blockNumber is sick) and
   * is failed over only for a Light call; a Heavy call's timeout is answered 504 at once. A 429 backs the
   * node off (Upstream.backOff) and moves on without a breaker count.
   *
   * Every attempt, failovers included, goes to an upstream that can serve `need` (`first` too: the
   * caller chose it with the same need); when none can, the call is refused (no_capable_upstream) before
   * anything is sent. `elements` (calls in `body`) are taken from the chosen upstream's budget.
   *
   * `hedge` (every call in the body is an idempotent read, hedge.ts): with hedging on and another node to
   * send to, an attempt that has not answered within the node's hedge delay gets a copy on a second node
   * (Hedger.exchange); at most one copy per call.
   */
  async exchange<T>(
    body: string | Uint8Array,
    first: Upstream | undefined,
    parse: (reply: ReplyBody) => T | typeof INVALID_REPLY | typeof NOT_BAD | typeof RATE_LIMITED,
    kind: ExchangeKind,
    need: Need | undefined,
    elements: number,
    hedge = false,
    /** A sampled request's traceparent, sent with every attempt and hedge copy. */
    traceparent?: string,
  ): Promise<Outcome<T>> {
    let tried: Upstream[] | undefined;
    let lastFailure: ExchangeFailure | undefined;
    /** The upstream of lastFailure. */
    let failedOn: Upstream | undefined;
    const heavy = kind === ExchangeKind.Heavy;
    const hedger = this.hedger;
    let mayHedge = hedge && hedger !== undefined && this.members.upstreams.length > 1;
    for (let attempt = 0; attempt < this.opts.maxAttempts; attempt++) {
      const u =
        attempt === 0 && first !== undefined && (!heavy || first.heavySlotFree())
          ? first
          : this.selector.select(tried, heavy, need);
      if (u === undefined) {
        if (lastFailure === undefined && need !== undefined) {
          const refusal = this.selector.capabilityRefusal(need);
          if (refusal !== undefined) return { ok: false, error: refusal };
        }
        // Healthy nodes, but their heavy-call share is taken: the light calls keep the other connections.
        if (heavy && lastFailure === undefined && this.selector.healthyCount() > 0) {
          return { ok: false, error: GatewayError.UpstreamBusy };
        }
        break;
      }
      if (u.caps.maxRequestsPerSecond !== 0 && u.caps.spend(elements, this.clock.now())) {
        // Over its budget, yet the best there was (nothing else selectable for this call).
        this.hooks.overBudget(u.id, elements);
      }
      let failure: ExchangeFailure | undefined;
      if (mayHedge) {
        const h = await hedger!.exchange(u, body, parse, kind, tried, need, elements, traceparent);
        if (h.failure === undefined) return { ok: true, value: h.value as T, upstream: h.upstream };
        failure = h.failure;
        failedOn = h.upstream;
        if (h.other !== undefined) {
          mayHedge = false;
          if (tried === undefined) tried = [h.other];
          else tried.push(h.other);
        }
      } else {
        const start = this.clock.monotonic();
        const res = await u.exchange(body, kind, parse, undefined, traceparent);
        failure = this.book.book(u, res, start);
        if (failure === undefined) return { ok: true, value: (res as { value: T }).value, upstream: u };
        failedOn = u;
      }
      lastFailure = failure;
      // Every upstream would get the same request and send the same answer: no failover (which would
      // hand the client's big request to each node in turn); the node stays healthy. buffer_full: the
      // process-wide budget is spent, so another node's answer would not fit either.
      if (final(failure)) return { ok: false, error: exchangeFailureRow(failure, failedOn) };
      if (failure === "timeout" && heavy) break;
      if (tried === undefined) tried = [failedOn];
      else tried.push(failedOn);
    }
    return { ok: false, error: failureRow(lastFailure, failedOn) };
  }
}
