import assert from "node:assert/strict";
import { PromMetrics } from "../../../../data-plane/src/metrics/metrics";

/** The request series of a render (counts, histogram), without the prom-client ones. */
async function requestSeries(m: PromMetrics): Promise<string[]> {
  const text = (await m.render()) ?? "";
  return text.split("\n").filter((l) => l.startsWith("rpcgw_request"));
}

describe("data-plane metrics", () => {
  it("a run of request objects counted at once renders as the same number counted one by one", async () => {
    const one = new PromMetrics();
    const bulk = new PromMetrics();
    for (let i = 0; i < 100; i++) one.request("eth", "Success", 0.012);
    for (let i = 0; i < 3; i++) one.request("eth", "Client Error", 0.3);
    bulk.request("eth", "Success", 0.012, 100);
    bulk.request("eth", "Client Error", 0.3, 3);
    const want = await requestSeries(one);
    assert.ok(
      want.some((l) => l === 'rpcgw_requests_total{network="eth",category="Success"} 100'),
      want.join("\n"),
    );
    assert.ok(want.some((l) => l === 'rpcgw_request_duration_seconds_count{network="eth"} 103'));
    const got = await requestSeries(bulk);
    // The sums agree but for float rounding (one product against a hundred additions).
    const sum = (lines: string[]) => Number(lines.find((l) => l.includes("_sum"))?.split(" ")[1]);
    assert.ok(Math.abs(sum(got) - sum(want)) < 1e-9, `${sum(got)} vs ${sum(want)}`);
    const noSum = (lines: string[]) => lines.filter((l) => !l.includes("_sum"));
    assert.deepEqual(noSum(got), noSum(want));
  });
});
