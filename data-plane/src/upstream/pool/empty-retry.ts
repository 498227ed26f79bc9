import { BY_HASH, emptyAnswerAsk, NOT_RETRIED } from "../empty-answer";
import { type CallResult, type Reply, ReplyKind } from "../reply";
import { ExchangeKind, type Upstream } from "../upstream";
import type { ExchangeBook } from "./booking";
import type { PoolClock } from "./clock";
import type { HeadTracker } from "./head-tracker";
import type { PoolMembership } from "./membership";
import type { PoolMetricHooks } from "./metric-hooks";
import type { Selector } from "./selector";
import { type IdSequence, type OutgoingCall, singleBody, singleCheck } from "./wire";

/**
 * Empty-answer retries: a `null` that a lagging node gives for what another node has (empty-answer.ts)
 * is asked once more of the node with the highest head before it reaches the client.
 */
export class EmptyRetry {
  constructor(
    private readonly members: PoolMembership,
    private readonly selector: Selector,
    private readonly heads: HeadTracker,
    private readonly book: ExchangeBook,
    private readonly ids: IdSequence,
    private readonly hooks: PoolMetricHooks,
    private readonly clock: PoolClock,
  ) {}

  /**
   * A `null` answer from `by` that another healthy upstream may not give (empty-answer.ts): a block number
   * at or below that upstream's head, or a hash lookup while that upstream's head is above `by`'s. The call
   * is sent once more, to the upstream with the highest head, before the null is returned (undefined: no
   * such upstream, the null stands). A lagging node's null must not reach the client as "no such block",
   * nor the cache (which keeps no nulls anyway: forward.ts store). The second answer is used when it is a
   * result; a second null, a node error or a failed exchange leave the first null.
   */
  retry(
    c: OutgoingCall,
    paramsJson: string | undefined,
    reply: Reply,
    by: Upstream,
  ): Promise<CallResult> | undefined {
    const ask = emptyAnswerAsk(c.method, c.params);
    if (ask === NOT_RETRIED) return undefined;
    const target = this.target(ask, by);
    if (target === undefined) return undefined;
    return this.askAgain(target, c, paramsJson, reply);
  }

  private async askAgain(
    target: Upstream,
    c: OutgoingCall,
    paramsJson: string | undefined,
    reply: Reply,
  ): Promise<CallResult> {
    const gid = this.ids.take(1);
    const start = this.clock.monotonic();
    const res = await target.exchange(singleBody(gid, c, paramsJson), ExchangeKind.Light, singleCheck(gid));
    const failure = this.book.book(target, res, start);
    if (failure !== undefined) {
      this.hooks.emptyRetry("failed");
      return { ok: true, reply };
    }
    const again = (res as { value: Reply }).value;
    const found = again.kind === ReplyKind.Result;
    this.hooks.emptyRetry(found ? "found" : "empty");
    return { ok: true, reply: found ? again : reply };
  }

  /**
   * The selectable upstream other than `by` with the highest head that has what `ask` asks for (see
   * retry). A node whose head is above the network head is one no other node confirms (head.ts): its
   * head is not believed, so it is never asked on the strength of it.
   */
  target(ask: number, by: Upstream): Upstream | undefined {
    const now = this.clock.now();
    const best = this.heads.best();
    // A block above every health-checked head but seen since (in an answer, or as another instance's
    // served head): the node with the highest head is the likeliest to have it by now.
    const seenSince = ask > best && ask <= this.heads.observed;
    let target: Upstream | undefined;
    let targetHead = -1;
    for (const u of this.members.upstreams) {
      const h = u.head;
      if (u === by || h < 0 || h > best || h <= targetHead || !this.selector.selectable(u, now, best))
        continue;
      if (ask === BY_HASH ? h > by.head : h >= ask || (seenSince && h === best)) {
        target = u;
        targetHead = h;
      }
    }
    return target;
  }
}
