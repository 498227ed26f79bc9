import { Counter, Gauge, Registry } from "prom-client";

/**
 * Every series of one registry as `registry.getMetricsAsJSON()` gives them: what a thread hands the main
 * thread for the /metrics of the whole process (threads/metrics.ts aggregates them).
 */
export type MetricsSnapshot = Awaited<ReturnType<Registry["getMetricsAsJSON"]>>;
type SnapshotMetric = MetricsSnapshot[number];
type SnapshotValue = SnapshotMetric["values"][number] & { metricName?: string };

/** What the data plane measures. The hot path calls these; implementations must be cheap. */
export interface Metrics {
  /** One request object answered (a batch of 30 records 30), by network and dashboard category. */
  request(network: string, category: string, seconds: number): void;
  cache(network: string, hit: boolean): void;
  upstreamRequest(
    network: string,
    upstream: string,
    outcome: "ok" | "error" | "timeout",
    seconds: number,
  ): void;
  upstreamHealth(network: string, upstream: string, healthy: boolean, head: number, latencyMs: number): void;
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
   * An exception a uWS handler (or the process) let through, caught by the guard: `handler` names the
   * route / WebSocket callback (`rpc`, `node`, `ws.message`, ..., `process.unhandledRejection`).
   */
  handlerException(handler: string): void;
  /** Prometheus text exposition; `undefined` when metrics are off. */
  render(): Promise<string | undefined>;
  readonly contentType: string;
}

/** Whether each limits component reaches Redis; null = that component does not use Redis. */
export interface LimitsRedisHealth {
  rateLimit: boolean | null;
  quota: boolean | null;
}

export class NoopMetrics implements Metrics {
  readonly contentType = "text/plain";
  request(): void {}
  cache(): void {}
  upstreamRequest(): void {}
  upstreamHealth(): void {}
  limitRefused(_endpoint: string, _reason: string, _elements: number): void {}
  limitsHealth(): void {}
  upstreamBreakerOpened(): void {}
  upstreamBackoff(): void {}
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
} as const;

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A histogram kept in a typed array: observe() is a short loop and two adds, no label hashing. */
class HotHistogram {
  readonly counts = new Float64Array(LATENCY_BUCKETS.length);
  sum = 0;
  count = 0;

  observe(v: number): void {
    this.sum += v;
    this.count++;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      if (v <= LATENCY_BUCKETS[i]!) {
        this.counts[i]!++;
        return;
      }
    }
  }

  /** The same series as `render`, as prom-client JSON values (`le` as text, like `render` writes it). */
  values(name: string, labels: Record<string, string>, out: SnapshotValue[]): void {
    let cum = 0;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      cum += this.counts[i]!;
      out.push({
        metricName: `${name}_bucket`,
        labels: { ...labels, le: String(LATENCY_BUCKETS[i]) },
        value: cum,
      });
    }
    out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: "+Inf" }, value: this.count });
    out.push({ metricName: `${name}_sum`, labels, value: this.sum });
    out.push({ metricName: `${name}_count`, labels, value: this.count });
  }

  render(name: string, labels: string, out: string[]): void {
    let cum = 0;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      cum += this.counts[i]!;
      out.push(`${name}_bucket{${labels},le="${LATENCY_BUCKETS[i]}"} ${cum}`);
    }
    out.push(`${name}_bucket{${labels},le="+Inf"} ${this.count}`);
    out.push(`${name}_sum{${labels}} ${this.sum}`);
    out.push(`${name}_count{${labels}} ${this.count}`);
  }
}

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
  /** `endpoint\u0000reason` -> [messages, request objects] refused. */
  private readonly refusals = new Map<string, [number, number]>();
  private limitsProbe: (() => LimitsRedisHealth) | undefined;
  private readonly limitsRedisUp: Gauge<"component">;
  private readonly breakerOpens: Counter<"network" | "upstream" | "cause">;
  private readonly backoffs: Counter<"network" | "upstream">;
  private readonly handlerExceptions: Counter<"handler">;

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
      name: "rpcgw_upstream_latency_ewma_ms",
      help: "Exponentially weighted moving average of upstream latency",
      labelNames: ["network", "upstream"],
      registers,
      aggregator: "average",
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

  upstreamBreakerOpened(network: string, upstream: string, cause: string): void {
    this.breakerOpens.labels(network, upstream, cause).inc();
  }

  upstreamBackoff(network: string, upstream: string, _ms: number): void {
    this.backoffs.labels(network, upstream).inc();
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

  request(network: string, category: string, seconds: number): void {
    const s = this.network(network);
    s.byCategory.set(category, (s.byCategory.get(category) ?? 0) + 1);
    s.latency.observe(seconds);
  }

  cache(network: string, hit: boolean): void {
    const s = this.network(network);
    if (hit) s.cacheHits++;
    else s.cacheMisses++;
  }

  upstreamRequest(
    network: string,
    upstream: string,
    outcome: "ok" | "error" | "timeout",
    seconds: number,
  ): void {
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
    this.upstreamLatencyEwma.labels(network, upstream).set(latencyMs);
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
    const upstreams: SnapshotValue[] = [];
    const upstreamLatency: SnapshotValue[] = [];
    for (const s of this.upstreams.values()) {
      const labels = { network: s.network, upstream: s.upstream };
      for (const outcome of ["ok", "error", "timeout"] as const)
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
    return [
      metric("rpcgw_requests_total", HELP.rpcgw_requests_total, "counter", requests),
      metric("rpcgw_request_duration_seconds", HELP.rpcgw_request_duration_seconds, "histogram", latency),
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
    return `${out.join("\n")}\n\n${await this.registry.metrics()}`;
  }
}
