import { type ErrorRow, responseTooLargeRow } from "../../../shared/src/jsonrpc/errors";
import type { NetworkRecord, UpstreamHealth } from "../../../shared/src/redis/records";
import { MethodWeights, UNIT_WEIGHTS } from "../limits/compute-units";
import type { Metrics } from "../metrics/metrics";
import type { RpcCall } from "../rpc/parse";
import { type Need, restricts } from "./capabilities";
import { ChainWatch } from "./chain-watch";
import { DEFAULT_HEAD_OUTLIER_BLOCKS } from "./head";
import type { HedgeOptions } from "./hedge";
import { BatchRouter } from "./pool/batches";
import { ExchangeBook } from "./pool/booking";
import { type PoolClock, SYSTEM_CLOCK } from "./pool/clock";
import { Coalescer } from "./pool/coalescer";
import { EmptyRetry } from "./pool/empty-retry";
import { PoolExchanges } from "./pool/exchanges";
import { Failover } from "./pool/failover";
import { HeadTracker } from "./pool/head-tracker";
import { PoolHealth, type UpstreamDescription } from "./pool/health";
import { Hedger } from "./pool/hedger";
import { PoolMembership } from "./pool/membership";
import { PoolMetricHooks } from "./pool/metric-hooks";
import { Selector } from "./pool/selector";
import type { VerbatimReply } from "./pool/verbatim-reply";
import { IdSequence, type OutgoingCall } from "./pool/wire";
import type { CallResult } from "./reply";
import { DEFAULT_MAX_RESPONSE_BYTES, type Upstream, type UpstreamOptions } from "./upstream";

export { isHeavy, type OutgoingCall, type UpstreamSpan } from "./pool/wire";

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

/**
 * A network's upstream nodes, behind one front: selection (weight, latency, in-flight load among healthy
 * nodes), coalescing, failover and hedging of exchanges, empty-answer retries, health checks, and head
 * tracking for the cache. Each concern is a part under upstream/pool/ (docs/architecture.md "Upstreams");
 * this class wires them and keeps the pool's API. Every metric the pool writes goes through its
 * PoolMetricHooks (upstream/pool/metric-hooks.ts).
 */
export class NetworkPool {
  record: NetworkRecord;
  /** The record's method weights in compute units, rebuilt with each record (admission weighs requests). */
  weights: MethodWeights = UNIT_WEIGHTS;
  private readonly members: PoolMembership;
  private readonly heads: HeadTracker;
  /** Finalized head and reorgs (undefined when CACHE_FINALITY_ENABLED is off). */
  private readonly chain: ChainWatch | undefined;
  private readonly selector: Selector;
  private readonly health: PoolHealth;
  private readonly exchanges: PoolExchanges;
  private readonly coalescer: Coalescer;
  private readonly batches: BatchRouter;
  /** Every metric the pool writes (network slug bound): the place for a new pool series. */
  private readonly hooks: PoolMetricHooks;

  constructor(
    record: NetworkRecord,
    private readonly opts: PoolOptions,
    metrics: Metrics,
    clock: PoolClock = SYSTEM_CLOCK,
  ) {
    this.record = record;
    const hooks = new PoolMetricHooks(metrics, () => this.record.slug);
    this.members = new PoolMembership(opts, hooks.upstreamEvents);
    this.heads = new HeadTracker(this.members, opts.headOutlierBlocks ?? DEFAULT_HEAD_OUTLIER_BLOCKS);
    this.chain = opts.finality ? new ChainWatch({ reorg: (from) => this.reorged(from) }) : undefined;
    this.selector = new Selector(this.members, this.heads, opts, clock);
    this.health = new PoolHealth(
      this.members,
      this.selector,
      this.heads,
      this.chain,
      hooks,
      clock,
      () => this.record.protocol === "SUBSTRATE",
    );
    const book = new ExchangeBook(hooks, clock, (u) => this.health.probe(u));
    const hedger = opts.hedge?.enabled
      ? new Hedger(opts.hedge, this.members, this.selector, book, hooks, clock)
      : undefined;
    const failover = new Failover(opts, this.members, this.selector, book, hedger, hooks, clock);
    const ids = new IdSequence();
    const emptyRetry = new EmptyRetry(this.members, this.selector, this.heads, book, ids, hooks, clock);
    this.exchanges = new PoolExchanges(failover, emptyRetry, book, ids, clock);
    this.coalescer = new Coalescer(opts.coalesceMax, this.exchanges, clock);
    const maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const tooLargeRow: ErrorRow = responseTooLargeRow(maxResponseBytes);
    this.batches = new BatchRouter(
      () => this.record,
      { logsSplitConcurrency: opts.logsSplitConcurrency, maxResponseBytes, tooLargeRow },
      this.selector,
      this.heads,
      this.exchanges,
      hooks,
    );
    this.hooks = hooks;
    this.update(record);
  }

  get slug(): string {
    return this.record.slug;
  }

  /** The current nodes (diagnostics and tests). */
  private get upstreams(): Upstream[] {
    return this.members.upstreams;
  }

