import assert from "node:assert/strict";
import { ConcurrencyLimiter } from "../../../../data-plane/src/limits/concurrency";

describe("data plane: per-key concurrency limiter", () => {
  it("admits up to the cap per id, independently per id, and frees slots on release", () => {
    const l = new ConcurrencyLimiter(3);
    assert.ok(l.tryAcquire("app:a", 1));
    assert.ok(l.tryAcquire("app:a", 2));
    assert.ok(!l.tryAcquire("app:a", 1));
    assert.equal(l.inFlight("app:a"), 3);
    assert.ok(l.tryAcquire("app:b", 3), "another tenant is not affected");
    l.release("app:a", 2);
    assert.equal(l.inFlight("app:a"), 1);
    assert.ok(l.tryAcquire("app:a", 2));
    assert.ok(!l.tryAcquire("app:a", 1));
    l.release("app:a", 1);
    l.release("app:a", 2);
    l.release("app:b", 3);
    assert.equal(l.inFlight("app:a"), 0);
    assert.equal(l.size, 0, "ids at zero are forgotten (no growth with the number of tenants)");
  });

  it("a refused acquire takes nothing; a message larger than the cap passes only when nothing is in flight", () => {
    const l = new ConcurrencyLimiter(10);
    assert.ok(l.tryAcquire("k", 5));
    assert.ok(!l.tryAcquire("k", 6));
    assert.equal(l.inFlight("k"), 5);
    l.release("k", 5);
    assert.ok(l.tryAcquire("k", 50), "a 50-element batch is not refused forever under a cap of 10");
    assert.ok(!l.tryAcquire("k", 1));
    l.release("k", 50);
    assert.equal(l.size, 0);
  });

  it("0 turns the cap off; stray releases never go negative", () => {
    const off = new ConcurrencyLimiter(0);
    for (let i = 0; i < 1000; i++) assert.ok(off.tryAcquire("k", 100));
    assert.equal(off.size, 0);
    const l = new ConcurrencyLimiter(2);
    l.release("never", 1);
    assert.equal(l.inFlight("never"), 0);
    assert.ok(l.tryAcquire("k", 1));
    l.release("k", 5);
    assert.equal(l.inFlight("k"), 0);
  });
});
