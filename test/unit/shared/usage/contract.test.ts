import assert from "node:assert/strict";
import {
  BUCKET_COUNT,
  bucketIndex,
  KNOWN_METHODS,
  LATENCY_BUCKET_BOUNDS_MS,
  MethodBounder,
  OTHER_METHOD,
  quantileFromBuckets,
  UsageBatchSchema,
} from "../../../../shared/src/usage/contract";

/** Deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function exactQuantile(sorted: number[], q: number): number {
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!;
}

describe("shared: usage contract", () => {
  it("bucket bounds are increasing, end with +Inf, and bucketIndex finds the first bound >= value", () => {
    assert.equal(BUCKET_COUNT, 24);
    for (let i = 1; i < BUCKET_COUNT; i++)
      assert.ok(LATENCY_BUCKET_BOUNDS_MS[i]! > LATENCY_BUCKET_BOUNDS_MS[i - 1]!);
    assert.equal(LATENCY_BUCKET_BOUNDS_MS[BUCKET_COUNT - 1], Number.POSITIVE_INFINITY);
    assert.equal(bucketIndex(0), 0);
    assert.equal(bucketIndex(-5), 0);
    assert.equal(bucketIndex(Number.NaN), 0);
    assert.equal(bucketIndex(1), 0);
    assert.equal(bucketIndex(1.01), 1);
    assert.equal(bucketIndex(100), 11);
    assert.equal(bucketIndex(100.5), 12);
    assert.equal(bucketIndex(10000), 22);
    assert.equal(bucketIndex(10001), 23);
    assert.equal(bucketIndex(1e9), 23);
    for (let v = 0.1; v < 20000; v *= 1.07) {
      const i = bucketIndex(v);
      assert.ok(v <= LATENCY_BUCKET_BOUNDS_MS[i]!);
      if (i > 0) assert.ok(v > LATENCY_BUCKET_BOUNDS_MS[i - 1]!);
    }
  });

  it("p50 / p95 from buckets fall in the bucket of the exact percentile (several distributions)", () => {
    const r = rng(42);
    const dists: Record<string, () => number> = {
      uniform: () => 1 + r() * 500,
      exponential: () => -Math.log(1 - r()) * 40,
      lognormal: () => Math.exp(3 + 1.2 * Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r())),
      bimodal: () => (r() < 0.8 ? 2 + r() * 8 : 800 + r() * 1500),
      constant: () => 42,
    };
    for (const [name, draw] of Object.entries(dists)) {
      for (const n of [1, 7, 100, 5000]) {
        const values = Array.from({ length: n }, draw);
        const buckets = new Array<number>(BUCKET_COUNT).fill(0);
        for (const v of values) buckets[bucketIndex(v)]!++;
        const sorted = [...values].sort((a, b) => a - b);
        for (const q of [0.5, 0.95, 0.99]) {
          const est = quantileFromBuckets(buckets, q)!;
          const exact = exactQuantile(sorted, q);
          const bi = bucketIndex(exact);
          if (bi === BUCKET_COUNT - 1) {
            assert.equal(est, LATENCY_BUCKET_BOUNDS_MS[BUCKET_COUNT - 2], `${name} n=${n} q=${q}`);
          } else {
            assert.equal(bucketIndex(est), bi, `${name} n=${n} q=${q}: est ${est} exact ${exact}`);
          }
        }
      }
    }
  });

  it("quantile of an empty histogram is null; the +Inf bucket answers its lower bound", () => {
    assert.equal(quantileFromBuckets(new Array(BUCKET_COUNT).fill(0), 0.5), null);
    const b = new Array<number>(BUCKET_COUNT).fill(0);
    b[BUCKET_COUNT - 1] = 3;
    assert.equal(quantileFromBuckets(b, 0.5), 10000);
    const c = new Array<number>(BUCKET_COUNT).fill(0);
    c[0] = 2;
    assert.equal(quantileFromBuckets(c, 0.5), 0.5);
  });

  it("MethodBounder: well-known names pass, shaped names pass up to the cap, the rest are `other`", () => {
    const b = new MethodBounder(3);
    assert.ok(KNOWN_METHODS.has("eth_call") && KNOWN_METHODS.has("state_getStorage"));
    assert.equal(b.bound("eth", "eth_call"), "eth_call");
    assert.equal(b.bound("eth", "foo_bar1"), "foo_bar1");
    assert.equal(b.bound("eth", "foo_bar2"), "foo_bar2");
    assert.equal(b.bound("eth", "foo_bar3"), "foo_bar3");
    assert.equal(b.bound("eth", "foo_bar4"), OTHER_METHOD, "cap reached");
    assert.equal(b.bound("eth", "foo_bar1"), "foo_bar1", "already admitted");
    assert.equal(b.bound("eth", "eth_getLogs"), "eth_getLogs", "well-known names do not count");
    assert.equal(b.bound("dot", "foo_bar4"), "foo_bar4", "cap is per network");
    for (const bad of [
      "",
      "x",
      "ETH_call",
      "eth call",
      "eth_",
      "_x",
      `a_${"x".repeat(61)}`,
      "eth_call\n",
      "1a_b",
    ]) {
      assert.equal(b.bound("eth", bad), OTHER_METHOD, JSON.stringify(bad));
    }
    b.reset();
    assert.equal(b.bound("eth", "foo_bar4"), "foo_bar4", "new minute");
  });

  it("UsageBatchSchema accepts a well-formed batch and rejects bad rows", () => {
    const row = {
      minute: 1_700_000_040_000,
      workspaceId: null,
      appId: null,
      network: "eth-mainnet",
      method: "eth_call",
      category: "Success",
      count: 2,
      latencySumMs: 3.5,
      buckets: [0, 1, 0, 0, 1, ...new Array(19).fill(0)],
    };
    const batch = { v: 1, batchId: "i:1", instanceId: "i", createdAt: 1, rows: [row] };
    assert.ok(UsageBatchSchema.safeParse(batch).success);
    for (const bad of [
      { minute: 1_700_000_040_001 },
      { category: "Nope" },
      { buckets: [1] },
      { workspaceId: "" },
      { count: 0 },
      { network: "Bad Net" },
    ]) {
      assert.equal(UsageBatchSchema.safeParse({ ...batch, rows: [{ ...row, ...bad }] }).success, false);
    }
  });
});
