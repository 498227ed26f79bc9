import assert from "node:assert/strict";
import { availableParallelism } from "node:os";
import { dataPlaneThreads, loadDataPlaneConfig } from "../../../data-plane/src/config";

describe("data-plane config: WebSocket caps and the method policy's extra namespaces", () => {
  it("has defaults for every cap (no variable needs to be set)", () => {
    const c = loadDataPlaneConfig({});
    assert.equal(c.WS_MAX_SUBSCRIPTIONS_PER_CONNECTION, 100);
    assert.equal(c.WS_MAX_CONNECTIONS_PER_KEY, 1000);
    assert.equal(c.WS_MAX_CONNECTIONS_PER_IP, 500);
    assert.equal(c.WS_MAX_UPSTREAM_SUBSCRIPTIONS_PER_WORKSPACE, 200);
    assert.deepEqual(c.SHARED_NODE_EXTRA_NAMESPACES, []);
  });

  it("parses overrides and refuses nonsense at start", () => {
    const c = loadDataPlaneConfig({
      WS_MAX_CONNECTIONS_PER_IP: "12",
      SHARED_NODE_EXTRA_NAMESPACES: "bor, zks",
    });
    assert.equal(c.WS_MAX_CONNECTIONS_PER_IP, 12);
    assert.deepEqual(c.SHARED_NODE_EXTRA_NAMESPACES, ["bor", "zks"]);
    assert.throws(() => loadDataPlaneConfig({ WS_MAX_CONNECTIONS_PER_KEY: "0" }));
    assert.throws(() => loadDataPlaneConfig({ WS_MAX_UPSTREAM_SUBSCRIPTIONS_PER_WORKSPACE: "many" }));
  });
});

describe("data-plane config: hedged reads and head integrity", () => {
  it("defaults: hedging on, 20..1000 ms, at most 20%; outlier heads beyond 1000 blocks", () => {
    const c = loadDataPlaneConfig({});
    assert.equal(c.HEDGE_ENABLED, true);
    assert.equal(c.HEDGE_MIN_DELAY_MS, 20);
    assert.equal(c.HEDGE_MAX_DELAY_MS, 1000);
    assert.equal(c.HEDGE_MAX_PERCENT, 20);
    assert.equal(c.HEAD_OUTLIER_BLOCKS, 1000);
  });

  it("refuses a floor above the ceiling, a share over 100 and a zero outlier threshold", () => {
    assert.equal(loadDataPlaneConfig({ HEDGE_ENABLED: "false" }).HEDGE_ENABLED, false);
    assert.throws(
      () => loadDataPlaneConfig({ HEDGE_MIN_DELAY_MS: "500", HEDGE_MAX_DELAY_MS: "100" }),
      /HEDGE_MIN_DELAY_MS \(500\) is above HEDGE_MAX_DELAY_MS \(100\)/,
    );
    assert.throws(() => loadDataPlaneConfig({ HEDGE_MAX_PERCENT: "101" }));
    assert.throws(() => loadDataPlaneConfig({ HEAD_OUTLIER_BLOCKS: "0" }));
  });
});

describe("data-plane config: DATA_PLANE_THREADS", () => {
  it("unset = the CPUs this process may run on; a number = that many; 1..1024 only", () => {
    assert.equal(loadDataPlaneConfig({}).DATA_PLANE_THREADS, undefined);
    assert.equal(dataPlaneThreads(loadDataPlaneConfig({})), availableParallelism());
    assert.equal(dataPlaneThreads(loadDataPlaneConfig({ DATA_PLANE_THREADS: "1" })), 1);
    assert.equal(dataPlaneThreads(loadDataPlaneConfig({ DATA_PLANE_THREADS: "6" })), 6);
    for (const bad of ["0", "-1", "1.5", "all", "1025"])
      assert.throws(
        () => loadDataPlaneConfig({ DATA_PLANE_THREADS: bad }),
        /DATA_PLANE_THREADS: expected an integer 1\.\.1024/,
      );
  });
});
