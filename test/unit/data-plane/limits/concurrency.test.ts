import assert from "node:assert/strict";
import {
  Acquired,
  ConcurrencyLimiter,
  concurrencyRefusalMessage,
  HEAVY_CONCURRENCY_MESSAGE,
} from "../../../../data-plane/src/limits/concurrency";

const { Ok, OverTotal, OverHeavy, HeavyRequestTooLarge } = Acquired;

describe("data plane: per-key concurrency limiter", () => {
  it("admits up to the cap per id, independently per id, and frees slots on release", () => {
    const l = new ConcurrencyLimiter(3);
    assert.equal(l.tryAcquire("app:a", 1), Ok);
    assert.equal(l.tryAcquire("app:a", 2), Ok);
    assert.equal(l.tryAcquire("app:a", 1), OverTotal);
    assert.equal(l.inFlight("app:a"), 3);
    assert.equal(l.tryAcquire("app:b", 3), Ok, "another tenant is not affected");
    l.release("app:a", 2);
    assert.equal(l.inFlight("app:a"), 1);
    assert.equal(l.tryAcquire("app:a", 2), Ok);
    assert.equal(l.tryAcquire("app:a", 1), OverTotal);
    l.release("app:a", 1);
    l.release("app:a", 2);
    l.release("app:b", 3);
    assert.equal(l.inFlight("app:a"), 0);
    assert.equal(l.size, 0, "ids at zero are forgotten (no growth with the number of tenants)");
  });

  it("a refused acquire takes nothing; a message larger than the cap passes only when nothing is in flight", () => {
    const l = new ConcurrencyLimiter(10);
    assert.equal(l.tryAcquire("k", 5), Ok);
    assert.equal(l.tryAcquire("k", 6), OverTotal);
    assert.equal(l.inFlight("k"), 5);
    l.release("k", 5);
    assert.equal(l.tryAcquire("k", 50), Ok, "a 50-element batch is not refused forever under a cap of 10");
    assert.equal(l.tryAcquire("k", 1), OverTotal);
    l.release("k", 50);
    assert.equal(l.size, 0);
  });

  it("heavy calls have their own, smaller cap inside the total; refusals take nothing from either", () => {
    const l = new ConcurrencyLimiter(10, 2);
    assert.equal(l.tryAcquire("k", 1, 1), Ok);
    assert.equal(l.tryAcquire("k", 1, 1), Ok);
    assert.equal(l.tryAcquire("k", 1, 1), OverHeavy);
    assert.equal(l.inFlight("k"), 2, "the refused heavy call took no total slot");
    assert.equal(l.tryAcquire("k", 5, 0), Ok, "light calls still pass");
    assert.equal(l.heavyInFlight("k"), 2);
    assert.equal(l.tryAcquire("k", 4, 1), OverTotal);
    assert.equal(l.heavyInFlight("k"), 2, "an over-total refusal took no heavy slot");
    l.release("k", 1, 1);
    assert.equal(l.tryAcquire("k", 1, 1), Ok);
    l.release("k", 1, 1);
    l.release("k", 1, 1);
    l.release("k", 5, 0);
    assert.equal(l.size, 0);
    // A batch of exactly the heavy cap with none in flight passes; then none more.
    assert.equal(l.tryAcquire("k", 2, 2), Ok);
    assert.equal(l.tryAcquire("k", 1, 1), OverHeavy);
    l.release("k", 2, 2);
    assert.equal(l.size, 0);
  });

  // Review of issue 13: "idle admits any size" let one batch of 100 heavy calls past a heavy cap of 16.
  it("a request with more heavy calls than the heavy cap is refused even when the key is idle; the total cap keeps its idle rule", () => {
    const l = new ConcurrencyLimiter(10, 16);
    assert.equal(l.tryAcquire("k", 100, 100), HeavyRequestTooLarge);
    assert.equal(l.tryAcquire("k", 17, 17), HeavyRequestTooLarge);
    assert.equal(l.size, 0, "the refusal took nothing");
    assert.equal(
      l.tryAcquire("k", 100, 16),
      Ok,
      "16 heavy among 100 elements: the idle rule of the total cap",
    );
    assert.equal(l.heavyInFlight("k"), 16);
    assert.equal(l.tryAcquire("k", 1, 0), OverTotal);
    l.release("k", 100, 16);
    assert.equal(l.size, 0);
    const msg = concurrencyRefusalMessage(HeavyRequestTooLarge, 100, 16);
    assert.match(msg!, /carries 100 heavy calls.*at most 16 .*split it/);
    assert.equal(concurrencyRefusalMessage(OverHeavy, 1, 16), HEAVY_CONCURRENCY_MESSAGE);
    assert.equal(concurrencyRefusalMessage(OverTotal, 1, 16), undefined);
  });

  it("0 turns a cap off; stray releases never go negative", () => {
    const off = new ConcurrencyLimiter(0, 0);
    for (let i = 0; i < 1000; i++) assert.equal(off.tryAcquire("k", 100, 100), Ok);
    assert.equal(off.size, 0);
    const heavyOnly = new ConcurrencyLimiter(0, 1);
    assert.equal(heavyOnly.tryAcquire("k", 1, 1), Ok);
    assert.equal(heavyOnly.tryAcquire("k", 1, 1), OverHeavy);
    assert.equal(heavyOnly.tryAcquire("k", 100, 0), Ok);
    const l = new ConcurrencyLimiter(2);
    l.release("never", 1);
    assert.equal(l.inFlight("never"), 0);
    assert.equal(l.tryAcquire("k", 1), Ok);
    l.release("k", 5);
    assert.equal(l.inFlight("k"), 0);
  });

  it("a key's plan sets its caps (null or absent = the defaults); a cap change keeps the counts of the id", () => {
    const l = new ConcurrencyLimiter(200, 16);
    const plan = { name: "p", requestsPerSecond: 1, dailyRequestLimit: 1, monthlyRequestLimit: null };
    assert.deepEqual(l.planFlight("app:a", plan), { id: "app:a", max: 200, maxHeavy: 16 });
    assert.deepEqual(l.planFlight("app:a", { ...plan, maxInFlightPerKey: null, maxHeavyInFlightPerKey: 4 }), {
      id: "app:a",
      max: 200,
      maxHeavy: 4,
    });
    assert.deepEqual(l.flight("ip:1.2.3.4"), { id: "ip:1.2.3.4", max: 200, maxHeavy: 16 });
    const small = l.planFlight("app:a", { ...plan, maxInFlightPerKey: 2, maxHeavyInFlightPerKey: 1 });
    assert.equal(l.acquireFor(small, 1, 1), Ok);
    assert.equal(l.acquireFor(small, 1, 1), OverHeavy, "the plan's heavy cap of 1, not the default 16");
    assert.equal(l.acquireFor(small, 1, 0), Ok);
    assert.equal(l.acquireFor(small, 1, 0), OverTotal, "the plan's cap of 2, not the default 200");
    // The plan raised to 3: the calls in flight under the old caps still count, and are given back as taken.
    const raised = l.planFlight("app:a", { ...plan, maxInFlightPerKey: 3 });
    assert.equal(l.acquireFor(raised, 1, 0), Ok);
    assert.equal(l.acquireFor(raised, 1, 0), OverTotal);
    l.releaseFor(small, 1, 1);
    l.releaseFor(small, 1, 0);
    l.releaseFor(raised, 1, 0);
    assert.equal(l.size, 0);
    // Another key of another plan is not affected by app:a's caps.
    assert.equal(l.acquireFor(l.planFlight("app:b", plan), 150, 0), Ok);
  });
});
