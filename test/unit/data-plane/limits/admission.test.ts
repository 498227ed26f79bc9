import assert from "node:assert/strict";
import { CompiledAccess } from "../../../../data-plane/src/access/access-rules";
import type { VerifiedKey } from "../../../../data-plane/src/auth/key-verifier";
import {
  keyIdentifier,
  LimitsGate,
  rateLimitHeaders,
  workspaceIdentifier,
} from "../../../../data-plane/src/limits/admission";
import { NoopMetrics } from "../../../../data-plane/src/metrics/metrics";
import { NoopQuotaTracker, ReconciledQuotaTracker } from "../../../../data-plane/src/quota/quota-tracker";
import type { Limits } from "../../../../data-plane/src/ratelimit/limits";
import {
  LocalRateLimiter,
  NoopRateLimiter,
  type RateLimiter,
} from "../../../../data-plane/src/ratelimit/rate-limiter";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { KeyRecord } from "../../../../shared/src/redis/records";
import { MemoryQuotaStore } from "../quota/fakes";
import { FakeClock } from "../ratelimit/fakes";

class CountingMetrics extends NoopMetrics {
  readonly refused: Array<[string, string, number]> = [];
  override limitRefused(endpoint: string, reason: string, elements: number): void {
    this.refused.push([endpoint, reason, elements]);
  }
}

function key(partial: Partial<KeyRecord> = {}, hash = "h1"): VerifiedKey {
  const record: KeyRecord = {
    kind: "app",
    workspaceId: "ws1",
    appId: "app1",
    nodeId: null,
    plan: { name: "p", requestsPerSecond: 10, dailyRequestLimit: 25, monthlyRequestLimit: null },
    allowlist: { origins: [], ips: [] },
    expiresAtMs: null,
    rpcMethods: null,
    ...partial,
  };
  return { hash, record } as VerifiedKey;
}

function limitsWith(rateLimiter: RateLimiter, clock: FakeClock): Limits {
  const quota = new ReconciledQuotaTracker({ store: new MemoryQuotaStore(), clock });
  return {
    rateLimiter,
    quota,
    appQuota: new ReconciledQuotaTracker({ store: new MemoryQuotaStore(), clock }),
    computeUnitQuota: new ReconciledQuotaTracker({ store: new MemoryQuotaStore(), clock }),
    start() {},
    async close() {},
    redisHealth: () => ({ rateLimit: null, quota: null }),
  };
}

