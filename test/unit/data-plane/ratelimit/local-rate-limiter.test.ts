import assert from "node:assert/strict";
import {
  LocalRateLimiter,
  NoopRateLimiter,
  rateLimitErrorExtras,
  retryAfterSeconds,
} from "../../../../data-plane/src/ratelimit/rate-limiter";
import { FakeClock } from "./fakes";

// 2026-11-22T10:00:00.000Z: an exact epoch second, so window boundaries are easy to read.
const T0 = Date.UTC(2026, 10, 22, 10, 0, 0);

describe("data-plane ratelimit: LocalRateLimiter", () => {
  it("passes 50 singles in one second and refuses the 51st", () => {
    const clock = new FakeClock(T0 + 100);
    const rl = new LocalRateLimiter({ clock });
    for (let i = 0; i < 50; i++) {
      const r = rl.check("app:k", 1, 50);
      assert.ok(r.allowed, `request ${i + 1}`);
      assert.equal(r.remaining, 49 - i);
      assert.equal(r.retryAfterMs, 0);
      clock.advance(10);
    }
    const r = rl.check("app:k", 1, 50);
    assert.equal(r.allowed, false);
    assert.equal(r.reason, undefined);
    assert.equal(r.limit, 50);
    assert.equal(r.remaining, 0);
    // now = T0 + 600: the window ends at T0 + 1000.
    assert.equal(r.retryAfterMs, 400);
    assert.equal(r.resetAtMs, T0 + 1000);
  });

  it("of two simultaneous batches of 30 under a limit of 50, admits one and refuses the other whole", () => {
    const rl = new LocalRateLimiter({ clock: new FakeClock(T0) });
    const first = rl.check("app:k", 30, 50);
    const second = rl.check("app:k", 30, 50);
    assert.ok(first.allowed);
    assert.equal(first.remaining, 20);
    assert.equal(second.allowed, false);
    assert.equal(second.remaining, 20, "the refused batch consumed nothing");
    assert.ok(rl.check("app:k", 20, 50).allowed, "the 20 left are still there");
    assert.equal(rl.check("app:k", 1, 50).allowed, false);
  });

  it("flags a batch larger than the limit (it can never pass) and consumes nothing", () => {
    const rl = new LocalRateLimiter({ clock: new FakeClock(T0 + 250) });
    const r = rl.check("app:k", 51, 50);
    assert.equal(r.allowed, false);
    assert.equal(r.reason, "batch_exceeds_limit");
    assert.equal(r.limit, 50);
    assert.equal(r.remaining, 50);
    assert.equal(r.retryAfterMs, 750);
    const extras = rateLimitErrorExtras(r);
    assert.equal(extras.limit, 50);
    assert.match(extras.message!, /split the batch or upgrade/);
    assert.ok(rl.check("app:k", 50, 50).allowed, "a batch of exactly the limit passes");
  });

  it("uses fixed windows aligned to the epoch second: the count resets at the boundary", () => {
    const clock = new FakeClock(T0 + 999);
    const rl = new LocalRateLimiter({ clock });
    assert.ok(rl.check("app:k", 50, 50).allowed);
    const refused = rl.check("app:k", 1, 50);
    assert.equal(refused.allowed, false);
    assert.equal(refused.retryAfterMs, 1);
    clock.advance(1); // T0 + 1000: a new window
    const r = rl.check("app:k", 1, 50);
    assert.ok(r.allowed);
    assert.equal(r.remaining, 49);
    assert.equal(r.resetAtMs, T0 + 2000);
  });

  it("keeps identifiers apart and holds state only for the current window", () => {
    const clock = new FakeClock(T0);
    const rl = new LocalRateLimiter({ clock });
    assert.ok(rl.check("app:a", 50, 50).allowed);
    assert.ok(rl.check("app:b", 50, 50).allowed);
    assert.equal(rl.check("app:a", 1, 50).allowed, false);
    assert.equal(rl.size, 2);
    clock.advance(1000);
    rl.check("app:c", 1, 50);
    assert.equal(rl.size, 1);
  });

  it("stays in the newest window when the clock steps backwards", () => {
    const clock = new FakeClock(T0 + 1500);
    const rl = new LocalRateLimiter({ clock });
    assert.ok(rl.check("app:k", 50, 50).allowed);
    clock.t = T0 + 900;
    assert.equal(rl.check("app:k", 1, 50).allowed, false);
  });

  it("treats an infinite limit as unlimited; the noop limiter admits everything", () => {
    const rl = new LocalRateLimiter({ clock: new FakeClock(T0) });
    assert.ok(rl.check("app:k", 1000, Number.POSITIVE_INFINITY).allowed);
    const noop = new NoopRateLimiter();
    for (let i = 0; i < 1000; i++) assert.ok(noop.check().allowed);
  });

  it("Retry-After is whole seconds, rounded up, at least 1", () => {
    assert.equal(retryAfterSeconds(1), 1);
    assert.equal(retryAfterSeconds(999), 1);
    assert.equal(retryAfterSeconds(1000), 1);
    assert.equal(retryAfterSeconds(1001), 2);
    assert.equal(retryAfterSeconds(0), 1);
  });
});
