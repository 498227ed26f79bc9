import {
  type ErrorRow,
  GatewayError,
  noCapableUpstreamRow,
  responseTooLargeRow,
} from "../../../shared/src/jsonrpc/errors";
import { logsChunkBlocks, type NetworkRecord, type UpstreamHealth } from "../../../shared/src/redis/records";
import { readVerbatimReply, VerbatimRefusal, type VerbatimReply } from "../forward/verbatim";
import type { Metrics } from "../metrics/metrics";
import type { RpcCall } from "../rpc/parse";
import {
  AT_HEAD,
  blockNeedOfCall,
  familyList,
  familyNames,
  familyOf,
  HEAD_BLOCK,
  mergeNeeds,
  type Need,
  restricts,
  Serves,
} from "./capabilities";
import { ChainWatch } from "./chain-watch";
import { BY_HASH, emptyAnswerAsk, NOT_RETRIED } from "./empty-answer";
import { DEFAULT_HEAD_OUTLIER_BLOCKS, networkHead } from "./head";
import { HedgeBudget, type HedgeOptions, hedgeable, hedgeDelayMs } from "./hedge";
import { type LogsSplit, planLogsSplit, runLogsSplit } from "./logs-split";
import { type CallResult, parseSingleReply, type Reply, ReplyKind, replyFromValue } from "./reply";
import { evmAsk, findOldestState, substrateAsk } from "./state-probe";
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  type ExchangeControl,
  type ExchangeFailure,
  ExchangeKind,
  type ExchangeResult,
  exchangeFailureRow,
  INVALID_REPLY,
  type ReplyBody,
  Upstream,
  type UpstreamEvents,
  type UpstreamOptions,
} from "./upstream";

export interface PoolOptions extends UpstreamOptions {
  maxAttempts: number;
  maxLagBlocks: number;
  /** Single calls arriving in the same event-loop turn are sent as one upstream batch of up to this many; 1 = off. */
  coalesceMax: number;
  /**
   * CACHE_FINALITY_ENABLED: watch each node's finalized head and head hash after its health probe
   * (upstream/chain-watch.ts), for the finality-aware cache and reorg drops. Off: finalizedHead() is -1.
   */
  finality?: boolean;
  /** A reorg seen on network `slug`: per-block answers keyed to heads >= `fromHeight` are stale. */
  onReorg?: (slug: string, fromHeight: number) => void;
  /** Sub-calls of one split eth_getLogs in flight at once (LOGS_SPLIT_CONCURRENCY); default 8. */
  logsSplitConcurrency?: number;
  /** Hedged reads (HEDGE_*; see hedge.ts); absent or `enabled: false` = never. */
  hedge?: HedgeOptions;
  /** HEAD_OUTLIER_BLOCKS (see head.ts networkHead); default DEFAULT_HEAD_OUTLIER_BLOCKS. */
  headOutlierBlocks?: number;
}

/** How an upstream exchange of exchangeWithFailover ended (`upstream`: the node whose answer it is). */
type Outcome<T> = { ok: true; value: T; upstream: Upstream } | { ok: false; error: ErrorRow };

/** How a hedged exchange ended (see NetworkPool.hedgedExchange). */
interface HedgeEnd {
  /** undefined: `value` is a usable answer from `upstream`. */
  readonly failure: ExchangeFailure | undefined;
  readonly value: unknown;
  /** The node whose outcome this is (the winner, or the last one to fail). */
  readonly upstream: Upstream;
  /** The other node when a copy was sent (also tried, when both failed). */
  readonly other: Upstream | undefined;
}

/** Failures that every upstream would share (the request's size, the process's buffers): no failover. */
function final(f: ExchangeFailure): boolean {
  return f === "too_large" || f === "refused" || f === "buffer_full";
}

const DEFAULT_LOGS_SPLIT_CONCURRENCY = 8;

interface Queued {
  readonly call: OutgoingCall;
  /** The params serialised (undefined when the call has none). */
  readonly paramsJson: string | undefined;
  /** What the upstream must serve (undefined: anything does). */
  readonly need: Need | undefined;
  readonly resolve: (r: CallResult) => void;
}

const NO_CAPABLE_REASON = GatewayError.NoCapableUpstream.reason;

/** Whether a result is the refusal for want of a capable upstream (nothing was sent). */
function refusedForCapability(r: CallResult | undefined): boolean {
  return r !== undefined && !r.ok && r.error.reason === NO_CAPABLE_REASON;
}

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

function coalescible(method: string): boolean {
  return !NOT_COALESCED.has(method) && !isHeavy(method);
}

/**
 * Coalescing bounds, in bytes of JSON: a call whose params are larger goes out by itself, and a coalesced
 * batch is cut before its body would pass COALESCE_MAX_BODY_BYTES. Nodes cap request bodies (geth: 5 MiB,
 * answered 413): one client's big calls must not make other clients' calls share such a refusal.
 */
const COALESCE_MAX_PARAMS_BYTES = 64 * 1024;
const COALESCE_MAX_BODY_BYTES = 1024 * 1024;
/** Bytes of one batch element besides its params (envelope, id, method name, comma). */
const ELEMENT_OVERHEAD_BYTES = 64;

/**
 * Calls whose cost the client chooses (block ranges, traces, whole-storage reads). A timeout of one says
 * nothing about the node's health, and failing it over would only hand the same load to the next node:
 * such a timeout is answered 504 at once and never counts toward a breaker.
 */
const HEAVY = new Set([
  "eth_getLogs",
  "eth_getFilterLogs",
  "state_getPairs",
  "state_getKeys",
  "state_getKeysPaged",
  "state_queryStorage",
  "state_queryStorageAt",
  "state_traceBlock",
]);

export function isHeavy(method: string): boolean {
  return (
    HEAVY.has(method) ||
    method.startsWith("debug_") ||
    method.startsWith("trace_") ||
    method.startsWith("arbtrace_")
  );
}

/**
 * A node's JSON-RPC error that means "you are sending too much" (Infura, Alchemy, QuickNode style: -32005
 * with a rate wording, or code 429). -32005 alone is not enough: nodes also use it for per-request limits
 * ("query returned more than 10000 results"), which a client can trigger at will and must not back a node off.
 */
function isRateLimitTail(tail: string): boolean {
  if (!tail.includes("-32005") && !tail.includes("429")) return false;
  try {
    const e = (JSON.parse(`{${tail.slice(1)}`) as { error?: { code?: unknown; message?: unknown } }).error;
    const code = e?.code;
    const message = typeof e?.message === "string" ? e.message : "";
    if (code === 429) return true;
    return code === -32005 && /\brate\b|rate.?limit|too many requests|throttl|per second/i.test(message);
  } catch {
    return false;
  }
}

