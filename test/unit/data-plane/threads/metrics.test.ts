import assert from "node:assert/strict";
import { PromMetrics } from "../../../../data-plane/src/metrics/metrics";
import { renderProcessMetrics } from "../../../../data-plane/src/threads/metrics";
import { parseMetrics, type Sample } from "../../../integration/data-plane/threads/fixture";

const key = (s: Sample) =>
  `${s.name}{${Object.entries(s.labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join(",")}}`;
const byKey = (samples: Sample[]) => new Map(samples.map((s) => [key(s), s.value]));

/** A thread's metrics with some of every kind of series. */
function busyThread(scale: number, healthy: boolean, head: number, ewmaMs: number): PromMetrics {
  const m = new PromMetrics();
  for (let i = 0; i < 10 * scale; i++) m.request("eth", "Success", 0.002 * (i % 7));
  m.request("eth", "Client Error", 0.3);
  m.request('we"ird\\net', "Success", 1.5);
  m.methodLatency("eth", "eth_call", 0.004, 2 * scale);
  m.methodLatency("eth", "x_unlisted", 0.2, 1);
  m.cache("eth", true);
  for (let i = 0; i < scale; i++) m.cache("eth", false);
  m.upstreamRequest("eth", "u1", "ok", 0.01 * scale);
  m.upstreamRequest("eth", "u1", "timeout", 10);
  m.limitRefused("app", "rate_limit", 30 * scale);
  m.handlerException("rpc");
  m.upstreamHealth("eth", "u1", healthy, head, ewmaMs);
  m.upstreamBreakerOpened("eth", "u1", "unreachable");
  m.limitsHealth(() => ({ rateLimit: true, quota: null }));
  return m;
}

describe("threads: /metrics of a process with several serving threads", () => {
  it("one thread's snapshot, aggregated, carries every sample its own render() writes, with the same value", async () => {
    const m = busyThread(3, true, 120, 4.5);
    const own = parseMetrics((await m.render())!);
    const aggregated = parseMetrics(
      await renderProcessMetrics([], [{ index: 1, metrics: await m.snapshot(), fresh: true }], 1),
    );
    const got = byKey(aggregated);
    assert.ok(own.length > 50, `render wrote ${own.length} samples`);
    for (const s of own) assert.equal(got.get(key(s)), s.value, key(s));
  });

  it("sums counters and histograms over the threads, combines gauges by their aggregator, adds the thread series", async () => {
    const a = busyThread(1, true, 120, 4);
    const b = busyThread(5, false, 118, 8);
    const snapshots = [
      { index: 1, metrics: await a.snapshot(), fresh: true },
      { index: 2, metrics: await b.snapshot(), fresh: false },
    ];
    const own = new PromMetrics();
    own.handlerException("process.unhandledRejection");
    const samples = parseMetrics(await renderProcessMetrics(await own.snapshot(), snapshots, 2));
    const v = byKey(samples);
    const expect = (name: string, labels: Record<string, string>, value: number) =>
      assert.equal(v.get(key({ name, labels, value })), value, `${name} ${JSON.stringify(labels)}`);
    expect("rpcgw_requests_total", { network: "eth", category: "Success" }, 10 + 50);
    expect("rpcgw_requests_total", { network: 'we\\"ird\\\\net', category: "Success" }, 2);
    expect("rpcgw_request_duration_seconds_count", { network: "eth" }, 62);
    expect("rpcgw_request_duration_seconds_bucket", { network: "eth", le: "+Inf" }, 62);
    expect("rpcgw_request_duration_seconds_bucket", { network: "eth", le: "0.25" }, 60);
    expect("rpcgw_cache_lookups_total", { network: "eth", result: "miss" }, 6);
    expect("rpcgw_upstream_requests_total", { network: "eth", upstream: "u1", outcome: "timeout" }, 2);
    expect("rpcgw_limit_refused_elements_total", { endpoint: "app", reason: "rate_limit" }, 180);
    expect("rpcgw_handler_exceptions_total", { handler: "rpc" }, 2);
    expect("rpcgw_handler_exceptions_total", { handler: "process.unhandledRejection" }, 1);
    expect("rpcgw_upstream_breaker_opens_total", { network: "eth", upstream: "u1", cause: "unreachable" }, 2);
    // Gauges: selectable only if on every thread, the highest head, the mean latency, Redis up on all.
    expect("rpcgw_upstream_healthy", { network: "eth", upstream: "u1" }, 0);
    expect("rpcgw_upstream_head_block", { network: "eth", upstream: "u1" }, 120);
    expect("rpcgw_upstream_latency_ewma_seconds", { network: "eth", upstream: "u1" }, 0.006);
    expect("rpcgw_limits_redis_up", { component: "ratelimit" }, 1);
    // About the threads.
    expect("rpcgw_data_plane_threads", {}, 2);
    expect("rpcgw_thread_up", { thread: "1" }, 1);
    expect("rpcgw_thread_up", { thread: "2" }, 0);
    expect("rpcgw_thread_requests_total", { thread: "1" }, 12);
    expect("rpcgw_thread_requests_total", { thread: "2" }, 52);
    // Every sample line parsed (no duplicate series, which Prometheus would refuse).
    assert.equal(new Set(samples.map(key)).size, samples.length);
  });
});
