import assert from "node:assert/strict";
import {
  LatencyWindow,
  MIN_SAMPLES,
  ProbeLatencies,
  WINDOW_MS,
} from "../../../../data-plane/src/upstream/latency-window";

describe("data plane: upstream latency window (p95 for the hedge delay, p90 for selection)", () => {
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
    // Time also retires a generation (WINDOW_MS): a quiet node's old samples go.
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

  it("keeps a p90 beside the p95: the tail selection weighs", () => {
    const w = new LatencyWindow(0);
    // 30% of answers at 600 ms: p90 and p95 are both the slow answers', a mean would not be.
    for (let i = 0; i < 100; i++) w.record(i % 10 < 3 ? 600 : 1, 0);
    assert.ok(w.p90() >= 600 && w.p95() >= 600, `p90 ${w.p90()} p95 ${w.p95()}`);
    // 8% slow: the p90 is an ordinary answer's, the p95 the slow one's.
    const v = new LatencyWindow(0);
    for (let i = 0; i < 100; i++) v.record(i % 25 < 2 ? 600 : 1, 0);
    assert.ok(v.p90() <= 1.2, `p90 ${v.p90()}`);
    assert.ok(v.p95() >= 600, `p95 ${v.p95()}`);
  });

  it("expire retires generations by time with no new samples: a starved node's quantiles become unknown", () => {
    const w = new LatencyWindow(0);
    for (let i = 0; i < 100; i++) w.record(600, 0);
    w.expire(WINDOW_MS);
    assert.ok(w.p90() >= 600, "not older than a window yet");
    w.expire(WINDOW_MS + 1);
    assert.ok(w.p90() >= 600, "one window old: still the previous generation");
    w.expire(2 * WINDOW_MS + 2);
    assert.equal(w.p90(), -1);
    assert.equal(w.p95(), -1);
    assert.equal(w.count, 0);
    // New samples after that count from scratch.
    for (let i = 0; i < MIN_SAMPLES; i++) w.record(2, 2 * WINDOW_MS + 3);
    assert.ok(w.p90() > 0 && w.p90() <= 2.4, `p90 ${w.p90()}`);
  });

  it("ProbeLatencies: the median of the last five probes; up to two outliers do not move it", () => {
    const p = new ProbeLatencies();
    assert.equal(p.median(), -1, "no probe yet");
    p.record(40);
    assert.equal(p.median(), 40, "one probe is its own median");
    p.record(1);
    assert.equal(p.median(), 1, "two: the lower");
    for (const ms of [2, 60, 1.5]) p.record(ms);
    assert.equal(p.median(), 2, "[40, 1, 2, 60, 1.5]");
    // Five fast probes push both outliers out; the median follows what the node does now.
    for (let i = 0; i < 5; i++) p.record(1);
    assert.equal(p.median(), 1);
    for (let i = 0; i < 3; i++) p.record(300);
    assert.equal(p.median(), 300, "three slow probes of five: the node is slow");
  });
});