export interface OutgoingCall {
  readonly method: string;
  readonly params: unknown;
  /** A sampled request's call only (data-plane/src/telemetry): its upstream span. */
  readonly span?: UpstreamSpan;
  /** params[index] without building the params, when the parser can (rpc/parse.ts RpcCall). */
  param?(index: number): unknown;
}

/**
 * A sampled call's upstream span, as the pool sees it. A call sent alone carries its `traceparent`; one
 * coalesced with other calls into one upstream batch shares that exchange's single traceparent header:
 * the first sampled call's of the batch, and every sampled call in it is told (`coalesced`).
 */
export interface UpstreamSpan {
  /** The W3C traceparent naming this span, for the upstream request's header. */
  readonly traceparent: string;
  /** The call went out in an upstream batch of `size` calls whose request carried traceparent `sent`. */
  coalesced(size: number, sent: string): void;
}

/** How far above the health-checked head an answer may prove a block exists before it is distrusted. */
const MAX_HEAD_JUMP = 64;

/** Hedgeable exchanges between two computations of the best healthy upstream's p95 (the hedge delay). */
const P95_EVERY = 32;

/** Smallest chunk worth its own upstream exchange when spreading a batch. */
const MIN_CHUNK = 10;

/**
 * A network's upstream nodes: selection (weight, latency, in-flight load among healthy nodes), failover
 * of failed exchanges to another node, health checks, and head tracking for the cache.
 */
export class NetworkPool {
  record: NetworkRecord;
  private upstreams: Upstream[] = [];
  private nextId = 1;
  private queue: Queued[] = [];
  /** Set once a node answered a batch with a single error: coalescing is off for this network from then on. */
  private batchesRefused = false;
  private flushScheduled = false;
  /** Highest head seen in answers passing through (receipts, eth_blockNumber), ahead of health checks. */
  private observedHead = -1;
  /** Finalized head and reorgs (undefined when CACHE_FINALITY_ENABLED is off). */
  private readonly chain: ChainWatch | undefined;
  /** FAMILY_BIT mask of the families any upstream declares; 0 = none: families route nothing. */
  private familiesDeclared = 0;
  /** Per upstream (same index), its rank in the current select(); -1 = not a candidate. */
  private ranks = new Int8Array(0);
  /** Hedged reads' options when on (HEDGE_ENABLED), else undefined. */
  private readonly hedge: HedgeOptions | undefined;
  /** HEDGE_MAX_PERCENT of this network's hedgeable exchanges. */
  private readonly hedgeBudget: HedgeBudget;
  /** servedHead's high-water mark. */
  private served = -1;
  /** The lowest p95 among selectable upstreams (ms, -1 = none known), recomputed every P95_EVERY hedgeable exchanges. */
  private bestP95Ms = -1;
  private sinceBestP95 = P95_EVERY;
  private readonly headOutlierBlocks: number;

  /** Breaker openings and back-offs, to the metrics under this network's current slug. */
  private readonly events: UpstreamEvents;
  /** The row of a merged eth_getLogs answer over UPSTREAM_MAX_RESPONSE_BYTES (as one node's answer would get). */
  private readonly tooLargeRow: ErrorRow;

  constructor(
    record: NetworkRecord,
    private readonly opts: PoolOptions,
    private readonly metrics: Metrics,
  ) {
    this.record = record;
    this.hedge = opts.hedge?.enabled ? opts.hedge : undefined;
    this.hedgeBudget = new HedgeBudget(opts.hedge?.maxPercent ?? 0);
    this.headOutlierBlocks = opts.headOutlierBlocks ?? DEFAULT_HEAD_OUTLIER_BLOCKS;
    this.events = {
      breakerOpened: (u, cause) => this.metrics.upstreamBreakerOpened(this.record.slug, u.id, cause),
      backedOff: (u, ms) => this.metrics.upstreamBackoff(this.record.slug, u.id, ms),
    };
    this.chain = opts.finality ? new ChainWatch({ reorg: (from) => this.reorged(from) }) : undefined;
    this.tooLargeRow = responseTooLargeRow(opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES);
    this.update(record);
  }

  get slug(): string {
    return this.record.slug;
  }

  /** Applies a new record: keeps unchanged upstreams (and their health), adds new, closes removed. */
  update(record: NetworkRecord): void {
    this.record = record;
    this.batchesRefused = false;
    const old = new Map(this.upstreams.map((u) => [u.id, u]));
    const next: Upstream[] = [];
    let added = false;
    for (const r of record.upstreams) {
      const existing = old.get(r.id);
      if (existing !== undefined && existing.httpUrl === r.httpUrl) {
        existing.weight = r.weight;
        existing.caps.apply(r);
        next.push(existing);
        old.delete(r.id);
      } else {
        next.push(new Upstream(r, this.opts, this.events));
        added = true;
      }
    }
    this.upstreams = next;
    // A new node may be on another chain (the reason the response cache is cleared when a network's
    // definition changes): its finalized head is learnt afresh, not assumed from the others'.
    if (added) this.chain?.reset();
    else this.chain?.retain(next);
    this.ranks = new Int8Array(next.length);
    let declared = 0;
    for (const u of next) declared |= u.caps.families;
    this.familiesDeclared = declared;
    for (const u of old.values()) void u.close();
  }

  /**
   * The network head among upstreams whose breaker is closed (-1 when unknown): the highest head another
   * upstream confirms, so that one node reporting a head far beyond the others (HEAD_OUTLIER_BLOCKS) cannot
   * set it (see head.ts networkHead for the rule and the two-upstream case).
   */
  bestHead(): number {
    return networkHead(this.upstreams, this.headOutlierBlocks);
  }

  /**
   * The head the cache keys per-block entries to: the best health-checked head, or a newer one seen in
   * an answer (so a client that just saw a receipt in block N never gets a cached "latest" from before N).
   */
  cacheHead(): number {
    const best = this.bestHead();
    return Math.max(this.observedHead, best);
  }

  /**
   * The head answers are served at (docs/contracts.md "A head that never goes back"): the highest
   * cacheHead this pool has seen, so it never decreases, whatever node answers next, a breaker opening on
   * the node ahead, or a reorg forgetting a head seen in an answer. Other instances' and threads' served
   * heads come in through observeHead (ServedHeadShare). -1 while unknown.
   */
  servedHead(): number {
    return this.servedAt(this.bestHead());
  }