  /** Applies a new record: keeps unchanged upstreams (and their health), adds new, closes removed. */
  update(record: NetworkRecord): void {
    this.weights = record.methodCosts === undefined ? UNIT_WEIGHTS : new MethodWeights(record.methodCosts);
    this.record = record;
    this.exchanges.batchesRefused = false;
    const added = this.members.update(record);
    // A new node may be on another chain (the reason the response cache is cleared when a network's
    // definition changes): its finalized head is learnt afresh, not assumed from the others'.
    if (added) this.chain?.reset();
    else this.chain?.retain(this.members.upstreams);
  }

  /** See HeadTracker.best: the highest health-checked head another upstream confirms (-1 when unknown). */
  bestHead(): number {
    return this.heads.best();
  }

  /** See HeadTracker.cacheHead: the head the cache keys per-block entries to. */
  cacheHead(): number {
    return this.heads.cacheHead();
  }

  /**
   * The head answers are served at (docs/contracts.md "A head that never goes back"): the highest
   * cacheHead this pool has seen, so it never decreases, whatever node answers next, a breaker opening on
   * the node ahead, or a reorg forgetting a head seen in an answer. Other instances' and threads' served
   * heads come in through observeHead (ServedHeadShare). -1 while unknown.
   */
  servedHead(): number {
    return this.heads.servedAt(this.heads.best());
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
    this.heads.reorged(fromHeight);
    this.opts.onReorg?.(this.record.slug, fromHeight);
  }

  /** See HeadTracker.observe: a head height seen in an answer. */
  observeHead(n: number): void {
    this.heads.observe(n);
  }

  /** Number of upstreams a request could go to now. */
  healthyCount(): number {
    return this.selector.healthyCount();
  }

  /** What a call requires of its upstream (see Selector.need); undefined: anything does. */
  need(c: OutgoingCall): Need | undefined {
    return this.selector.need(c);
  }

  /** Picks an upstream (see Selector.select). */
  select(exclude: readonly Upstream[] | undefined, heavy = false, need?: Need): Upstream | undefined {
    return this.selector.select(exclude, heavy, need);
  }

  /**
   * Forwards one call with failover. Never throws. `paramsJson` is the params already serialised (the
   * cache key needs them too), `undefined` to serialise here. Single calls of one event-loop turn may
   * share one upstream batch (Coalescer); an eth_getLogs whose range is split goes out as sub-calls.
   */
  call(c: OutgoingCall, paramsJson?: string): Promise<CallResult> {
    if (c.method === "eth_getLogs") {
      const split = this.batches.logsSplit(c.params);
      if (split !== undefined) return this.batches.callSplit(c.method, split);
    }
    const need = this.selector.need(c);
    const r = this.coalescer.route(c, paramsJson, need);
    return need === undefined || !restricts(need) ? r : r.then((res) => this.hooks.counted(need, res));
  }

  /** See Selector.selectableAt: the upstreams at or above `height`, highest head first. */
  selectableAt(height: number): Upstream[] {
    return this.selector.selectableAt(height);
  }

  /** The upstream of this network with id `id`, if it is still one. */
  upstreamById(id: string): Upstream | undefined {
    return this.members.byId(id);
  }

  /** Sends one call to `u` alone (see PoolExchanges.on). Never throws. */
  callOn(u: Upstream, c: OutgoingCall): Promise<CallResult> {
    return this.exchanges.on(u, c);
  }

  /** Forwards a batch (see BatchRouter.call). Element i of the result answers calls[i]. */
  callBatch(calls: readonly OutgoingCall[], traceparent?: string): Promise<CallResult[]> {
    return this.batches.call(calls, traceparent);
  }

  /** Upstream exchanges callBatch spreads a batch of `n` over: one per healthy upstream, chunks of >= 10. */
  chunksFor(n: number): number {
    return this.batches.chunksFor(n);
  }

  /** Forwards a client batch as its own text (see PoolExchanges.verbatim). */
  callVerbatim(
    text: string | Uint8Array,
    calls: readonly RpcCall[],
    traceparent?: string,
  ): Promise<{ ok: true; value: VerbatimReply } | { ok: false; error: ErrorRow }> {
    return this.exchanges.verbatim(text, calls, traceparent);
  }

  /** Upstream exchanges callBatch starts for `calls` (see BatchRouter.exchangesFor). */
  exchangesFor(calls: readonly OutgoingCall[]): number {
    return this.batches.exchangesFor(calls);
  }

  /** Whether callBatch handles any of `calls` on its own (see BatchRouter.sendsApart). */
  sendsApart(calls: readonly OutgoingCall[]): boolean {
    return this.batches.sendsApart(calls);
  }

  /** One health-check round (see PoolHealth.check). */
  healthCheck(): Promise<void> {
    return this.health.check();
  }

  /** One state-probe round (see PoolHealth.probeStates). Never throws. */
  probeStates(onlyUnknown = false): Promise<void> {
    return this.health.probeStates(onlyUnknown);
  }

  /** Snapshot for diagnostics and tests (see PoolHealth.describe). */
  describe(): UpstreamDescription[] {
    return this.health.describe();
  }

  /** What the health publisher writes for this network (health-publisher.ts, HealthRecord). */
  healthSnapshot(): { head: number; upstreams: UpstreamHealth[] } {
    return this.health.snapshot();
  }

  close(): Promise<void> {
    return this.members.close();
  }
}
