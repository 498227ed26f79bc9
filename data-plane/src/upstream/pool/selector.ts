import { type ErrorRow, noCapableUpstreamRow } from "../../../../shared/src/jsonrpc/errors";
import {
  AT_HEAD,
  blockNeedOfCall,
  familyNames,
  familyOf,
  HEAD_BLOCK,
  type Need,
  Serves,
} from "../capabilities";
import type { Upstream } from "../upstream";
import type { PoolClock } from "./clock";
import type { HeadTracker } from "./head-tracker";
import type { PoolMembership } from "./membership";
import type { OutgoingCall } from "./wire";

/**
 * Tail latencies closer than this (ms), or than this factor, are a tie in select: noise between healthy
 * nodes, where a node slow on a share of its calls (a p90 of hundreds of ms) differs by far more.
 */
const LATENCY_TIE_MS = 10;
const LATENCY_TIE_RATIO = 1.5;

/**
 * An upstream's latency as selection weighs it against `other`'s: the tail, not only the mean. A node
 * slow on 30% of its calls has an EWMA that swings with each answer but a p90 that stays its slow answers'
 * time, so it loses the comparison while it is slow.
 *
 * Like is compared with like. A node without a recent window of answers (too few calls lately: new, or
 * steered away) has no p90, and its EWMA is then mostly its health probes, which read higher than calls
 * on a busy host: fired by a timer with every other upstream's probes, each carries the gateway's own
 * scheduling delay (measured under load: probes 10-60 ms, calls to the same anvil 2-5 ms). Against a node
 * judged by its calls it would lose every comparison, never get the calls that would show it as fast, and
 * a healthy node would sit idle. So unless both have a p90, the two are compared by their last probes'
 * medians (ProbeLatencies: same timer, same conditions; a node slow on its probes too stays out of
 * favour); with no probes yet, by the tail as above.
 */
function comparableLatencyMs(u: Upstream, other: Upstream): number {
  const p90 = u.latency.p90();
  if (p90 < 0 || other.latency.p90() < 0) {
    const probes = u.probeLatency.median();
    if (probes >= 0 && other.probeLatency.median() >= 0) return probes;
  }
  return Math.max(p90, u.latencyEwmaMs);
}

/** What else selection weighs: calls in flight, the error rate, over the upstream's weight. */
function load(u: Upstream): number {
  return ((u.inFlight + 1) * (1 + 10 * u.errorRateEwma)) / u.weight;
}

/**
 * Which upstream a call goes to: the nodes a call may go to now (breaker, back-off, lag), what a call
 * needs of its node (state at a block, method families, the head), and the pick among the ones that
 * serve it best (weight, tail latency, load).
 */
export class Selector {
  /** Per upstream (same index), its rank in the current select(); -1 = not a candidate. */
  private ranks = new Int8Array(0);

  constructor(
    private readonly members: PoolMembership,
    private readonly heads: HeadTracker,
    private readonly opts: { readonly maxLagBlocks: number },
    private readonly clock: PoolClock,
    /** The draw of select's weighted pick, in [0, 1). */
    private readonly random: () => number = Math.random,
  ) {}

  /**
   * Whether `u` may get a call now: its breaker and back-off let it, and it is within HEALTH_MAX_LAG_BLOCKS
   * of `best` (the network head). `heavy`: also require a free heavy-call slot
   * (UPSTREAM_HEAVY_SHARE_PERCENT of its connections).
   */
  selectable(u: Upstream, nowMs: number, best: number, heavy = false): boolean {
    if (!u.available(nowMs) || (heavy && !u.heavySlotFree())) return false;
    return u.head < 0 || best < 0 || best - u.head <= this.opts.maxLagBlocks;
  }

  /** The network head (HeadTracker.best), against which selectable measures lag. */
  bestHead(): number {
    return this.heads.best();
  }

  /** Number of upstreams a request could go to now. */
  healthyCount(): number {
    const now = this.clock.now();
    const best = this.heads.best();
    let n = 0;
    for (const u of this.members.upstreams) if (this.selectable(u, now, best)) n++;
    return n;
  }