  /** servedHead, given bestHead() (`best`). */
  private servedAt(best: number): number {
    // Far below the mark (HEAD_OUTLIER_BLOCKS) is no lagging node but a chain that started again (a
    // development node reset): the mark, and any head seen in an answer, follow it down rather than
    // serving a head that will not come.
    if (best >= 0 && best + this.headOutlierBlocks < this.served) {
      this.served = best;
      if (this.observedHead > best) this.observedHead = -1;
    }
    const h = Math.max(this.observedHead, best);
    if (h > this.served) this.served = h;
    return this.served;
  }

  /**
   * The network's finalized head (see upstream/chain-watch.ts): answers about blocks at or below it are
   * final. -1 while unknown (a node without the `finalized` tag, no health round yet) or with
   * CACHE_FINALITY_ENABLED off. Never goes back; never above the health-checked head when set.
   */
  finalizedHead(): number {
    return this.chain === undefined ? -1 : this.chain.finalized;
  }

  /**
   * A node's chain reorganised (chain watch): the head seen in answers may be on the old branch, so it
   * is forgotten if it is at or above the reorg height, and the cache drops its stale per-block entries.
   */
  private reorged(fromHeight: number): void {
    if (this.observedHead >= fromHeight) this.observedHead = -1;
    this.opts.onReorg?.(this.record.slug, fromHeight);
  }

  /**
   * Records a head height seen in an answer. Heights implausibly far above the health-checked head
   * (a confused or hostile node) are ignored, so they cannot pin the cache to a head that never comes.
   */
  observeHead(n: number): void {
    if (n <= this.observedHead) return;
    const best = this.bestHead();
    if (best >= 0 && n > best + MAX_HEAD_JUMP) return;
    this.observedHead = n;
  }

  /** `heavy`: also require a free heavy-call slot (UPSTREAM_HEAVY_SHARE_PERCENT of its connections). */
  private selectable(u: Upstream, nowMs: number, best: number, heavy = false): boolean {
    if (!u.available(nowMs) || (heavy && !u.heavySlotFree())) return false;
    return u.head < 0 || best < 0 || best - u.head <= this.opts.maxLagBlocks;
  }

  /** Number of upstreams a request could go to now. */
  healthyCount(): number {
    const now = Date.now();
    const best = this.bestHead();
    let n = 0;
    for (const u of this.upstreams) if (this.selectable(u, now, best)) n++;
    return n;
  }

