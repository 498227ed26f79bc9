import type { Need } from "../capabilities";
import { HedgeBudget, type HedgeOptions, hedgeDelayMs } from "../hedge";
import type {
  ExchangeControl,
  ExchangeFailure,
  ExchangeKind,
  ExchangeResult,
  ReplyBody,
  Upstream,
} from "../upstream";
import type { ExchangeBook } from "./booking";
import type { PoolClock } from "./clock";
import type { PoolMembership } from "./membership";
import type { PoolMetricHooks } from "./metric-hooks";
import type { Selector } from "./selector";

/** Hedgeable exchanges between two computations of the best healthy upstream's p95 (the hedge delay). */
const P95_EVERY = 32;

/** Failures that every upstream would share (the request's size, the process's buffers): no failover. */
export function final(f: ExchangeFailure): boolean {
  return f === "too_large" || f === "refused" || f === "buffer_full";
}

/** How a hedged exchange ended (see Hedger.exchange). */
export interface HedgeEnd {
  /** undefined: `value` is a usable answer from `upstream`. */
  readonly failure: ExchangeFailure | undefined;
  readonly value: unknown;
  /** The node whose outcome this is (the winner, or the last one to fail). */
  readonly upstream: Upstream;
  /** The other node when a copy was sent (also tried, when both failed). */
  readonly other: Upstream | undefined;
}

/**
 * Hedged reads (HEDGE_*; see hedge.ts): an attempt that has not answered within the hedge delay gets a
 * copy on a second node, within the HEDGE_MAX_PERCENT budget of this network's hedgeable exchanges.
 */
export class Hedger {
  /** HEDGE_MAX_PERCENT of this network's hedgeable exchanges. */
  private readonly budget: HedgeBudget;
  /** The lowest p95 among selectable upstreams (ms, -1 = none known), recomputed every P95_EVERY hedgeable exchanges. */
  private bestP95Ms = -1;
  private sinceBestP95 = P95_EVERY;

  constructor(
    private readonly opts: HedgeOptions,
    private readonly members: PoolMembership,
    private readonly selector: Selector,
    private readonly book: ExchangeBook,
    private readonly hooks: PoolMetricHooks,
    private readonly clock: PoolClock,
  ) {
    this.budget = new HedgeBudget(opts.maxPercent);
  }

  /**
   * One attempt of a hedgeable exchange: `body` goes to `u`; if no answer has come after the hedge delay
   * (the lower of u's and the network's p95, within HEDGE_MIN_DELAY_MS..HEDGE_MAX_DELAY_MS; the maximum
   * while neither is known: hedge.ts hedgeDelayMs), a copy goes to another selectable upstream (not `u`,
   * none of `tried`), within the HEDGE_MAX_PERCENT budget. The first usable answer (or a failure every
   * node would share, see `final`) ends it and cancels the other exchange (Upstream.exchange control:
   * aborted, settled as `cancelled`, which counts neither toward the breaker nor as an error). A failure
   * of one waits for the other.
   *
   * Hedges are counted by outcome: `won` (the copy's answer was used), `lost` (it was not: the first node
   * answered first, or the copy failed), `capped` (the delay passed but the budget was spent). The caller
   * counts nothing per copy: the call is one call for the tenant whichever node answers.
   */
  exchange(
    u: Upstream,
    body: string | Uint8Array,
    parse: (reply: ReplyBody) => unknown,
    kind: ExchangeKind,
    tried: readonly Upstream[] | undefined,
    need: Need | undefined,
    elements: number,
    traceparent: string | undefined,
  ): Promise<HedgeEnd> {
    this.budget.earn();
    if (++this.sinceBestP95 >= P95_EVERY) this.updateBestP95();
    const clock = this.clock;
    return new Promise<HedgeEnd>((resolve) => {
      const primary: ExchangeControl = {};
      let copy: ExchangeControl | undefined;
      let v: Upstream | undefined;
      let pending = 1;
      let ended = false;
      let timer: unknown;
      const settleOne = (who: Upstream, isCopy: boolean, res: ExchangeResult<unknown>, start: number) => {
        const failure = this.book.book(who, res, start);
        pending--;
        if (ended) return;
        const done = failure === undefined || final(failure);
        if (!done && pending > 0) return;
        ended = true;
        if (timer !== undefined) clock.clearTimeout(timer);
        if (done) (isCopy ? primary : copy)?.exchange?.cancel();
        if (v !== undefined) this.hooks.hedge(isCopy && failure === undefined ? "won" : "lost");
        resolve({
          failure,
          value: res.ok ? res.value : undefined,
          upstream: who,
          other: v === undefined ? undefined : isCopy ? u : v,
        });
      };
      const start = clock.monotonic();
      void u.exchange(body, kind, parse, primary, traceparent).then((r) => settleOne(u, false, r, start));
      const sendCopy = () => {
        if (ended) return;
        // The copy goes where the call could go (capabilities: need), and spends that node's budget.
        const target = this.selector.select(tried === undefined ? [u] : [u, ...tried], false, need);
        if (target === undefined) return;
        if (!this.budget.take()) {
          this.hooks.hedge("capped");
          return;
        }
        if (target.caps.maxRequestsPerSecond !== 0 && target.caps.spend(elements, clock.now())) {
          this.hooks.overBudget(target.id, elements);
        }
        v = target;
        pending++;
        copy = {};
        const copyStart = clock.monotonic();
        void target
          .exchange(body, kind, parse, copy, traceparent)
          .then((r) => settleOne(target, true, r, copyStart));
      };
      // The copy is decided in the check phase, after the poll phase: timers run before I/O in an event
      // loop turn, so after a stall (GC, a busy turn) every expired delay would fire before the answers
      // that arrived meanwhile are read, and send copies of calls already answered.
      timer = clock.setTimeout(
        () => {
          timer = undefined;
          if (!ended) clock.setImmediate(sendCopy);
        },
        hedgeDelayMs(this.bestP95Ms, this.opts),
      );
    });
  }

  /** The best p95 among the upstreams a call could go to now (see hedgeDelayMs). */
  private updateBestP95(): void {
    this.sinceBestP95 = 0;
    const now = this.clock.now();
    const head = this.selector.bestHead();
    let min = -1;
    for (const u of this.members.upstreams) {
      if (!this.selector.selectable(u, now, head)) continue;
      const p = u.latency.p95();
      if (p >= 0 && (min < 0 || p < min)) min = p;
    }
    this.bestP95Ms = min;
  }
}
