import assert from "node:assert/strict";
import { createLimits, LimitsEnvSchema } from "../../../../data-plane/src/ratelimit/limits";
import { LocalRateLimiter, NoopRateLimiter } from "../../../../data-plane/src/ratelimit/rate-limiter";

describe("data-plane limits: configuration and factory", () => {
  it("defaults: redis-coordinated, fail-open, 25 ms syncs, 200 ms quota flushes", () => {
    const c = LimitsEnvSchema.parse({});
    assert.equal(c.RATE_LIMIT_MODE, "redis");
    assert.equal(c.RATE_LIMIT_SYNC_INTERVAL_MS, 25);
    assert.equal(c.RATE_LIMIT_FAIL_CLOSED_AFTER_MS, 0);
    assert.equal(c.PUBLIC_RATE_LIMIT_PER_SECOND, 50);
    assert.equal(c.QUOTA_MODE, "redis");
    assert.equal(c.QUOTA_FLUSH_INTERVAL_MS, 200);
    assert.throws(() => LimitsEnvSchema.parse({ RATE_LIMIT_MODE: "sometimes" }));
  });

  it("builds local and off variants without Redis", async () => {
    const base = { REDIS_URL: "redis://127.0.0.1:1", REDIS_KEY_PREFIX: "unused:" };
    const local = createLimits({
      ...LimitsEnvSchema.parse({ RATE_LIMIT_MODE: "local", QUOTA_MODE: "local" }),
      ...base,
    });
    assert.ok(local.rateLimiter instanceof LocalRateLimiter);
    local.start();
    const plan = { name: "free", requestsPerSecond: 50, dailyRequestLimit: 2, monthlyRequestLimit: null };
    assert.ok(local.quota.check("ws", plan).allowed);
    local.quota.record("ws", 2);
    assert.equal(local.quota.check("ws", plan).reason, "daily_limit");
    await local.close();
    const off = createLimits({
      ...LimitsEnvSchema.parse({ RATE_LIMIT_MODE: "off", QUOTA_MODE: "off" }),
      ...base,
    });
    assert.ok(off.rateLimiter instanceof NoopRateLimiter);
    assert.ok(off.quota.check("ws", plan).allowed);
    await off.close();
  });
});
