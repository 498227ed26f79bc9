import assert from "node:assert/strict";
import { CompiledAccess } from "../../../../data-plane/src/access/access-rules";
import type { VerifiedKey } from "../../../../data-plane/src/auth/key-verifier";
import { LimitsGate } from "../../../../data-plane/src/limits/admission";
import { MethodWeights, UNIT_WEIGHTS } from "../../../../data-plane/src/limits/compute-units";
import { NoopMetrics } from "../../../../data-plane/src/metrics/metrics";
import { ReconciledQuotaTracker } from "../../../../data-plane/src/quota/quota-tracker";
import type { Limits } from "../../../../data-plane/src/ratelimit/limits";
import {
  LocalRateLimiter,
  NoopRateLimiter,
  type RateLimiter,
} from "../../../../data-plane/src/ratelimit/rate-limiter";
import { type BatchItem, parseRpcBody } from "../../../../data-plane/src/rpc/parse";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { KeyRecord, PlanLimits } from "../../../../shared/src/redis/records";
import { MemoryQuotaStore } from "../quota/fakes";
import { FakeClock } from "../ratelimit/fakes";

const COSTS = { defaultUnits: 20, methods: { eth_chainId: 0, eth_call: 26, eth_getLogs: 75 } };

function items(body: string): BatchItem[] {
  const p = parseRpcBody(body);
  assert.ok(p.ok && p.batch, "a batch");
  return p.items;
}

function key(plan: Partial<PlanLimits>, appId = "app1", access?: CompiledAccess): VerifiedKey {
  const record: KeyRecord = {
    kind: "app",
    workspaceId: "ws-cu",
    appId,
    nodeId: null,
    plan: {
      name: "p",
      requestsPerSecond: 1000,
      dailyRequestLimit: 1_000_000,
      monthlyRequestLimit: null,
      ...plan,
    },
    allowlist: { origins: [], ips: [] },
    expiresAtMs: null,
    rpcMethods: null,
  };
  return { hash: `h-${appId}`, record, access } as VerifiedKey;
}

function gateWith(rateLimiter: RateLimiter, clock: FakeClock): { gate: LimitsGate; limits: Limits } {
  const tracker = () => new ReconciledQuotaTracker({ store: new MemoryQuotaStore(), clock });
  const limits: Limits = {
    rateLimiter,
    quota: tracker(),
    appQuota: tracker(),
    computeUnitQuota: tracker(),
    start() {},
    async close() {},
    redisHealth: () => ({ rateLimit: null, quota: null }),
  };
  return { gate: new LimitsGate({ limits, metrics: new NoopMetrics(), publicPerSecond: 50 }), limits };
}

describe("data-plane compute units: MethodWeights (the weight of a message)", () => {
  it("a listed method weighs its entry, any other the default; 0 is free", () => {
    const w = new MethodWeights(COSTS);
    assert.equal(w.of("eth_call"), 26);
    assert.equal(w.of("eth_chainId"), 0);
    assert.equal(w.of("eth_getBalance"), 20);
    assert.equal(w.of("__proto__"), 20, "a method named like an Object member is just unknown");
    assert.equal(w.message("eth_getLogs", undefined), 75);
  });

  it("a batch weighs the sum of its elements; an invalid element weighs what `other` does", () => {
    const w = new MethodWeights(COSTS);
    const batch = items(
      JSON.stringify([
        { jsonrpc: "2.0", id: 1, method: "eth_call", params: [] },
        { jsonrpc: "2.0", id: 2, method: "eth_getLogs", params: [] },
        { jsonrpc: "2.0", method: "eth_chainId" },
        { jsonrpc: "2.0", id: 4 },
      ]),
    );
    assert.equal(w.message(undefined, batch), 26 + 75 + 0 + 20);
    const withOther = new MethodWeights({ defaultUnits: 20, methods: { other: 5 } });
    assert.equal(withOther.message(undefined, batch), 20 + 20 + 20 + 5);
  });

  it("without methodCosts (older records, dedicated nodes) every method weighs 1: units = request objects", () => {
    assert.equal(UNIT_WEIGHTS.of("eth_getLogs"), 1);
    assert.equal(UNIT_WEIGHTS.message(undefined, items('[{"jsonrpc":"2.0","id":1,"method":"a_b"},{}]')), 2);
  });
});

