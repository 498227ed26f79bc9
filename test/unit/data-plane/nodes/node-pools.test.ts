import assert from "node:assert/strict";
import { NoopMetrics } from "../../../../data-plane/src/metrics/metrics";
import { NodePools } from "../../../../data-plane/src/nodes/node-pools";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { NodeRecord } from "../../../../shared/src/redis/records";
import { freePort } from "../../../helpers/ports";

function node(httpUrl: string | null, nodeId = "n1"): NodeRecord {
  return { nodeId, workspaceId: "w1", protocol: "EVM", httpUrl, wsUrl: null, status: "SYNCED" };
}

describe("data-plane: dedicated nodes as one-upstream pools", () => {
  let pools: NodePools;
  beforeEach(() => {
    pools = new NodePools(
      {
        timeoutMs: 1_000,
        connections: 2,
        breakerThreshold: 3,
        breakerCooldownMs: 60_000,
        maxAttempts: 3,
        maxLagBlocks: 10,
        coalesceMax: 1,
        healthCheckIntervalMs: 60_000,
      },
      new NoopMetrics(),
    );
  });
  afterEach(() => pools.close());

  it("one pool per node and URL; a changed URL gets a new pool whose cache keys (slug) share nothing", async () => {
    assert.equal(pools.get(node(null)), undefined, "no URL yet");
    assert.equal(pools.get(node("not a url")), undefined, "a URL the client cannot use");
    const a = pools.get(node("http://127.0.0.1:1/rpc"))!;
    assert.equal(pools.get(node("http://127.0.0.1:1/rpc")), a);
    const b = pools.get(node("http://127.0.0.1:2/rpc"))!;
    assert.notEqual(b, a);
    assert.notEqual(b.record.slug, a.record.slug);
    // No network slug can contain ':' (control plane SLUG_RE), so node entries never mix with a network's.
    assert.match(b.record.slug, /^node:n1:\d+$/);
    assert.equal(pools.size, 1);
    pools.forget("n1");
    assert.equal(pools.size, 0);
  });

  it("a dedicated node is never given up on: one attempt per call, no breaker, however often it fails", async () => {
    const port = await freePort(); // nothing listens: every exchange is refused
    const pool = pools.get(node(`http://127.0.0.1:${port}/`))!;
    for (let i = 0; i < 8; i++) {
      const r = await pool.call({ method: "eth_chainId", params: [] });
      assert.ok(!r.ok);
      // Not no_upstream: the node was tried each time (a breaker at 3 failures would have stopped that).
      assert.equal(r.error, GatewayError.UpstreamUnreachable);
    }
    assert.equal(pool.healthyCount(), 1);
    assert.equal(pool.describe()[0]!.breakerOpen, false);
  });
});
