import { Counter, Gauge, Registry } from "prom-client";
import { HotHistogram, type SnapshotValue } from "./hot-histogram";
import { METHOD_LATENCY_HELP, MethodLatency } from "./method-latency";

/**
 * Every series of one registry as `registry.getMetricsAsJSON()` gives them: what a thread hands the main
 * thread for the /metrics of the whole process (threads/metrics.ts aggregates them).
 */
export type MetricsSnapshot = Awaited<ReturnType<Registry["getMetricsAsJSON"]>>;
type SnapshotMetric = MetricsSnapshot[number];

/** What the data plane measures. The hot path calls these; implementations must be cheap. */
export interface Metrics {
  /**
   * One request object answered (a batch of 30 records 30), by network and dashboard category; `count`
   * request objects answered alike at once (a batch's run of elements with the same category).
   */
  request(network: string, category: string, seconds: number, count?: number): void;
  /**
   * `count` request objects of one method answered after `seconds`, under the method's histogram
   * (metrics/method-latency.ts: a fixed set of methods, the rest as `other`). The request accounting calls
   * it once per run of request objects alike in method, next to the usage record.
   */
  methodLatency(network: string, method: string, seconds: number, count: number): void;
  cache(network: string, hit: boolean): void;
  /** One upstream exchange; `cancelled`: a hedged read's exchange stopped because the other answered first. */
  upstreamRequest(network: string, upstream: string, outcome: UpstreamOutcome, seconds: number): void;
  /**
   * A hedged read's copy (upstream/hedge.ts): `won` its answer was used, `lost` it was not (the first node
   * answered first, or the copy failed), `capped` not sent because HEDGE_MAX_PERCENT was spent.
   */
  upstreamHedge(network: string, outcome: "won" | "lost" | "capped"): void;
  /**
   * A null answer asked again on an upstream with a higher head (upstream/empty-answer.ts): `found` that
   * one had a result, `empty` it answered null (or an error) too, `failed` its exchange failed.
   */
  upstreamEmptyRetry(network: string, outcome: "found" | "empty" | "failed"): void;
  upstreamHealth(network: string, upstream: string, healthy: boolean, head: number, latencyMs: number): void;
  /** The network's finalized head moved up to `height` (the chain watch, CACHE_FINALITY_ENABLED). */
  networkFinalized(network: string, height: number): void;
  /** A reorg seen on the network; `droppedEntries` per-block cache entries were dropped. */
  reorg(network: string, droppedEntries: number): void;
  /**
   * A message refused by the limits: `endpoint` app | public, `reason` rate_limit | batch_exceeds_limit |
   * store_unavailable | daily_limit | monthly_limit, `elements` its request objects.
   */
  limitRefused(endpoint: string, reason: string, elements: number): void;
  /** Registers the probe read at scrape time for the limits' Redis health gauge. */
  limitsHealth(probe: () => LimitsRedisHealth): void;
  /** An upstream's circuit breaker opened; `cause` unreachable | bad_response | health_probe. */
  upstreamBreakerOpened(network: string, upstream: string, cause: string): void;
  /** An upstream answered 429 (or a JSON-RPC rate-limit error) and is sent nothing for `ms`. */
  upstreamBackoff(network: string, upstream: string, ms: number): void;
  /**
   * A call that needs a capability (`need` state | family | state_family: the state at an old block, a
   * declared method family), `outcome` routed (to an upstream that can serve it) | refused
   * (no_capable_upstream).
   */
  capabilityRouting(network: string, need: string, outcome: "routed" | "refused"): void;
  /** `requests` calls went to an upstream past its maxRequestsPerSecond (nothing else was selectable). */
  upstreamOverBudget(network: string, upstream: string, requests: number): void;
  /** The oldest block whose state calls are routed to the upstream for (0 archive, -1 unknown). */
  upstreamOldestState(network: string, upstream: string, block: number): void;
  /**
   * One eth_getLogs split into `subCalls` sub-range calls (retries included), `halvings` of them after a
   * node refused a range as too large (upstream/logs-split.ts).
   */
  logsSplit(network: string, subCalls: number, halvings: number): void;
  /**
   * An exception a uWS handler (or the process) let through, caught by the guard: `handler` names the
   * route / WebSocket callback (`rpc`, `node`, `ws.message`, ..., `process.unhandledRejection`).
   */
  handlerException(handler: string): void;
  /** Prometheus text exposition; `undefined` when metrics are off. */
  render(): Promise<string | undefined>;
  readonly contentType: string;
}

