import assert from "node:assert/strict";
import { OperatorService } from "../../../../control-plane/src/operator/operator.service";
import type { HealthRecord, UpstreamHealth } from "../../../../shared/src/redis/records";

function rec(instanceId: string, head: number, upstreams: UpstreamHealth[]): HealthRecord {
  return { instanceId, atMs: 1_700_000_000_000, networks: [{ slug: "eth", head, upstreams }] };
}

function up(over: Partial<UpstreamHealth>): UpstreamHealth {
  return {
    id: "u1",
    healthy: true,
    head: 100,
    lagBlocks: 0,
    latencyEwmaMs: 10,
    errorRate: 0,
    breakerOpen: false,
    ...over,
  };
}

describe("control-plane: OperatorService.aggregate (upstream health over data-plane instances)", () => {
  it("no record names the upstream: no live data, not healthy", () => {
    const v = OperatorService.aggregate([rec("a", 100, [up({ id: "other" })])], "eth", "u1");
    assert.deepEqual(
      { ...v, perInstance: v.perInstance.length },
      {
        instances: 0,
        healthyInstances: 0,
        healthy: false,
        head: null,
        lagBlocks: null,
        latencyMs: null,
        errorRate: null,
        breakerOpen: false,
        perInstance: 0,
      },
    );
  });

  it("healthy only when every instance says so; worst lag, highest head, mean latency and error rate", () => {
    const v = OperatorService.aggregate(
      [
        rec("b", 100, [up({ head: 90, lagBlocks: 10, healthy: false, latencyEwmaMs: 30, errorRate: 0.5 })]),
        rec("a", 100, [
          up({ head: 100, lagBlocks: 0, latencyEwmaMs: 10, errorRate: 0.1, breakerOpen: true }),
        ]),
      ],
      "eth",
      "u1",
    );
    assert.equal(v.instances, 2);
    assert.equal(v.healthyInstances, 1);
    assert.equal(v.healthy, false);
    assert.equal(v.head, 100);
    assert.equal(v.lagBlocks, 10);
    assert.equal(v.latencyMs, 20);
    assert.ok(Math.abs(v.errorRate! - 0.3) < 1e-9);
    assert.equal(v.breakerOpen, true);
    assert.deepEqual(
      v.perInstance.map((p) => p.instanceId),
      ["a", "b"],
    );
  });

  it("unknown heads and lags are left out rather than counted as 0 or -1", () => {
    const v = OperatorService.aggregate(
      [rec("a", -1, [up({ head: -1, lagBlocks: null })]), rec("b", 50, [up({ head: 50, lagBlocks: 2 })])],
      "eth",
      "u1",
    );
    assert.equal(v.head, 50);
    assert.equal(v.lagBlocks, 2);
    assert.equal(v.healthy, true);
  });
});