describe("data-plane compute units: admission in compute units (fake clock)", () => {
  const t0 = Date.UTC(2026, 2, 3, 10, 0, 0, 100);

  it("a plan's computeUnitsPerSecond refuses past the limit; a batch crossing it is refused whole and takes nothing", () => {
    const clock = new FakeClock(t0);
    const { gate } = gateWith(new LocalRateLimiter({ clock }), clock);
    const k = key({ computeUnitsPerSecond: 100 });
    const first = gate.admit(k, undefined, 2, 52);
    assert.ok(first.ok);
    assert.equal(
      first.unit,
      "compute-units",
      "the CU window (48/100 left) is closer to exhaustion than 998/1000",
    );
    assert.equal(first.rate.limit, 100);
    assert.equal(first.rate.remaining, 48);
    // 3 request objects of 26 = 78 > 48 left: refused whole, as rate_limit, in compute units.
    const batch = gate.admit(k, undefined, 3, 78);
    assert.ok(!batch.ok);
    assert.equal(batch.row, GatewayError.RateLimited);
    assert.equal(batch.limit, 100);
    assert.equal(batch.unit, "compute-units");
    assert.match(batch.message ?? "", /100 compute units\/s/);
    // Nothing of it was taken, from either window: exactly the 48 left still pass.
    const rest = gate.admit(k, undefined, 1, 48);
    assert.ok(rest.ok && rest.rate.remaining === 0);
    assert.equal(gate.admit(k, undefined, 1, 1).ok, false);
    // The request window holds only what was admitted (2 + 1 of 1000): the refused batch took nothing there.
    const reqOnly = gate.admit(key({}), undefined, 997);
    assert.ok(reqOnly.ok, "997 more requests fit in the workspace's request window");
    // A free method passes a full compute-unit window.
    assert.ok(gate.admit(k, undefined, 1, 0).ok === false, "the request window is full now (1000/1000)");
    clock.advance(1000);
    assert.ok(gate.admit(k, undefined, 1, 0).ok);
    // Larger than the limit on its own: never passes, with a split-the-batch message.
    const huge = gate.admit(k, undefined, 5, 101);
    assert.ok(!huge.ok && huge.cause === "batch_exceeds_limit");
    assert.match(huge.message ?? "", /batch larger than the rate limit of 100 compute units\/s/);
  });

  it("a refusal by the request window takes back the compute units (and vice versa): all windows or none", () => {
    const clock = new FakeClock(t0);
    const { gate } = gateWith(new LocalRateLimiter({ clock }), clock);
    const k = key({ requestsPerSecond: 3, computeUnitsPerSecond: 1000 });
    assert.ok(gate.admit(k, undefined, 3, 30).ok);
    const reqRefused = gate.admit(k, undefined, 1, 500);
    assert.ok(!reqRefused.ok && reqRefused.limit === 3 && reqRefused.unit === "");
    clock.advance(1000);
    // The CU window of the next second is whole: the refused 500 were never counted in any second.
    const ok = gate.admit(k, undefined, 1, 1000);
    assert.ok(ok.ok && ok.unit === "compute-units" && ok.rate.remaining === 0);
  });

  it("the headers take the unit closer to exhaustion when a plan limits both", () => {
    const clock = new FakeClock(t0);
    const { gate } = gateWith(new LocalRateLimiter({ clock }), clock);
    const k = key({ requestsPerSecond: 10, computeUnitsPerSecond: 1000 });
    // 9/10 requests used (10% left) vs 90/1000 CU (91% left): requests.
    const a = gate.admit(k, undefined, 9, 90);
    assert.ok(a.ok && a.unit === "requests" && a.rate.limit === 10 && a.rate.remaining === 1);
    // A plan without a CU limit: no unit (no X-RateLimit-Unit header), as before compute units.
    const plain = gate.admit(key({}, "app1"), undefined, 1, 500);
    assert.ok(plain.ok && plain.unit === "");
  });

  it("daily and monthly compute-unit quotas: checked with the message's units, recorded from served units", () => {
    const clock = new FakeClock(t0);
    const { gate } = gateWith(new NoopRateLimiter(), clock);
    const k = key({ dailyComputeUnitLimit: 100, monthlyComputeUnitLimit: 150 });
    gate.recordServed(k, 2, 80);
    const over = gate.admit(k, undefined, 1, 26);
    assert.ok(!over.ok);
    assert.equal(over.row, GatewayError.DailyLimit);
    assert.equal(over.limit, 100);
    assert.match(over.message ?? "", /daily compute unit limit/);
    assert.equal(over.retryAfterMs, Date.UTC(2026, 2, 4) - t0);
    assert.ok(gate.admit(k, undefined, 1, 20).ok, "exactly to the limit");
    gate.recordServed(k, 1, 20);
    // Next day: the daily count starts again, the month's (100) goes on: 50 left of 150.
    clock.advance(86_400_000);
    const month = gate.admit(k, undefined, 1, 51);
    assert.ok(!month.ok && month.row === GatewayError.MonthlyLimit && month.limit === 150);
    assert.match(month.message ?? "", /monthly compute unit limit/);
    assert.ok(gate.admit(k, undefined, 1, 50).ok);
  });

  it("a requests-only plan is unchanged: units are not counted against anything", () => {
    const clock = new FakeClock(t0);
    const { gate, limits } = gateWith(new LocalRateLimiter({ clock }), clock);
    const k = key({ requestsPerSecond: 5, dailyRequestLimit: 10 });
    for (let i = 0; i < 5; i++) assert.ok(gate.admit(k, undefined, 1, 10_000).ok);
    const r = gate.admit(k, undefined, 1, 0);
    assert.ok(!r.ok && r.row === GatewayError.RateLimited && r.limit === 5 && r.message === undefined);
    gate.recordServed(k, 5, 50_000);
    const tracker = limits.computeUnitQuota as ReconciledQuotaTracker;
    assert.equal(tracker.unflushedUnits(), 0, "no compute-unit counter kept for a plan without CU quotas");
  });

  it("an app's own compute-unit cap below the plan's refuses as app_rate_limit; refusals take nothing elsewhere", () => {
    const clock = new FakeClock(t0);
    const { gate } = gateWith(new LocalRateLimiter({ clock }), clock);
    const rules = new CompiledAccess({
      methodMode: "DENY",
      methods: [],
      requestsPerSecond: null,
      computeUnitsPerSecond: 50,
      requestsPerDay: null,
      userAgents: [],
      jwt: null,
    });
    const capped = key({ computeUnitsPerSecond: 200 }, "app-capped", rules);
    assert.ok(gate.admit(capped, undefined, 1, 40).ok);
    const over = gate.admit(capped, undefined, 1, 26);
    assert.ok(!over.ok);
    assert.equal(over.row, GatewayError.AppRateLimited);
    assert.equal(over.limit, 50);
    assert.match(over.message ?? "", /app's per-second cap of 50 compute units\/s/);
    // The workspace's CU window holds only the 40 admitted: another app of it gets 160.
    const other = key({ computeUnitsPerSecond: 200 }, "app-other");
    assert.ok(gate.admit(other, undefined, 1, 160).ok);
    // The workspace is full: the capped app's refusal by it leaves the app's own window as it was (10 left).
    const wsFull = gate.admit(capped, undefined, 1, 5);
    assert.ok(!wsFull.ok && wsFull.row === GatewayError.RateLimited && wsFull.limit === 200);
    clock.advance(1000);
    const capOnly = key({}, "app-capped", rules);
    assert.ok(gate.admit(capOnly, undefined, 1, 50).ok, "a cap applies even when the plan has no CU limit");
    assert.equal(gate.admit(capOnly, undefined, 1, 1).ok, false);
  });
});