export type UpstreamOutcome = "ok" | "error" | "timeout" | "cancelled";

/** Whether each limits component reaches Redis; null = that component does not use Redis. */
export interface LimitsRedisHealth {
  rateLimit: boolean | null;
  quota: boolean | null;
}

export class NoopMetrics implements Metrics {
  readonly contentType = "text/plain";
  request(): void {}
  methodLatency(_network: string, _method: string, _seconds: number, _count: number): void {}
  cache(): void {}
  upstreamRequest(_network: string, _upstream: string, _outcome: UpstreamOutcome, _seconds: number): void {}
  upstreamHedge(_network: string, _outcome: "won" | "lost" | "capped"): void {}
  upstreamEmptyRetry(_network: string, _outcome: "found" | "empty" | "failed"): void {}
  upstreamHealth(): void {}
  networkFinalized(): void {}
  reorg(): void {}
  limitRefused(_endpoint: string, _reason: string, _elements: number): void {}
  limitsHealth(): void {}
  upstreamBreakerOpened(): void {}
  upstreamBackoff(): void {}
  capabilityRouting(_network: string, _need: string, _outcome: "routed" | "refused"): void {}
  upstreamOverBudget(_network: string, _upstream: string, _requests: number): void {}
  upstreamOldestState(_network: string, _upstream: string, _block: number): void {}
  logsSplit(_network: string, _subCalls: number, _halvings: number): void {}
  handlerException(_handler: string): void {}
  async render(): Promise<string | undefined> {
    return undefined;
  }
}

/** Help text of the series kept outside prom-client (written by `render` and `snapshot` alike). */
const HELP = {
  rpcgw_requests_total: "JSON-RPC request objects answered, by network and category",
  rpcgw_request_duration_seconds: "Time from request received to response written",
  rpcgw_cache_lookups_total: "Response cache lookups by result (hit, miss)",
  rpcgw_upstream_requests_total: "Upstream HTTP exchanges by outcome",
  rpcgw_upstream_duration_seconds: "Upstream exchange latency",
  rpcgw_limit_refusals_total:
    "Messages (HTTP requests, WebSocket messages) refused by rate limits or quotas, by endpoint and reason",
  rpcgw_limit_refused_elements_total: "Request objects in the refused messages, by endpoint and reason",
  rpcgw_capability_routing_total:
    "Calls that need a capability (state at an old block, a method family), routed to an upstream that can serve them or refused (no_capable_upstream)",
  rpcgw_logs_split_calls_total: "eth_getLogs calls whose block range was split into sub-calls",
  rpcgw_logs_split_subcalls_total: "Sub-range calls sent for split eth_getLogs (retries included)",
  rpcgw_logs_split_halvings_total:
    "Sub-ranges a node refused as too large (range, results or response size), retried in halves",
} as const;

/** The three logs-split counters, in the order of their values in NetworkStats' split tuples. */
const SPLIT_SERIES = [
  "rpcgw_logs_split_calls_total",
  "rpcgw_logs_split_subcalls_total",
  "rpcgw_logs_split_halvings_total",
] as const;

