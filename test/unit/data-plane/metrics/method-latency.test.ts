import assert from "node:assert/strict";
import { LATENCY_METHODS } from "../../../../data-plane/src/metrics/method-latency";
import { PromMetrics } from "../../../../data-plane/src/metrics/metrics";

/** `rpcgw_method_duration_seconds_count` samples of a render, by their label text. */
async function counts(m: PromMetrics): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const line of ((await m.render()) ?? "").split("\n")) {
    const match = /^rpcgw_method_duration_seconds_count\{(.*)\} (\S+)$/.exec(line);
    if (match !== null) out.set(match[1]!, Number(match[2]));
  }
  return out;
}

describe("data-plane metrics: per-method latency (metrics/method-latency.ts)", () => {
  it("a listed method has its own histogram; every other method, however many, goes under other", async () => {
    const m = new PromMetrics();
    m.methodLatency("eth", "eth_call", 0.003, 5);
    m.methodLatency("eth", "eth_getLogs", 0.2, 1);
    for (let i = 0; i < 500; i++) m.methodLatency("eth", `made_up_${i}`, 0.001, 1);
    m.methodLatency("dot", "chain_getBlock", 0.01, 2);
    const got = await counts(m);
    assert.deepEqual(
      Object.fromEntries(got),
      {
        'network="eth",method="eth_call"': 5,
        'network="eth",method="eth_getLogs"': 1,
        'network="eth",method="other"': 500,
        'network="dot",method="chain_getBlock"': 2,
      },
      "only the methods seen, and the unlisted ones as one series",
    );
    const text = (await m.render()) ?? "";
    assert.match(text, /^# TYPE rpcgw_method_duration_seconds histogram$/m);
    assert.match(
      text,
      /^rpcgw_method_duration_seconds_bucket\{network="eth",method="eth_getLogs",le="0\.25"\} 1$/m,
    );
    assert.match(
      text,
      /^rpcgw_method_duration_seconds_bucket\{network="eth",method="eth_getLogs",le="0\.1"\} 0$/m,
    );
  });

  it("the snapshot threads send carries the same series as the render", async () => {
    const m = new PromMetrics();
    m.methodLatency("eth", "eth_blockNumber", 0.002, 3);
    m.methodLatency("eth", "nope", 0.002, 1);
    const snapshot = await m.snapshot();
    const series = snapshot.find((s) => s.name === "rpcgw_method_duration_seconds");
    assert.ok(series, "in the snapshot");
    const countOf = (method: string) =>
      (series.values as { metricName?: string; labels: Record<string, string>; value: number }[]).find(
        (v) => v.metricName === "rpcgw_method_duration_seconds_count" && v.labels.method === method,
      )?.value;
    assert.equal(countOf("eth_blockNumber"), 3);
    assert.equal(countOf("other"), 1);
  });

  it("the method list is bounded and has no duplicates", () => {
    assert.equal(new Set(LATENCY_METHODS).size, LATENCY_METHODS.length);
    assert.ok(LATENCY_METHODS.length <= 64);
    assert.ok(!LATENCY_METHODS.includes("other"));
  });
});
