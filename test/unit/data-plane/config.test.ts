import assert from "node:assert/strict";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";

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