describe("data-plane limits: LimitsGate (admission of one message)", () => {
  const t0 = Date.UTC(2026, 0, 10, 12, 0, 0, 200);

  it("limits per workspace (every app and key together), per IP on public", () => {
    assert.equal(keyIdentifier(key()), "app:app1");
    assert.equal(workspaceIdentifier(key()), "ws:ws1");
    assert.equal(keyIdentifier(key({ appId: null, kind: "node", nodeId: "n" }, "abc")), "key:abc");
    const clock = new FakeClock(t0);
    const gate = new LimitsGate({
      limits: limitsWith(new LocalRateLimiter({ clock }), clock),
      metrics: new NoopMetrics(),
      publicPerSecond: 3,
    });
    assert.ok(gate.admit(key({}, "old"), undefined, 6).ok);
    const r = gate.admit(key({}, "new"), undefined, 5);
    assert.equal(r.ok, false, "same app, other key hash: same budget");
    // Another app of the same workspace shares the plan's 10/s: 4 left, not 10.
    const other = gate.admit(key({ appId: "app2" }), undefined, 5);
    assert.ok(!other.ok && other.row === GatewayError.RateLimited && other.limit === 10);
    assert.ok(gate.admit(key({ appId: "app2" }), undefined, 4).ok);
    assert.equal(gate.admit(key({ appId: "app3" }), undefined, 1).ok, false, "workspace full");
    // Another workspace has its own window.
    assert.ok(gate.admit(key({ workspaceId: "ws2", appId: "app9" }), undefined, 10).ok);
    for (let i = 0; i < 3; i++) assert.ok(gate.admit(undefined, "192.0.2.1", 1).ok);
    assert.equal(gate.admit(undefined, "192.0.2.1", 1).ok, false);
    assert.ok(gate.admit(undefined, "192.0.2.2", 3).ok);
  });

  it("a refusal carries the row, retry time, data.limit and a split-or-upgrade message for a batch over the limit", () => {
    const clock = new FakeClock(t0);
    const metrics = new CountingMetrics();
    const gate = new LimitsGate({
      limits: limitsWith(new LocalRateLimiter({ clock }), clock),
      metrics,
      publicPerSecond: 50,
    });
    const big = gate.admit(key(), undefined, 11);
    assert.equal(big.ok, false);
    if (big.ok) return;
    assert.equal(big.row.reason, "rate_limit");
    assert.equal(big.row.httpStatus, 429);
    assert.equal(big.limit, 10);
    assert.equal(big.retryAfterMs, 800);
    assert.equal(big.retryAfterSeconds, 1);
    assert.match(big.message ?? "", /split the batch or upgrade/);
    assert.equal(big.cause, "batch_exceeds_limit");
    assert.ok(gate.admit(key(), undefined, 10).ok);
    const over = gate.admit(key(), undefined, 1);
    assert.ok(!over.ok && over.message === undefined && over.cause === "rate_limit");
    assert.deepEqual(metrics.refused, [
      ["app", "batch_exceeds_limit", 11],
      ["app", "rate_limit", 1],
    ]);
  });

  it("checks the quota with the whole cost after the rate limit; records only served units, only for keys", () => {
    const clock = new FakeClock(t0);
    const limits = limitsWith(new NoopRateLimiter(), clock);
    const gate = new LimitsGate({ limits, metrics: new NoopMetrics(), publicPerSecond: 50 });
    gate.recordServed(key(), 20);
    gate.recordServed(undefined, 1000);
    const batch = gate.admit(key(), undefined, 6);
    assert.equal(batch.ok, false);
    if (batch.ok) return;
    assert.equal(batch.row.reason, "daily_limit");
    assert.equal(batch.limit, 25);
    assert.equal(batch.retryAfterMs, Date.UTC(2026, 0, 11) - t0);
    assert.equal(batch.retryAfterSeconds, Math.ceil((Date.UTC(2026, 0, 11) - t0) / 1000));
    assert.ok(gate.admit(key(), undefined, 5).ok);
    // Monthly limit: its own row and data.limit.
    const monthly = gate.admit(
      key({ plan: { name: "m", requestsPerSecond: 10, dailyRequestLimit: 100, monthlyRequestLimit: 20 } }),
      undefined,
      1,
    );
    assert.ok(!monthly.ok && monthly.row.reason === "monthly_limit" && monthly.limit === 20);
    assert.ok(gate.admit(undefined, "192.0.2.9", 50).ok, "no quota on the public endpoint");
  });

  it("an app's own caps: a per-second cap below the plan's refuses as app_rate_limit, a daily cap as app_daily_limit", () => {
    const clock = new FakeClock(t0);
    const metrics = new CountingMetrics();
    const gate = new LimitsGate({
      limits: limitsWith(new LocalRateLimiter({ clock }), clock),
      metrics,
      publicPerSecond: 50,
    });
    const rules = (rps: number | null, day: number | null) =>
      new CompiledAccess({
        methodMode: "DENY",
        methods: [],
        requestsPerSecond: rps,
        requestsPerDay: day,
        userAgents: [],
        jwt: null,
      });
    const capped = { ...key(), access: rules(3, null) } as VerifiedKey;
    for (let i = 0; i < 3; i++) assert.ok(gate.admit(capped, undefined, 1).ok);
    const over = gate.admit(capped, undefined, 1);
    assert.ok(!over.ok);
    assert.equal(over.row, GatewayError.AppRateLimited);
    assert.equal(over.limit, 3);
    assert.ok(over.retryAfterMs > 0 && over.retryAfterMs <= 1000);
    assert.deepEqual(metrics.refused.at(-1), ["app", "app_rate_limit", 1]);
    const batch = gate.admit(capped, undefined, 4);
    assert.ok(!batch.ok && batch.row === GatewayError.AppRateLimited);
    assert.match(batch.message ?? "", /the app's cap of 3 requests\/s/);
    // A refusal by the app's cap consumed nothing of the workspace's window: its other apps still get the
    // plan's 10 less the 3 this app used.
    assert.ok(gate.admit(key({ appId: "app-next" }), undefined, 7).ok);
    assert.equal(gate.admit(key({ appId: "app-next" }), undefined, 1).ok, false);
    // And a refusal by the workspace's window consumed nothing of the app's cap.
    clock.advance(1000);
    assert.ok(gate.admit(key({ appId: "app-hog" }), undefined, 10).ok);
    const wsFull = gate.admit(capped, undefined, 1);
    assert.ok(!wsFull.ok && wsFull.row === GatewayError.RateLimited && wsFull.limit === 10);
    clock.advance(1000);
    for (let i = 0; i < 3; i++) assert.ok(gate.admit(capped, undefined, 1).ok, "the cap's 3 are intact");
    const shown = gate.admit(capped, undefined, 0);
    assert.ok(
      shown.ok && shown.rate.limit === 3 && shown.rate.remaining === 0,
      "headers: the tighter window",
    );
    // A cap above the plan's (10/s) changes nothing: the plan's limit refuses, as rate_limit.
    clock.advance(1000);
    const loose = { ...key({ appId: "app-loose" }), access: rules(50, null) } as VerifiedKey;
    assert.ok(gate.admit(loose, undefined, 10).ok);
    const plan = gate.admit(loose, undefined, 1);
    assert.ok(!plan.ok && plan.row === GatewayError.RateLimited && plan.limit === 10);
    // Daily cap: counted per app from served units, only for apps with a cap.
    clock.advance(1000);
    const daily = { ...key({ appId: "app-daily" }), access: rules(null, 8) } as VerifiedKey;
    gate.recordServed(daily, 6);
    assert.ok(gate.admit(daily, undefined, 2).ok);
    const full = gate.admit(daily, undefined, 3);
    assert.ok(!full.ok);
    assert.equal(full.row, GatewayError.AppDailyLimit);
    assert.equal(full.limit, 8);
    assert.equal(full.retryAfterMs, Date.UTC(2026, 0, 11) - clock.now());
    // Other apps of the workspace are not held by this app's daily cap (the workspace quota, 25, has room).
    assert.ok(gate.admit(key({ appId: "app-other" }), undefined, 3).ok);
  });

  it("limits off: always admitted, no X-RateLimit headers", () => {
    const clock = new FakeClock(t0);
    const gate = new LimitsGate({
      limits: { ...limitsWith(new NoopRateLimiter(), clock), quota: new NoopQuotaTracker() },
      metrics: new NoopMetrics(),
      publicPerSecond: 50,
    });
    const r = gate.admit(key(), undefined, 100);
    assert.ok(r.ok);
    assert.equal(rateLimitHeaders(r.rate), undefined);
    assert.deepEqual(
      rateLimitHeaders({ allowed: true, limit: 50, remaining: 7, retryAfterMs: 0, resetAtMs: 0 }),
      ["50", "7"],
    );
  });
});