function label(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

interface NetworkStats {
  readonly network: string;
  readonly labels: string;
  readonly byCategory: Map<string, number>;
  readonly latency: HotHistogram;
  cacheHits: number;
  cacheMisses: number;
}

interface UpstreamStats {
  readonly network: string;
  readonly upstream: string;
  readonly labels: string;
  ok: number;
  error: number;
  timeout: number;
  cancelled: number;
  readonly latency: HotHistogram;
}

/**
 * Prometheus metrics. The per-request series (requests, latency, cache, upstream exchanges) are plain
 * counters and typed-array histograms rendered to the text format at scrape time, so the hot path does no
 * label hashing or object allocation; the rarely-set gauges (upstream health) use prom-client, and the
 * two are served together on /metrics.
 */
export class PromMetrics implements Metrics {
  readonly registry = new Registry();
  readonly contentType: string;
  private readonly networks = new Map<string, NetworkStats>();
  private readonly upstreams = new Map<string, UpstreamStats>();
  private readonly upstreamUp: Gauge<"network" | "upstream">;
  private readonly upstreamHead: Gauge<"network" | "upstream">;
  private readonly upstreamLatencyEwma: Gauge<"network" | "upstream">;
  private readonly upstreamLag: Gauge<"network" | "upstream">;
  private readonly headAdvanced: Gauge<"network">;
  /** Per network: each upstream's last probed head (-1 unknown), for the lag series. */
  private readonly heads = new Map<string, Map<string, number>>();
  /** Per network: the highest head seen (its rises set rpcgw_network_head_advanced_timestamp_seconds). */
  private readonly headRises = new Map<string, number>();
  private readonly methods = new MethodLatency();
  private readonly finalizedBlock: Gauge<"network">;
  private readonly reorgs: Counter<"network">;
  private readonly reorgDrops: Counter<"network">;
  /** Per network: [eth_getLogs calls split, sub-calls sent, halvings]. */
  private readonly splits = new Map<string, [number, number, number]>();
  /** `endpoint\u0000reason` -> [messages, request objects] refused. */
  private readonly refusals = new Map<string, [number, number]>();
  private limitsProbe: (() => LimitsRedisHealth) | undefined;
  private readonly limitsRedisUp: Gauge<"component">;
  private readonly breakerOpens: Counter<"network" | "upstream" | "cause">;
  private readonly backoffs: Counter<"network" | "upstream">;
  private readonly handlerExceptions: Counter<"handler">;
  /** `network\u0000need\u0000outcome` -> calls (plain counts: indexers send many calls with a need). */
  private readonly capabilityCalls = new Map<string, number>();
  private readonly overBudget: Counter<"network" | "upstream">;
  private readonly oldestState: Gauge<"network" | "upstream">;
  private readonly hedges: Counter<"network" | "outcome">;
  private readonly emptyRetries: Counter<"network" | "outcome">;

  constructor() {
    this.contentType = this.registry.contentType;
    const registers = [this.registry];
    this.upstreamUp = new Gauge({
      name: "rpcgw_upstream_healthy",
      help: "1 when the upstream is selectable (healthy, breaker closed, not lagging)",
      labelNames: ["network", "upstream"],
      registers,
      // Threads probe their own pools: 1 for the process only when every thread can select it.
      aggregator: "min",
    });
    this.upstreamHead = new Gauge({
      name: "rpcgw_upstream_head_block",
      help: "Head block height last reported by the upstream",
      labelNames: ["network", "upstream"],
      registers,
      aggregator: "max",
    });
    this.upstreamLatencyEwma = new Gauge({
      name: "rpcgw_upstream_latency_ewma_seconds",
      help: "Exponentially weighted moving average of upstream latency",
      labelNames: ["network", "upstream"],
      registers,
      aggregator: "average",
    });
    this.upstreamLag = new Gauge({
      name: "rpcgw_upstream_lag_blocks",
      help: "Blocks the upstream's head is behind the highest head among the network's upstreams",
      labelNames: ["network", "upstream"],
      registers,
      aggregator: "max",
      collect: () => {
        for (const [network, heads] of this.heads) {
          let best = -1;
          for (const h of heads.values()) if (h > best) best = h;
          for (const [upstream, h] of heads)
            if (h >= 0 && best >= 0) this.upstreamLag.labels(network, upstream).set(best - h);
        }
      },
    });
    this.headAdvanced = new Gauge({
      name: "rpcgw_network_head_advanced_timestamp_seconds",
      help: "Unix time when the highest head among the network's upstreams last rose (time() minus it: how long every upstream has been stuck or behind)",
      labelNames: ["network"],
      registers,
      // The thread that saw the newest head is right about the network.
      aggregator: "max",
    });
    this.finalizedBlock = new Gauge({
      name: "rpcgw_network_finalized_block",
      help: "The network's finalized head as the chain watch tracks it (lowest finalized block among its selectable upstreams; never lowered)",
      labelNames: ["network"],
      registers,
    });
    this.reorgs = new Counter({
      name: "rpcgw_reorgs_total",
      help: "Reorgs the chain watch saw (an upstream's head going back, or a new hash at the same height)",
      labelNames: ["network"],
      registers,
    });
    this.reorgDrops = new Counter({
      name: "rpcgw_cache_reorg_dropped_total",
      help: "Per-block response cache entries dropped after a reorg",
      labelNames: ["network"],
      registers,
    });
    this.breakerOpens = new Counter({
      name: "rpcgw_upstream_breaker_opens_total",
      help: "Upstream circuit breakers opened, by what tripped them (unreachable, bad_response, health_probe)",
      labelNames: ["network", "upstream", "cause"],
      registers,
    });
    this.backoffs = new Counter({
      name: "rpcgw_upstream_backoffs_total",
      help: "Upstream rate-limit back-offs (HTTP 429 or a JSON-RPC rate-limit error); not breaker failures",
      labelNames: ["network", "upstream"],
      registers,
    });
    this.limitsRedisUp = new Gauge({
      name: "rpcgw_limits_redis_up",
      help: "1 while the rate limiter (component=ratelimit) or the quota tracker (component=quota) reaches Redis; 0 while it limits / counts locally",
      labelNames: ["component"],
      registers,
      aggregator: "min",
      collect: () => {
        const h = this.limitsProbe?.();
        if (h === undefined) return;
        if (h.rateLimit !== null) this.limitsRedisUp.labels("ratelimit").set(h.rateLimit ? 1 : 0);
        if (h.quota !== null) this.limitsRedisUp.labels("quota").set(h.quota ? 1 : 0);
      },
    });
    this.overBudget = new Counter({
      name: "rpcgw_upstream_over_budget_requests_total",
      help: "Calls sent to an upstream past its maxRequestsPerSecond budget because no other upstream was selectable",
      labelNames: ["network", "upstream"],
      registers,
    });
    this.oldestState = new Gauge({
      name: "rpcgw_upstream_oldest_state_block",
      help: "Oldest block whose state calls are routed to the upstream for (0 = archive, -1 = not known yet)",
      labelNames: ["network", "upstream"],
      registers,
    });
    this.hedges = new Counter({
      name: "rpcgw_upstream_hedges_total",
      help: "Hedged reads' second copies: won (its answer was used), lost (the first node answered first, or the copy failed), capped (not sent: HEDGE_MAX_PERCENT spent)",
      labelNames: ["network", "outcome"],
      registers,
    });
    this.emptyRetries = new Counter({
      name: "rpcgw_upstream_empty_retries_total",
      help: "Null answers for a block, transaction or receipt asked again on an upstream with a higher head: found (it had a result), empty (null again, or an error), failed (the exchange failed)",
      labelNames: ["network", "outcome"],
      registers,
    });
    this.handlerExceptions = new Counter({
      name: "rpcgw_handler_exceptions_total",
      help: "Exceptions a request / WebSocket handler let through, caught by the guard (answered 500 or socket closed with 1011), by handler",
      labelNames: ["handler"],
      registers,
    });
  }

  handlerException(handler: string): void {
    this.handlerExceptions.labels(handler).inc();
  }

  capabilityRouting(network: string, need: string, outcome: "routed" | "refused"): void {
    const k = `${network}\u0000${need}\u0000${outcome}`;
    this.capabilityCalls.set(k, (this.capabilityCalls.get(k) ?? 0) + 1);
  }

  upstreamOverBudget(network: string, upstream: string, requests: number): void {
    this.overBudget.labels(network, upstream).inc(requests);
  }

  upstreamOldestState(network: string, upstream: string, block: number): void {
    this.oldestState.labels(network, upstream).set(block);
  }

  limitRefused(endpoint: string, reason: string, elements: number): void {
    const k = `${endpoint}\u0000${reason}`;
    const c = this.refusals.get(k);
    if (c === undefined) this.refusals.set(k, [1, elements]);
    else {
      c[0]++;
      c[1] += elements;
    }
  }

  limitsHealth(probe: () => LimitsRedisHealth): void {
    this.limitsProbe = probe;
  }

  networkFinalized(network: string, height: number): void {
    this.finalizedBlock.labels(network).set(height);
  }

  reorg(network: string, droppedEntries: number): void {
    this.reorgs.labels(network).inc();
    this.reorgDrops.labels(network).inc(droppedEntries);
  }

  upstreamHedge(network: string, outcome: "won" | "lost" | "capped"): void {
    this.hedges.labels(network, outcome).inc();
  }

  upstreamEmptyRetry(network: string, outcome: "found" | "empty" | "failed"): void {
    this.emptyRetries.labels(network, outcome).inc();
  }

  upstreamBreakerOpened(network: string, upstream: string, cause: string): void {
    this.breakerOpens.labels(network, upstream, cause).inc();
  }

  upstreamBackoff(network: string, upstream: string, _ms: number): void {
    this.backoffs.labels(network, upstream).inc();
  }

  logsSplit(network: string, subCalls: number, halvings: number): void {
    const c = this.splits.get(network);
    if (c === undefined) this.splits.set(network, [1, subCalls, halvings]);
    else {
      c[0]++;
      c[1] += subCalls;
      c[2] += halvings;
    }
  }

  private network(network: string): NetworkStats {
    let s = this.networks.get(network);
    if (s === undefined) {
      s = {
        network,
        labels: `network="${label(network)}"`,
        byCategory: new Map(),
        latency: new HotHistogram(),
        cacheHits: 0,
        cacheMisses: 0,
      };
      this.networks.set(network, s);
    }
    return s;
  }

  request(network: string, category: string, seconds: number, count = 1): void {
    const s = this.network(network);
    s.byCategory.set(category, (s.byCategory.get(category) ?? 0) + count);
    s.latency.observe(seconds, count);
  }

  methodLatency(network: string, method: string, seconds: number, count: number): void {
    this.methods.observe(network, method, seconds, count);
  }

  cache(network: string, hit: boolean): void {
    const s = this.network(network);
    if (hit) s.cacheHits++;
    else s.cacheMisses++;
  }

  upstreamRequest(network: string, upstream: string, outcome: UpstreamOutcome, seconds: number): void {
    const k = `${network}\u0000${upstream}`;
    let s = this.upstreams.get(k);
    if (s === undefined) {
      s = {
        network,
        upstream,
        labels: `network="${label(network)}",upstream="${label(upstream)}"`,
        ok: 0,
        error: 0,
        timeout: 0,
        cancelled: 0,
        latency: new HotHistogram(),
      };
      this.upstreams.set(k, s);
    }
    s[outcome]++;
    s.latency.observe(seconds);
  }

  upstreamHealth(network: string, upstream: string, healthy: boolean, head: number, latencyMs: number): void {
    this.upstreamUp.labels(network, upstream).set(healthy ? 1 : 0);
    this.upstreamHead.labels(network, upstream).set(head);
    this.upstreamLatencyEwma.labels(network, upstream).set(latencyMs / 1000);
    let heads = this.heads.get(network);
    if (heads === undefined) {
      heads = new Map();
      this.heads.set(network, heads);
    }
    heads.set(upstream, head);
    if (head >= 0) {
      const rise = this.headRises.get(network);
      if (rise === undefined || head > rise) {
        this.headRises.set(network, head);
        this.headAdvanced.labels(network).set(Date.now() / 1000);
      }
    }
  }

  /**
   * Every series `render` writes, as prom-client JSON: the typed-array series converted, then the
   * registry's own. Counters and histograms are summed across threads; the gauges above say how they
   * combine (`aggregator`).
   */
  async snapshot(): Promise<MetricsSnapshot> {
    const metric = (name: string, help: string, type: string, values: SnapshotValue[]): SnapshotMetric =>
      ({ name, help, type, values, aggregator: "sum" }) as unknown as SnapshotMetric;
    const requests: SnapshotValue[] = [];
    const latency: SnapshotValue[] = [];
    const cache: SnapshotValue[] = [];
    for (const s of this.networks.values()) {
      for (const [category, n] of s.byCategory)
        requests.push({ labels: { network: s.network, category }, value: n });
      s.latency.values("rpcgw_request_duration_seconds", { network: s.network }, latency);
      cache.push({ labels: { network: s.network, result: "hit" }, value: s.cacheHits });
      cache.push({ labels: { network: s.network, result: "miss" }, value: s.cacheMisses });
    }
    const methodLatency: SnapshotValue[] = [];
    this.methods.values(methodLatency);
    const upstreams: SnapshotValue[] = [];
    const upstreamLatency: SnapshotValue[] = [];
    for (const s of this.upstreams.values()) {
      const labels = { network: s.network, upstream: s.upstream };
      for (const outcome of ["ok", "error", "timeout", "cancelled"] as const)
        upstreams.push({ labels: { ...labels, outcome }, value: s[outcome] });
      s.latency.values("rpcgw_upstream_duration_seconds", labels, upstreamLatency);
    }
    const refusals: SnapshotValue[] = [];
    const refusedElements: SnapshotValue[] = [];
    for (const [k, [n, e]] of this.refusals) {
      const [endpoint, reason] = k.split("\u0000") as [string, string];
      refusals.push({ labels: { endpoint, reason }, value: n });
      refusedElements.push({ labels: { endpoint, reason }, value: e });
    }
    const capability: SnapshotValue[] = [];
    for (const [k, n] of this.capabilityCalls) {
      const [network, need, outcome] = k.split("\u0000") as [string, string, string];
      capability.push({ labels: { network, need, outcome }, value: n });
    }
    const splits = SPLIT_SERIES.map((name, k) =>
      metric(
        name,
        HELP[name],
        "counter",
        [...this.splits].map(([network, c]) => ({ labels: { network }, value: c[k]! })),
      ),
    );
    return [
      metric("rpcgw_requests_total", HELP.rpcgw_requests_total, "counter", requests),
      metric("rpcgw_request_duration_seconds", HELP.rpcgw_request_duration_seconds, "histogram", latency),
      metric("rpcgw_method_duration_seconds", METHOD_LATENCY_HELP, "histogram", methodLatency),
      metric("rpcgw_cache_lookups_total", HELP.rpcgw_cache_lookups_total, "counter", cache),
      metric("rpcgw_upstream_requests_total", HELP.rpcgw_upstream_requests_total, "counter", upstreams),
      metric(
        "rpcgw_upstream_duration_seconds",
        HELP.rpcgw_upstream_duration_seconds,
        "histogram",
        upstreamLatency,
      ),
      metric("rpcgw_limit_refusals_total", HELP.rpcgw_limit_refusals_total, "counter", refusals),
      metric(
        "rpcgw_limit_refused_elements_total",
        HELP.rpcgw_limit_refused_elements_total,
        "counter",
        refusedElements,
      ),
      metric("rpcgw_capability_routing_total", HELP.rpcgw_capability_routing_total, "counter", capability),
      ...splits,
      ...(await this.registry.getMetricsAsJSON()),
    ];
  }

  async render(): Promise<string | undefined> {
    const out: string[] = [
      `# HELP rpcgw_requests_total ${HELP.rpcgw_requests_total}`,
      "# TYPE rpcgw_requests_total counter",
    ];
    for (const s of this.networks.values()) {
      for (const [category, n] of s.byCategory) {
        out.push(`rpcgw_requests_total{${s.labels},category="${label(category)}"} ${n}`);
      }
    }
    out.push(
      `# HELP rpcgw_request_duration_seconds ${HELP.rpcgw_request_duration_seconds}`,
      "# TYPE rpcgw_request_duration_seconds histogram",
    );
    for (const s of this.networks.values()) s.latency.render("rpcgw_request_duration_seconds", s.labels, out);
    this.methods.render(out);
    out.push(
      `# HELP rpcgw_cache_lookups_total ${HELP.rpcgw_cache_lookups_total}`,
      "# TYPE rpcgw_cache_lookups_total counter",
    );
    for (const s of this.networks.values()) {
      out.push(`rpcgw_cache_lookups_total{${s.labels},result="hit"} ${s.cacheHits}`);
      out.push(`rpcgw_cache_lookups_total{${s.labels},result="miss"} ${s.cacheMisses}`);
    }
    out.push(
      `# HELP rpcgw_upstream_requests_total ${HELP.rpcgw_upstream_requests_total}`,
      "# TYPE rpcgw_upstream_requests_total counter",
    );
    for (const s of this.upstreams.values()) {
      out.push(`rpcgw_upstream_requests_total{${s.labels},outcome="ok"} ${s.ok}`);
      out.push(`rpcgw_upstream_requests_total{${s.labels},outcome="error"} ${s.error}`);
      out.push(`rpcgw_upstream_requests_total{${s.labels},outcome="timeout"} ${s.timeout}`);
      out.push(`rpcgw_upstream_requests_total{${s.labels},outcome="cancelled"} ${s.cancelled}`);
    }
    out.push(
      `# HELP rpcgw_upstream_duration_seconds ${HELP.rpcgw_upstream_duration_seconds}`,
      "# TYPE rpcgw_upstream_duration_seconds histogram",
    );
    for (const s of this.upstreams.values())
      s.latency.render("rpcgw_upstream_duration_seconds", s.labels, out);
    out.push(
      `# HELP rpcgw_limit_refusals_total ${HELP.rpcgw_limit_refusals_total}`,
      "# TYPE rpcgw_limit_refusals_total counter",
    );
    const elements: string[] = [
      `# HELP rpcgw_limit_refused_elements_total ${HELP.rpcgw_limit_refused_elements_total}`,
      "# TYPE rpcgw_limit_refused_elements_total counter",
    ];
    for (const [k, [n, e]] of this.refusals) {
      const [endpoint, reason] = k.split("\u0000") as [string, string];
      const labels = `endpoint="${label(endpoint)}",reason="${label(reason)}"`;
      out.push(`rpcgw_limit_refusals_total{${labels}} ${n}`);
      elements.push(`rpcgw_limit_refused_elements_total{${labels}} ${e}`);
    }
    out.push(...elements);
    out.push(
      `# HELP rpcgw_capability_routing_total ${HELP.rpcgw_capability_routing_total}`,
      "# TYPE rpcgw_capability_routing_total counter",
    );
    for (const [k, n] of this.capabilityCalls) {
      const [network, need, outcome] = k.split("\u0000") as [string, string, string];
      out.push(
        `rpcgw_capability_routing_total{network="${label(network)}",need="${label(need)}",outcome="${outcome}"} ${n}`,
      );
    }
    for (let k = 0; k < SPLIT_SERIES.length; k++) {
      const name = SPLIT_SERIES[k]!;
      out.push(`# HELP ${name} ${HELP[name]}`, `# TYPE ${name} counter`);
      for (const [network, c] of this.splits) out.push(`${name}{network="${label(network)}"} ${c[k]}`);
    }
    return `${out.join("\n")}\n\n${await this.registry.metrics()}`;
  }
}