  /** The upstreams a call could go to now, in the record's order. */
  live(): Upstream[] {
    const now = this.clock.now();
    const best = this.heads.best();
    return this.members.upstreams.filter((u) => this.selectable(u, now, best));
  }

  /**
   * What a call requires of its upstream: the state at the block it names (stateBlockOf), its method
   * family once any upstream declares families, and whether it reads the head (Need.head: a preference
   * for an upstream at the served head). Undefined: anything does; a head read alone is the shared
   * AT_HEAD (neither allocates).
   */
  need(c: OutgoingCall): Need | undefined {
    const b = blockNeedOfCall(c);
    const families = this.members.familiesDeclared === 0 ? 0 : familyOf(c.method);
    if (families === 0) {
      if (b === HEAD_BLOCK) return AT_HEAD;
      if (b < 0) return undefined;
      return { block: b, families };
    }
    return b === HEAD_BLOCK ? { block: -1, families, head: true } : { block: b < 0 ? -1 : b, families };
  }

  /**
   * Where `u` ranks for a call with `need` (lower first), or -1 when it cannot serve it: it lacks a
   * declared family the call needs, or is known not to keep the state at the call's block. Among the
   * rest: known to keep that state before not known (a not yet probed AUTO upstream may be an archive
   * node, so it is tried rather than refused, but after the ones known to answer), and within its budget
   * before over it. Capability ranks above budget: an answer from a node that lacks the state is an error
   * for the client, going over a budget only a cost. A head read (Need.head) ranks the upstreams whose
   * health-checked head is below `headAt` (headTarget) after the others, between capability and budget: a
   * node behind would answer from before a block the client may already have seen.
   */
  rank(u: Upstream, need: Need | undefined, nowMs: number, headAt = -1): number {
    let r = 0;
    if (need !== undefined) {
      if (need.families !== 0 && (u.caps.families & need.families) !== need.families) return -1;
      if (need.block >= 0) {
        const serves = u.caps.servesState(need.block, u.head);
        if (serves === Serves.No) return -1;
        if (serves === Serves.Unknown) r = 4;
      }
      if (headAt >= 0 && u.head < headAt) r += 2;
    }
    return u.caps.overBudget(nowMs) ? r + 1 : r;
  }

  /**
   * The head a head read prefers its upstream at (see rank): the served head, or, while no upstream it
   * could go to has reached it by its health checks (the served head came from an answer, another
   * instance, or a node now gone), the highest head among those. -1 = no upstream's head is known.
   */
  private headTarget(
    exclude: readonly Upstream[] | undefined,
    heavy: boolean,
    now: number,
    best: number,
  ): number {
    let top = -1;
    for (const u of this.members.upstreams) {
      if (u.head > top && !exclude?.includes(u) && this.selectable(u, now, best, heavy)) top = u.head;
    }
    if (top < 0) return -1;
    const served = this.heads.servedAt(best);
    return Math.min(top, served);
  }

  /** Upstreams a head read may go to now at the head it prefers (headTarget); at least 1. */
  atHeadCount(): number {
    const now = this.clock.now();
    const best = this.heads.best();
    const at = this.headTarget(undefined, false, now, best);
    let n = 0;
    for (const u of this.members.upstreams) if (this.selectable(u, now, best) && u.head >= at) n++;
    return Math.max(1, n);
  }