  /**
   * What a call requires of its upstream: the state at the block it names (stateBlockOf), its method
   * family once any upstream declares families, and whether it reads the head (Need.head: a preference
   * for an upstream at the served head). Undefined: anything does; a head read alone is the shared
   * AT_HEAD (neither allocates).
   */
  need(c: OutgoingCall): Need | undefined {
    const b = blockNeedOfCall(c);
    const families = this.familiesDeclared === 0 ? 0 : familyOf(c.method);
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
  private rank(u: Upstream, need: Need | undefined, nowMs: number, headAt = -1): number {
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
    for (const u of this.upstreams) {
      if (u.head > top && !exclude?.includes(u) && this.selectable(u, now, best, heavy)) top = u.head;
    }
    if (top < 0) return -1;
    const served = this.servedAt(best);
    return Math.min(top, served);
  }

  /** Upstreams a head read may go to now at the head it prefers (headTarget); at least 1. */
  private atHeadCount(): number {
    const now = Date.now();
    const best = this.bestHead();
    const at = this.headTarget(undefined, false, now, best);
    let n = 0;
    for (const u of this.upstreams) if (this.selectable(u, now, best) && u.head >= at) n++;
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
    const now = Date.now();
    const best = this.bestHead();
    const headAt = need?.head === true ? this.headTarget(exclude, heavy, now, best) : -1;
    const ups = this.upstreams;
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
    const la = tailLatencyMs(a);
    const lb = tailLatencyMs(b);
    const tie =
      Math.abs(la - lb) <= LATENCY_TIE_MS || (la <= lb * LATENCY_TIE_RATIO && lb <= la * LATENCY_TIE_RATIO);
    const sa = tie ? load(a) : (la + 1) * load(a);
    const sb = tie ? load(b) : (lb + 1) * load(b);
    return sa <= sb ? a : b;
  }

  /** A weighted-random upstream among those select() ranked `rank`, other than `skip`. */
  private weightedPick(total: number, rank: number, skip: Upstream | undefined): Upstream {
    let r = Math.random() * total;
    let last: Upstream | undefined;
    const ups = this.upstreams;
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
  private capabilityRefusal(need: Need): ErrorRow | undefined {
    const now = Date.now();
    const best = this.bestHead();
    let healthy = 0;
    let withFamilies = 0;
    let oldest = -1;
    for (const u of this.upstreams) {
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
   * Forwards one call with failover. Never throws. `paramsJson` is the params already serialised (the
   * cache key needs them too), `undefined` to serialise here.
   *
   * Under load, single calls that arrive in the same event-loop turn are coalesced into one upstream
   * JSON-RPC batch (ids rewritten, answers split back per call): one upstream exchange instead of many,
   * which is where most of the per-request cost goes. A lone call goes out by itself at once.
   */
  call(c: OutgoingCall, paramsJson?: string): Promise<CallResult> {
    if (c.method === "eth_getLogs") {
      const split = this.logsSplit(c.params);
      if (split !== undefined) return this.callSplit(c.method, split);
    }
    const need = this.need(c);
    const r = this.route(c, paramsJson, need);
    return need === undefined || !restricts(need) ? r : r.then((res) => this.counted(need, res));
  }

  private route(
    c: OutgoingCall,
    paramsJson: string | undefined,
    need: Need | undefined,
  ): Promise<CallResult> {
    if (this.opts.coalesceMax <= 1 || this.batchesRefused || !coalescible(c.method)) {
      return this.callDirect(c, paramsJson, need);
    }
    // Serialised here rather than in the exchange: the size decides whether the call is coalesced.
    const pj = paramsJson ?? (c.params === undefined ? undefined : JSON.stringify(c.params));
    if (pj !== undefined && pj.length > COALESCE_MAX_PARAMS_BYTES) return this.callDirect(c, pj, need);
    return new Promise<CallResult>((resolve) => {
      this.queue.push({ call: c, paramsJson: pj, need, resolve });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  /** Counts a call that had a need in the capability metrics (routed, or refused for want of one). */
  private counted(need: Need, r: CallResult): CallResult {
    const kind = need.block < 0 ? "family" : need.families === 0 ? "state" : "state_family";
    this.metrics.capabilityRouting(this.record.slug, kind, refusedForCapability(r) ? "refused" : "routed");
    return r;
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
      void this.callDirect(e.call, e.paramsJson, e.need).then(e.resolve);
      return;
    }
    // Parts of at most coalesceMax calls and COALESCE_MAX_BODY_BYTES (string length: bytes for ASCII JSON,
    // a bound to within the UTF-8 expansion otherwise).
    const max = this.opts.coalesceMax;
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
      void this.callDirect(e.call, e.paramsJson, e.need).then(e.resolve);
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
    const results = await this.sendChunk(
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
      await Promise.all(part.map((e) => this.callDirect(e.call, e.paramsJson, e.need).then(e.resolve)));
      return;
    }
    if (sent !== undefined) for (const e of part) e.call.span?.coalesced(part.length, sent);
    for (let j = 0; j < part.length; j++) part[j]!.resolve(results[j]!);
  }

  /**
   * How an eth_getLogs call is split on this network now (logs-split.ts), undefined = send it whole. Tags
   * resolve against cacheHead(), the head the range limit (limits/logs-range.ts) used for the same call.
   */
  private logsSplit(params: unknown): LogsSplit | undefined {
    const chunk = logsChunkBlocks(this.record);
    return chunk > 0 ? planLogsSplit(params, this.cacheHead(), chunk) : undefined;
  }

  /**
   * Sends a split eth_getLogs: each sub-call is its own heavy exchange (a heavy slot on its node, no failover
   * of a timeout), started on the healthy upstreams in turn (each once before any twice) and failed over as
   * any call. Never throws.
   */
  private async callSplit(method: string, split: LogsSplit): Promise<CallResult> {
    const chosen: Upstream[] = [];
    const out = await runLogsSplit(split, {
      chunk: logsChunkBlocks(this.record),
      concurrency: this.opts.logsSplitConcurrency ?? DEFAULT_LOGS_SPLIT_CONCURRENCY,
      maxBytes: this.opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      tooLarge: this.tooLargeRow,
      send: (params) => {
        let first = this.select(chosen, true);
        if (first === undefined && chosen.length > 0) {
          chosen.length = 0;
          first = this.select(undefined, true);
        }
        if (first !== undefined) chosen.push(first);
        return this.callDirect({ method, params }, undefined, undefined, first);
      },
    });
    this.metrics.logsSplit(this.record.slug, out.subCalls, out.halvings);
    return out.result;
  }

  private async callDirect(
    c: OutgoingCall,
    paramsJson: string | undefined,
    need: Need | undefined,
    first?: Upstream,
  ): Promise<CallResult> {
    const gid = this.takeIds(1);
    const r = await this.exchangeWithFailover(
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
      const again = this.retryEmpty(c, paramsJson, reply, r.upstream);
      if (again !== undefined) return again;
    }
    return { ok: true, reply };
  }

  /** `n` consecutive upstream request ids; returns the first. */
  private takeIds(n: number): number {
    const base = this.nextId;
    this.nextId += n;
    if (this.nextId > 0x3fffffff) this.nextId = 1;
    return base;
  }

  /**
   * A `null` answer from `by` that another healthy upstream may not give (empty-answer.ts): a block number
   * at or below that upstream's head, or a hash lookup while that upstream's head is above `by`'s. The call
   * is sent once more, to the upstream with the highest head, before the null is returned (undefined: no
   * such upstream, the null stands). A lagging node's null must not reach the client as "no such block",
   * nor the cache (which keeps no nulls anyway: forward.ts store). The second answer is used when it is a
   * result; a second null, a node error or a failed exchange leave the first null.
   */
  private retryEmpty(
    c: OutgoingCall,
    paramsJson: string | undefined,
    reply: Reply,
    by: Upstream,
  ): Promise<CallResult> | undefined {
    const ask = emptyAnswerAsk(c.method, c.params);
    if (ask === NOT_RETRIED) return undefined;
    const target = this.emptyRetryTarget(ask, by);
    if (target === undefined) return undefined;
    return this.askAgain(target, c, paramsJson, reply);
  }

  private async askAgain(
    target: Upstream,
    c: OutgoingCall,
    paramsJson: string | undefined,
    reply: Reply,
  ): Promise<CallResult> {
    const gid = this.takeIds(1);
    const start = performance.now();
    const res = await target.exchange(singleBody(gid, c, paramsJson), ExchangeKind.Light, singleCheck(gid));
    const failure = this.book(target, res, start);
    if (failure !== undefined) {
      this.metrics.upstreamEmptyRetry(this.record.slug, "failed");
      return { ok: true, reply };
    }
    const again = (res as { value: Reply }).value;
    const found = again.kind === ReplyKind.Result;
    this.metrics.upstreamEmptyRetry(this.record.slug, found ? "found" : "empty");
    return { ok: true, reply: found ? again : reply };
  }

  /**
   * The selectable upstream other than `by` with the highest head that has what `ask` asks for (see
   * retryEmpty). A node whose head is above the network head is one no other node confirms (head.ts): its
   * head is not believed, so it is never asked on the strength of it.
   */
  private emptyRetryTarget(ask: number, by: Upstream): Upstream | undefined {
    const now = Date.now();
    const best = this.bestHead();
    // A block above every health-checked head but seen since (in an answer, or as another instance's
    // served head): the node with the highest head is the likeliest to have it by now.
    const seenSince = ask > best && ask <= this.observedHead;
    let target: Upstream | undefined;
    let targetHead = -1;
    for (const u of this.upstreams) {
      const h = u.head;
      if (u === by || h < 0 || h > best || h <= targetHead || !this.selectable(u, now, best)) continue;
      if (ask === BY_HASH ? h > by.head : h >= ask || (seenSince && h === best)) {
        target = u;
        targetHead = h;
      }
    }
    return target;
  }

  /**
   * The upstreams a call may go to now (healthy, within HEALTH_MAX_LAG_BLOCKS) whose health-checked head
   * is at or above `height` (every selectable one when `height` < 0), highest head first. For the calls
   * the gateway answers from several nodes or from one node that has a given block (forward/pool-calls.ts:
   * nonces, broadcast sends, filters).
   */
  selectableAt(height: number): Upstream[] {
    const now = Date.now();
    const best = this.bestHead();
    const out: Upstream[] = [];
    for (const u of this.upstreams) {
      if (this.selectable(u, now, best) && (height < 0 || u.head >= height)) out.push(u);
    }
    return out.sort((a, b) => b.head - a.head);
  }

  /** The upstream of this network with id `id`, if it is still one. */
  upstreamById(id: string): Upstream | undefined {
    for (const u of this.upstreams) if (u.id === id) return u;
    return undefined;
  }

  /**
   * Sends one call to `u` alone: no failover, no coalescing, no hedge, booked as any exchange (metrics,
   * back-off, probe after a timeout). Never throws.
   */
  async callOn(u: Upstream, c: OutgoingCall): Promise<CallResult> {
    const gid = this.takeIds(1);
    const start = performance.now();
    const kind = isHeavy(c.method) ? ExchangeKind.Heavy : ExchangeKind.Light;
    const res = await u.exchange(singleBody(gid, c, undefined), kind, singleCheck(gid));
    const failure = this.book(u, res, start);
    if (failure !== undefined) return { ok: false, error: exchangeFailureRow(failure, u) };
    return { ok: true, reply: (res as { value: Reply }).value };
  }

  /**
   * Forwards a batch: elements are split into chunks spread over the healthy upstreams (each chunk with
   * failover) and reassembled in order. Element i of the result answers calls[i]. An eth_getLogs element
   * whose range is split (see call) goes out as its own sub-calls, next to the others.
   */
  async callBatch(calls: readonly OutgoingCall[], traceparent?: string): Promise<CallResult[]> {
    let splits: (LogsSplit | undefined)[] | undefined;
    for (let i = 0; i < calls.length; i++) {
      const c = calls[i]!;
      if (c.method !== "eth_getLogs") continue;
      const split = this.logsSplit(c.params);
      if (split === undefined) continue;
      splits ??= new Array<LogsSplit | undefined>(calls.length);
      splits[i] = split;
    }
    if (splits === undefined) return this.callBatchRouted(calls, traceparent);
    const rest: OutgoingCall[] = [];
    const restIdx: number[] = [];
    const out = new Array<Promise<CallResult>>(calls.length);
    for (let i = 0; i < calls.length; i++) {
      const split = splits[i];
      if (split !== undefined) out[i] = this.callSplit(calls[i]!.method, split);
      else {
        rest.push(calls[i]!);
        restIdx.push(i);
      }
    }
    if (rest.length > 0) {
      const whole = this.callBatchRouted(rest, traceparent);
      for (let j = 0; j < restIdx.length; j++) out[restIdx[j]!] = whole.then((r) => r[j]!);
    }
    return Promise.all(out);
  }

  /** A batch's elements routed by their needs (see need): the plain ones spread, the others together. */
  private async callBatchRouted(
    calls: readonly OutgoingCall[],
    traceparent: string | undefined,
  ): Promise<CallResult[]> {
    let needs: (Need | undefined)[] | undefined;
    let head = false;
    for (let i = 0; i < calls.length; i++) {
      const need = this.need(calls[i]!);
      if (need === undefined) continue;
      if (need.head === true) head = true;
      if (!restricts(need)) continue;
      needs ??= new Array<Need | undefined>(calls.length);
      needs[i] = need;
    }
    if (needs === undefined) return this.spread(calls, traceparent, head);
    // The elements with a need go together to an upstream that serves them all (one by one when none
    // does); the others are spread as usual.
    const plainIdx: number[] = [];
    const needyIdx: number[] = [];
    for (let i = 0; i < calls.length; i++) (needs[i] === undefined ? plainIdx : needyIdx).push(i);
    const [plain, needy] = await Promise.all([
      plainIdx.length === 0
        ? []
        : this.spread(
            plainIdx.map((i) => calls[i]!),
            traceparent,
            head,
          ),
      this.sendNeedy(
        needyIdx.map((i) => calls[i]!),
        needyIdx.map((i) => needs[i]!),
        traceparent,
      ),
    ]);
    const out = new Array<CallResult>(calls.length);
    for (let j = 0; j < plainIdx.length; j++) out[plainIdx[j]!] = plain[j]!;
    for (let j = 0; j < needyIdx.length; j++) {
      out[needyIdx[j]!] = this.counted(needs[needyIdx[j]!]!, needy[j]!);
    }
    return out;
  }

  private async sendNeedy(
    calls: OutgoingCall[],
    needs: Need[],
    traceparent: string | undefined,
  ): Promise<CallResult[]> {
    let need: Need | undefined;
    for (const x of needs) need = mergeNeeds(need, x);
    const results = await this.sendChunk(calls, undefined, undefined, need, traceparent);
    if (calls.length === 1 || !refusedForCapability(results[0])) return results;
    return Promise.all(calls.map((c, i) => this.callDirect(c, undefined, needs[i])));
  }

  /**
   * Sends a batch's elements in chunks spread over the healthy upstreams; results in order. `head`: some
   * element reads the head, so the chunks go to upstreams at the served head (as many chunks as there
   * are such upstreams) when there are any.
   */
  private async spread(
    calls: readonly OutgoingCall[],
    traceparent?: string,
    head = false,
  ): Promise<CallResult[]> {
    const n = calls.length;
    const need = head ? AT_HEAD : undefined;
    const chunks = head ? Math.min(this.chunksFor(n), this.atHeadCount()) : this.chunksFor(n);
    const size = Math.ceil(n / chunks);
    const parts: Promise<CallResult[]>[] = [];
    // Each chunk starts on a different upstream (failover may still move it).
    const chosen: Upstream[] = [];
    for (let start = 0; start < n; start += size) {
      const first = chunks > 1 ? this.select(chosen, false, need) : undefined;
      if (first !== undefined) chosen.push(first);
      parts.push(this.sendChunk(calls.slice(start, start + size), undefined, first, need, traceparent));
    }
    const results = await Promise.all(parts);
    return results.length === 1 ? results[0]! : results.flat();
  }

  /** Upstream exchanges callBatch spreads a batch of `n` over: one per healthy upstream, chunks of >= MIN_CHUNK. */
  chunksFor(n: number): number {
    const healthy = Math.max(1, this.healthyCount());
    return Math.max(1, Math.min(healthy, Math.ceil(n / MIN_CHUNK)));
  }

  /**
   * Forwards a client batch as its own text (forward/verbatim.ts: the caller checked it may, and that no
   * call is handled on its own: sendsApart) to one upstream, with failover like any exchange; the
   * node's answer text comes back with each call's category. `text` may be its UTF-8 bytes (sent as
   * they are, without encoding a string). It prefers an upstream at the served head as a head read does
   * (whether its calls read the head is not looked up per call: nodes at the head are the usual case).
   */
  async callVerbatim(
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
    return this.exchangeWithFailover(
      text,
      undefined,
      (reply) => {
        const v = readVerbatimReply(reply, calls);
        if (v === VerbatimRefusal.Invalid) return INVALID_REPLY;
        if (v !== VerbatimRefusal.BatchesRefused) return v;
        // As in sendChunk: a healthy node that does not take batches; no penalty, no more coalescing.
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

  /**
   * Whether callBatch handles any of `calls` on its own: one that needs a particular upstream (see need;
   * a head read only prefers one), or an eth_getLogs whose range is split (see logsSplit).
   */
  sendsApart(calls: readonly OutgoingCall[]): boolean {
    for (const c of calls) {
      const need = this.need(c);
      if (need !== undefined && restricts(need)) return true;
      if (c.method === "eth_getLogs" && this.logsSplit(c.params) !== undefined) return true;
    }
    return false;
  }

  private async sendChunk(
    calls: readonly OutgoingCall[],
    paramsJson?: readonly (string | undefined)[],
    first?: Upstream,
    need?: Need,
    traceparent?: string,
  ): Promise<CallResult[]> {
    const base = this.takeIds(calls.length);
    const parts = new Array<string>(calls.length);
    for (let i = 0; i < calls.length; i++) {
      const c = calls[i]!;
      parts[i] =
        c.params === undefined
          ? `{"jsonrpc":"2.0","id":${base + i},"method":${JSON.stringify(c.method)}}`
          : `{"jsonrpc":"2.0","id":${base + i},"method":${JSON.stringify(c.method)},"params":${paramsJson?.[i] ?? JSON.stringify(c.params)}}`;
    }
    const body = `[${parts.join(",")}]`;
    let kind: ExchangeKind = ExchangeKind.Light;
    // A copy of the batch may go to a second node only when every call in it may (hedge.ts).
    let hedge = true;
    for (const c of calls) {
      if (isHeavy(c.method)) kind = ExchangeKind.Heavy;
      if (hedge && !hedgeable(c.method)) hedge = false;
    }
    const r = await this.exchangeWithFailover(
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
      const again = this.retryEmpty(calls[i]!, paramsJson?.[i], e.reply, r.upstream);
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
   * (hedgedExchange); at most one copy per call.
   */
  private async exchangeWithFailover<T>(
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
    let mayHedge = hedge && this.hedge !== undefined && this.upstreams.length > 1;
    for (let attempt = 0; attempt < this.opts.maxAttempts; attempt++) {
      const u =
        attempt === 0 && first !== undefined && (!heavy || first.heavySlotFree())
          ? first
          : this.select(tried, heavy, need);
      if (u === undefined) {
        if (lastFailure === undefined && need !== undefined) {
          const refusal = this.capabilityRefusal(need);
          if (refusal !== undefined) return { ok: false, error: refusal };
        }
        // Healthy nodes, but their heavy-call share is taken: the light calls keep the other connections.
        if (heavy && lastFailure === undefined && this.healthyCount() > 0) {
          return { ok: false, error: GatewayError.UpstreamBusy };
        }
        break;
      }
      if (u.caps.maxRequestsPerSecond !== 0 && u.caps.spend(elements, Date.now())) {
        // Over its budget, yet the best there was (nothing else selectable for this call).
        this.metrics.upstreamOverBudget(this.record.slug, u.id, elements);
      }
      let failure: ExchangeFailure | undefined;
      if (mayHedge) {
        const h = await this.hedgedExchange(u, body, parse, kind, tried, need, elements, traceparent);
        if (h.failure === undefined) return { ok: true, value: h.value as T, upstream: h.upstream };
        failure = h.failure;
        failedOn = h.upstream;
        if (h.other !== undefined) {
          mayHedge = false;
          if (tried === undefined) tried = [h.other];
          else tried.push(h.other);
        }
      } else {
        const start = performance.now();
        const res = await u.exchange(body, kind, parse, undefined, traceparent);
        failure = this.book(u, res, start);
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

  /**
   * Books one settled exchange with `u` (started at `start`, performance.now()): its metrics, a back-off
   * for the node's rate-limit answer, a health probe after a timeout (the call's timeout is no verdict on
   * the node; a probe, at most one at a time, gives one). Returns undefined when `res` holds a usable
   * answer, else why not.
   */
  private book(u: Upstream, res: ExchangeResult<unknown>, start: number): ExchangeFailure | undefined {
    const seconds = (performance.now() - start) / 1000;
    if (res.ok) {
      const value = res.value;
      if (value !== NOT_BAD && value !== RATE_LIMITED) {
        this.metrics.upstreamRequest(this.record.slug, u.id, "ok", seconds);
        return undefined;
      }
      this.metrics.upstreamRequest(this.record.slug, u.id, "error", seconds);
      if (value === NOT_BAD) return "bad";
      u.backOff(undefined);
      return "rate_limited";
    }
    const f = res.failure;
    this.metrics.upstreamRequest(
      this.record.slug,
      u.id,
      f === "timeout" ? "timeout" : f === "cancelled" ? "cancelled" : "error",
      seconds,
    );
    if (f === "timeout") void this.probe(u);
    return f;
  }

  /**
   * One attempt of a hedgeable exchange: `body` goes to `u`; if no answer has come after the hedge delay
   * (the lower of u's and the network's p95, within HEDGE_MIN_DELAY_MS..HEDGE_MAX_DELAY_MS; the maximum
   * while neither is known: hedge.ts hedgeDelayMs), a copy goes to another selectable upstream (not `u`, none of `tried`), within the
   * HEDGE_MAX_PERCENT budget. The first usable answer (or a failure every node would share, see `final`)
   * ends it and cancels the other exchange (Upstream.exchange control: aborted, settled as `cancelled`,
   * which counts neither toward the breaker nor as an error). A failure of one waits for the other.
   *
   * Hedges are counted by outcome: `won` (the copy's answer was used), `lost` (it was not: the first node
   * answered first, or the copy failed), `capped` (the delay passed but the budget was spent). The caller
   * counts nothing per copy: the call is one call for the tenant whichever node answers.
   */
  private hedgedExchange(
    u: Upstream,
    body: string | Uint8Array,
    parse: (reply: ReplyBody) => unknown,
    kind: ExchangeKind,
    tried: readonly Upstream[] | undefined,
    need: Need | undefined,
    elements: number,
    traceparent: string | undefined,
  ): Promise<HedgeEnd> {
    const o = this.hedge!;
    this.hedgeBudget.earn();
    if (++this.sinceBestP95 >= P95_EVERY) this.updateBestP95();
    return new Promise<HedgeEnd>((resolve) => {
      const primary: ExchangeControl = {};
      let copy: ExchangeControl | undefined;
      let v: Upstream | undefined;
      let pending = 1;
      let ended = false;
      let timer: NodeJS.Timeout | undefined;
      const settleOne = (who: Upstream, isCopy: boolean, res: ExchangeResult<unknown>, start: number) => {
        const failure = this.book(who, res, start);
        pending--;
        if (ended) return;
        const done = failure === undefined || final(failure);
        if (!done && pending > 0) return;
        ended = true;
        if (timer !== undefined) clearTimeout(timer);
        if (done) (isCopy ? primary : copy)?.exchange?.cancel();
        if (v !== undefined) {
          this.metrics.upstreamHedge(this.record.slug, isCopy && failure === undefined ? "won" : "lost");
        }
        resolve({
          failure,
          value: res.ok ? res.value : undefined,
          upstream: who,
          other: v === undefined ? undefined : isCopy ? u : v,
        });
      };
      const start = performance.now();
      void u.exchange(body, kind, parse, primary, traceparent).then((r) => settleOne(u, false, r, start));
      const sendCopy = () => {
        if (ended) return;
        // The copy goes where the call could go (capabilities: need), and spends that node's budget.
        const target = this.select(tried === undefined ? [u] : [u, ...tried], false, need);
        if (target === undefined) return;
        if (!this.hedgeBudget.take()) {
          this.metrics.upstreamHedge(this.record.slug, "capped");
          return;
        }
        if (target.caps.maxRequestsPerSecond !== 0 && target.caps.spend(elements, Date.now())) {
          this.metrics.upstreamOverBudget(this.record.slug, target.id, elements);
        }
        v = target;
        pending++;
        copy = {};
        const copyStart = performance.now();
        void target
          .exchange(body, kind, parse, copy, traceparent)
          .then((r) => settleOne(target, true, r, copyStart));
      };
      // The copy is decided in the check phase, after the poll phase: timers run before I/O in an event
      // loop turn, so after a stall (GC, a busy turn) every expired delay would fire before the answers
      // that arrived meanwhile are read, and send copies of calls already answered.
      timer = setTimeout(
        () => {
          timer = undefined;
          if (!ended) setImmediate(sendCopy);
        },
        hedgeDelayMs(this.bestP95Ms, o),
      );
    });
  }

  /** The best p95 among the upstreams a call could go to now (see hedgeDelayMs). */
  private updateBestP95(): void {
    this.sinceBestP95 = 0;
    const now = Date.now();
    const head = this.bestHead();
    let min = -1;
    for (const u of this.upstreams) {
      if (!this.selectable(u, now, head)) continue;
      const p = u.latency.p95();
      if (p >= 0 && (min < 0 || p < min)) min = p;
    }
    this.bestP95Ms = min;
  }

  /**
   * One health-check round over every upstream (head height, latency; failures feed the breaker), then,
   * with the chain watch on, each node that answered its probe is polled for its finalized head and head
   * hash, and the network's finalized head moves up when they agree on a higher one.
   */
  async healthCheck(): Promise<void> {
    const substrate = this.record.protocol === "SUBSTRATE";
    const body = substrate ? SUBSTRATE_PROBE : EVM_PROBE;
    const chain = this.chain;
    if (chain === undefined) {
      await Promise.all(this.upstreams.map((u) => this.probe(u, body, substrate)));
      return;
    }
    // Polled only after a probe that got a head, so a hung node costs the round one probe timeout, as
    // before; a node that answers probes but hangs on these reads adds at most two more.
    await Promise.all(
      this.upstreams.map(async (u) => {
        if (await this.probe(u, body, substrate)) await chain.poll(u, substrate);
      }),
    );
    const now = Date.now();
    const best = this.bestHead();
    const live = this.upstreams.filter((u) => this.selectable(u, now, best));
    if (chain.settle(live, best)) this.metrics.networkFinalized(this.record.slug, chain.finalized);
  }

  /**
   * One health probe of `u` (head height; every failure, timeouts included, counts toward its breaker),
   * unless one is running already. Also run at once when a client call to `u` timed out. True when it
   * got a head.
   */
  private async probe(
    u: Upstream,
    body?: string,
    substrate = this.record.protocol === "SUBSTRATE",
  ): Promise<boolean> {
    if (u.probeRunning) return false;
    // An open breaker is probed only once its cooldown has passed, a backed-off node once it has ended.
    if (!u.available(Date.now())) {
      this.reportHealth(u);
      return false;
    }
    // A node selection steers away from gets no samples: its window is retired by time here (see
    // LatencyWindow), so that it earns traffic back once its probes say it recovered.
    u.latency.expire(performance.now());
    let gotHead = false;
    u.probeRunning = true;
    try {
      // Only a head or the node's rate-limit error is a valid answer; anything else settles as a failed
      // probe (one count toward the breaker, never a success first).
      const res = await u.exchange(
        body ?? (substrate ? SUBSTRATE_PROBE : EVM_PROBE),
        ExchangeKind.Probe,
        (reply): number | typeof RATE_LIMITED | typeof INVALID_REPLY => {
          const head = parseHead(reply.text, substrate);
          if (head !== undefined) return head;
          return isRateLimitReply(reply.text) ? RATE_LIMITED : INVALID_REPLY;
        },
      );
      if (res.ok) {
        if (res.value === RATE_LIMITED) u.backOff(undefined);
        else {
          u.head = res.value;
          gotHead = true;
        }
      }
    } finally {
      u.probeRunning = false;
    }
    this.reportHealth(u);
    return gotHead;
  }

  private reportHealth(u: Upstream): void {
    const healthy = this.selectable(u, Date.now(), this.bestHead());
    this.metrics.upstreamHealth(this.record.slug, u.id, healthy, u.head, u.latencyEwmaMs);
    this.metrics.upstreamOldestState(this.record.slug, u.id, u.caps.oldestServed(u.head));
  }

  /**
   * One state-probe round (UPSTREAM_STATE_PROBE_INTERVAL_MS): finds, for every upstream not declared
   * ARCHIVE, the oldest block whose state it serves (state-probe.ts). `onlyUnknown`: just the ones not
   * probed yet (new upstreams, a record change), as after every networks update. Never throws.
   */
  async probeStates(onlyUnknown = false): Promise<void> {
    const substrate = this.record.protocol === "SUBSTRATE";
    await Promise.all(this.upstreams.map((u) => this.probeState(u, substrate, onlyUnknown)));
  }

  private async probeState(u: Upstream, substrate: boolean, onlyUnknown: boolean): Promise<void> {
    const caps = u.caps;
    if (!caps.wantsProbe || caps.probeRunning || (onlyUnknown && caps.probedOldest >= 0)) return;
    // Needs the node's head (from a health check), and a node the breaker lets calls through to.
    const head = u.head;
    if (head < 1 || u.breakerOpen || !u.available(Date.now())) return;
    caps.probeRunning = true;
    try {
      const guess = caps.estimatedOldest(head);
      const oldest = await findOldestState(
        head,
        substrate ? substrateAsk(u) : evmAsk(u),
        guess > 0 ? guess : undefined,
      );
      if (oldest !== undefined && this.upstreams.includes(u)) caps.recordProbe(oldest, head);
    } finally {
      caps.probeRunning = false;
    }
    this.metrics.upstreamOldestState(this.record.slug, u.id, caps.oldestServed(u.head));
  }

  /**
   * Snapshot for diagnostics and tests. `oldestStateBlock`: what calls are routed by (-1 = unknown);
   * `finalized`: the node's finalized head (-1 = none or watch off).
   */
  describe(): {
    id: string;
    head: number;
    finalized: number;
    breakerOpen: boolean;
    latencyEwmaMs: number;
    inFlight: number;
    archiveMode: string;
    oldestStateBlock: number;
    methodFamilies: string[];
    maxRequestsPerSecond: number | null;
    overBudget: boolean;
  }[] {
    const now = Date.now();
    return this.upstreams.map((u) => ({
      id: u.id,
      head: u.head,
      finalized: this.chain?.nodeFinalized(u) ?? -1,
      breakerOpen: u.breakerOpen,
      latencyEwmaMs: u.latencyEwmaMs,
      inFlight: u.inFlight,
      archiveMode: u.caps.archiveMode,
      oldestStateBlock: u.caps.oldestServed(u.head),
      methodFamilies: familyList(u.caps.families),
      maxRequestsPerSecond: u.caps.maxRequestsPerSecond === 0 ? null : u.caps.maxRequestsPerSecond,
      overBudget: u.caps.overBudget(now),
    }));
  }

  /** What the health publisher writes for this network (health-publisher.ts, HealthRecord). */
  healthSnapshot(): { head: number; upstreams: UpstreamHealth[] } {
    const now = Date.now();
    const best = this.bestHead();
    return {
      head: best,
      upstreams: this.upstreams.map((u) => ({
        id: u.id,
        healthy: this.selectable(u, now, best),
        head: u.head,
        lagBlocks: u.head < 0 || best < 0 ? null : Math.max(0, best - u.head),
        latencyEwmaMs: Math.round(u.latencyEwmaMs * 1000) / 1000,
        errorRate: Math.round(u.errorRateEwma * 10_000) / 10_000,
        breakerOpen: u.breakerOpen,
      })),
    };
  }

  async close(): Promise<void> {
    const all = this.upstreams;
    this.upstreams = [];
    await Promise.all(all.map((u) => u.close()));
  }
}

/**
 * Tail latencies closer than this (ms), or than this factor, are a tie in select: noise between healthy
 * nodes, where a node slow on a share of its calls (a p90 of hundreds of ms) differs by far more.
 */
const LATENCY_TIE_MS = 10;
const LATENCY_TIE_RATIO = 1.5;

/**
 * An upstream's latency as selection weighs it: the tail, not only the mean. A node slow on 30% of its
 * calls has an EWMA that swings with each answer but a p90 that stays its slow answers' time, so it loses
 * the comparison while it is slow.
 */
function tailLatencyMs(u: Upstream): number {
  return Math.max(u.latency.p90(), u.latencyEwmaMs);
}

/** What else selection weighs: calls in flight, the error rate, over the upstream's weight. */
function load(u: Upstream): number {
  return ((u.inFlight + 1) * (1 + 10 * u.errorRateEwma)) / u.weight;
}

/** One JSON-RPC request body for `c` with upstream id `gid`; `paramsJson` its params already serialised. */
function singleBody(gid: number, c: OutgoingCall, paramsJson: string | undefined): string {
  return c.params === undefined
    ? `{"jsonrpc":"2.0","id":${gid},"method":${JSON.stringify(c.method)}}`
    : `{"jsonrpc":"2.0","id":${gid},"method":${JSON.stringify(c.method)},"params":${paramsJson ?? JSON.stringify(c.params)}}`;
}

/** The reply check of a single call sent with id `gid` (see exchangeWithFailover). */
function singleCheck(gid: number): (body: ReplyBody) => Reply | typeof INVALID_REPLY | typeof RATE_LIMITED {
  return (body) => {
    const reply = parseSingleReply(body.text, gid);
    if (reply === undefined) return INVALID_REPLY;
    return reply.kind === ReplyKind.Error && isRateLimitTail(reply.tail) ? RATE_LIMITED : reply;
  };
}

const EVM_PROBE = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const SUBSTRATE_PROBE = '{"jsonrpc":"2.0","id":1,"method":"chain_getHeader","params":[]}';

/** The row after every attempt failed: no upstream could be tried, else the last failure's. */
function failureRow(f: ExchangeFailure | undefined, u: Upstream | undefined): ErrorRow {
  if (f === undefined || u === undefined) return GatewayError.NoUpstream;
  return exchangeFailureRow(f, u);
}

const REFUSED = Symbol("batch refused");

/** A reply that cannot be used, through no fault of the upstream's (see exchangeWithFailover). */
const NOT_BAD = Symbol("unusable, upstream not at fault");

/** A reply that is the node's JSON-RPC rate-limit error (see isRateLimitTail). */
const RATE_LIMITED = Symbol("rate limited by the node");

function parseBatchReply(text: string, base: number, n: number): CallResult[] | undefined | typeof REFUSED {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(value)) {
    const isErrorObject = value !== null && typeof value === "object" && "error" in value;
    return isErrorObject ? REFUSED : undefined;
  }
  const out = new Array<CallResult>(n);
  for (const el of value) {
    if (el === null || typeof el !== "object") continue;
    const id = (el as { id?: unknown }).id;
    if (typeof id !== "number") continue;
    const i = id - base;
    if (i < 0 || i >= n) continue;
    const reply: Reply | undefined = replyFromValue(el as Record<string, unknown>);
    if (reply !== undefined) out[i] = { ok: true, reply };
  }
  for (let i = 0; i < n; i++) {
    if (out[i] === undefined) out[i] = { ok: false, error: GatewayError.UpstreamBadResponse };
  }
  return out;
}

/** A probe's answer that is the node's JSON-RPC rate-limit error (throttled, not sick). */
function isRateLimitReply(text: string): boolean {
  const reply = parseSingleReply(text, 1);
  return reply !== undefined && reply.kind === ReplyKind.Error && isRateLimitTail(reply.tail);
}

function parseHead(text: string, substrate: boolean): number | undefined {
  try {
    const v = JSON.parse(text) as { result?: unknown };
    const hex = substrate ? (v.result as { number?: unknown } | null)?.number : v.result;
    if (typeof hex !== "string" || !hex.startsWith("0x")) return undefined;
    const n = Number.parseInt(hex, 16);
    return Number.isFinite(n) ? n : undefined;
  } catch {
    return undefined;
  }
}
