import assert from "node:assert/strict";
import {
  LATENCY_BUCKETS,
  LatencyWindow,
  MIN_SAMPLES,
  quantileOf,
} from "../../../../data-plane/src/upstream/latency-window";

describe("data plane: upstream latency window (p95 for the hedge delay)", () => {
  it("is unknown until MIN_SAMPLES, then the p95 as a bucket's upper edge (within 20% above)", () => {
    const w = new LatencyWindow(0);
    for (let i = 0; i < MIN_SAMPLES - 1; i++) w.record(10, 0);
    assert.equal(w.p95(), -1);
    w.record(10, 0);
    const p = w.p95();
    assert.ok(p >= 10 && p <= 12, `p95 ${p}`);
  });

  it("a 10% slow tail sets the p95, a 4% one does not", () => {
    const slow10 = new LatencyWindow(0);
    const slow4 = new LatencyWindow(0);
    for (let i = 0; i < 1000; i++) {
      slow10.record(i % 10 === 0 ? 200 : 2, 0);
      slow4.record(i % 25 === 0 ? 200 : 2, 0);
    }
    assert.ok(slow10.p95() >= 200 && slow10.p95() <= 240, `p95 ${slow10.p95()}`);
    assert.ok(slow4.p95() >= 2 && slow4.p95() <= 2.4, `p95 ${slow4.p95()}`);
    assert.ok(slow10.quantile(0.5) <= 2.4);
  });

  it("forgets: after two windows of fast answers, an old slow period no longer counts", () => {
    const w = new LatencyWindow(0);
    for (let i = 0; i < 1024; i++) w.record(500, 0);
    assert.ok(w.p95() >= 500);
    // One full window later the slow generation is the previous one: still counted.
    for (let i = 0; i < 1024; i++) w.record(1, 1);
    assert.ok(w.p95() >= 500, "one window later the slow samples still count");
    for (let i = 0; i < 1024; i++) w.record(1, 2);
    assert.ok(w.p95() <= 1.2, `p95 ${w.p95()}`);
    // Time also retires a generation (30 s): a quiet node's old samples go.
    const t = new LatencyWindow(0);
    for (let i = 0; i < 100; i++) t.record(300, 0);
    for (let i = 0; i < 100; i++) t.record(3, 31_000);
    for (let i = 0; i < 100; i++) t.record(3, 62_000);
    assert.ok(t.p95() <= 3.6, `p95 ${t.p95()}`);
  });

  it("extremes land in the first and last buckets", () => {
    const w = new LatencyWindow(0);
    for (let i = 0; i < 50; i++) w.record(0, 0);
    assert.ok(w.p95() > 0 && w.p95() <= 0.12);
    const big = new LatencyWindow(0);
    for (let i = 0; i < 50; i++) big.record(1e12, 0);
    assert.ok(big.p95() > 3_000_000);
    assert.equal(big.count, 50);
  });

  it("windows merge into a network quantile (the p95 of all nodes' answers together)", () => {
    const fast = new LatencyWindow(0);
    const tail = new LatencyWindow(0);
    for (let i = 0; i < 300; i++) fast.record(2, 0);
    // 10% of this node's answers at 200 ms: its own p95 is its slow tail...
    for (let i = 0; i < 100; i++) tail.record(i % 10 === 0 ? 200 : 2, 0);
    assert.ok(tail.p95() >= 200);
    // ... but over both nodes 10 of 400 answers are late: the network's p95 is an ordinary answer's.
    const counts = new Float64Array(LATENCY_BUCKETS);
    const total = fast.addInto(counts) + tail.addInto(counts);
    assert.equal(total, 400);
    const p95 = quantileOf(counts, total, 0.95);
    assert.ok(p95 >= 2 && p95 <= 2.4, `network p95 ${p95}`);
    assert.equal(quantileOf(new Float64Array(LATENCY_BUCKETS), MIN_SAMPLES - 1, 0.95), -1);
  });
});