  /**
   * Picks an upstream: among the selectable ones of the best rank (see rank), two distinct weighted-random
   * candidates, the one with the lower (tail latency + 1) x load wins (power of two choices), latencies
   * close to each other counting as equal. `exclude` holds
   * nodes already tried; `heavy` skips nodes whose heavy-call share of connections is taken; `need` is
   * what the call requires (see need()).
   */
  select(exclude: readonly Upstream[] | undefined, heavy = false, need?: Need): Upstream | undefined {
    const now = this.clock.now();
    const best = this.heads.best();
    const headAt = need?.head === true ? this.headTarget(exclude, heavy, now, best) : -1;
    const ups = this.members.upstreams;
    if (this.ranks.length !== ups.length) this.ranks = new Int8Array(ups.length);
    const ranks = this.ranks;
    let top = 127;
    let total = 0;
    let count = 0;
    let only: Upstream | undefined;
    for (let i = 0; i < ups.length; i++) {
      const u = ups[i]!;
      const r =
        exclude?.includes(u) || !this.selectable(u, now, best, heavy) ? -1 : this.rank(u, need, now, headAt);
      ranks[i] = r;
      if (r < 0 || r > top) continue;
      if (r < top) {
        top = r;
        total = 0;
        count = 0;
      }
      total += u.weight;
      count++;
      only = u;
    }
    if (count <= 1) return only;
    // Two distinct candidates: drawn with replacement, a slow node would be both a share of the time
    // (a quarter with two upstreams) and keep that share of the traffic whatever its score.
    const a = this.weightedPick(total, top, undefined);
    const b = this.weightedPick(total - a.weight, top, a);
    // Latencies close to each other (LATENCY_TIE_MS, LATENCY_TIE_RATIO) are a tie, and then load, errors
    // and weight decide alone; with those equal too, the weighted draw does (`a`). Two distinct candidates
    // are always both compared, so without the tie every sequential call would go to whichever node is a
    // few milliseconds faster, and the other would get none.
    const la = comparableLatencyMs(a, b);
    const lb = comparableLatencyMs(b, a);
    const tie =
      Math.abs(la - lb) <= LATENCY_TIE_MS || (la <= lb * LATENCY_TIE_RATIO && lb <= la * LATENCY_TIE_RATIO);
    const sa = tie ? load(a) : (la + 1) * load(a);
    const sb = tie ? load(b) : (lb + 1) * load(b);
    return sa <= sb ? a : b;
  }

  /** A weighted-random upstream among those select() ranked `rank`, other than `skip`. */
  private weightedPick(total: number, rank: number, skip: Upstream | undefined): Upstream {
    let r = this.random() * total;
    let last: Upstream | undefined;
    const ups = this.members.upstreams;
    for (let i = 0; i < ups.length; i++) {
      if (this.ranks[i] !== rank) continue;
      const u = ups[i]!;
      if (u === skip) continue;
      last = u;
      r -= u.weight;
      if (r < 0) return u;
    }
    return last!;
  }

  /**
   * The refusal of a call with `need` when no selectable upstream can serve it (undefined when one can,
   * or none is selectable at all: that is no_upstream). Its message names what was needed and, for
   * state, the oldest block any upstream serving the call's families keeps.
   */
  capabilityRefusal(need: Need): ErrorRow | undefined {
    const now = this.clock.now();
    const best = this.heads.best();
    let healthy = 0;
    let withFamilies = 0;
    let oldest = -1;
    for (const u of this.members.upstreams) {
      if (!this.selectable(u, now, best)) continue;
      healthy++;
      if (this.rank(u, need, now) >= 0) return undefined;
      if (need.families !== 0 && (u.caps.families & need.families) !== need.families) continue;
      withFamilies++;
      const o = u.caps.oldestServed(u.head);
      if (o >= 0 && (oldest < 0 || o < oldest)) oldest = o;
    }
    if (healthy === 0) return undefined;
    if (withFamilies === 0) {
      return noCapableUpstreamRow(`it needs ${familyNames(need.families)}, which no upstream serves`);
    }
    const at = `0x${need.block.toString(16)}`;
    const served = oldest < 0 ? "" : ` (oldest available 0x${oldest.toString(16)})`;
    return noCapableUpstreamRow(`no upstream serves the state at block ${at}${served}`);
  }

  /**
   * The upstreams a call may go to now (healthy, within HEALTH_MAX_LAG_BLOCKS) whose health-checked head
   * is at or above `height` (every selectable one when `height` < 0), highest head first. For the calls
   * the gateway answers from several nodes or from one node that has a given block (forward/pool-calls.ts:
   * nonces, broadcast sends, filters).
   */
  selectableAt(height: number): Upstream[] {
    const now = this.clock.now();
    const best = this.heads.best();
    const out: Upstream[] = [];
    for (const u of this.members.upstreams) {
      if (this.selectable(u, now, best) && (height < 0 || u.head >= height)) out.push(u);
    }
    return out.sort((a, b) => b.head - a.head);
  }
}
