import assert from "node:assert/strict";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, sleep, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";
import { TestWsClient } from "./ws/ws-client";

const getLogs = (id: number) => ({
  jsonrpc: "2.0",
  id,
  method: "eth_getLogs",
  params: [{ fromBlock: "0x1", toBlock: "0x10" }],
});

/** Sample lines of one metric family in a /metrics text. */
function samples(metrics: string, name: string): string[] {
  return metrics.split("\n").filter((l) => l.startsWith(`${name}{`));
}

/**
 * Issue 13 §4: one tenant cannot take a shared network down. Two real HTTP upstreams (stubs that answer
 * eth_getLogs / eth_call slowly and everything else at once), two tenants (app keys of different apps).
 */
describe("data plane fairness: one tenant's slow calls do not take a shared network down", function () {
  this.timeout(60_000);
  let a: StubUpstream;
  let b: StubUpstream;
  let gw: Gateway;
  let keyA: string;
  let keyB: string;
  let urlA: string;
  let urlB: string;

  const start = async (env: Record<string, string> = {}) => {
    gw = await startGateway(
      {
        CACHE_MAX_BYTES: "0",
        UPSTREAM_TIMEOUT_MS: "400",
        BREAKER_FAILURE_THRESHOLD: "3",
        BREAKER_COOLDOWN_MS: "5000",
        HEALTH_PROBE_TIMEOUT_MS: "300",
        // Tenant A floods alone here: the per-key caps (concurrency.test.ts) would hide what this file tests.
        MAX_HEAVY_IN_FLIGHT_PER_KEY: "0",
        ...env,
      },
      async (s) => {
        await s.putNetwork(
          evmNetwork("eth", [
            { id: "a", httpUrl: a.url },
            { id: "b", httpUrl: b.url },
          ]),
        );
        keyA = await s.putKey({ appId: "app-a", workspaceId: "ws-a" });
        keyB = await s.putKey({ appId: "app-b", workspaceId: "ws-b" });
      },
    );
    urlA = `${gw.base}/eth/rpc?apikey=${keyA}`;
    urlB = `${gw.base}/eth/rpc?apikey=${keyB}`;
  };

  beforeEach(async () => {
    a = await new StubUpstream().start();
    b = await new StubUpstream().start();
  });

  afterEach(async () => {
    await gw?.stop();
    await a.stop();
    await b.stop();
  });

  const breakers = () =>
    gw.plane.context.upstreams
      .get("eth")!
      .describe()
      .map((u) => [u.id, u.breakerOpen]);
  const metrics = async () => (await fetch(`${gw.base}/metrics`)).text();

  /** Tenant B's ordinary calls over HTTP and WS until `done`; returns the failures (should be none). */
  async function tenantB(done: () => boolean): Promise<{ calls: number; failures: string[] }> {
    const ws = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${keyB}`);
    const failures: string[] = [];
    let calls = 0;
    try {
      while (!done()) {
        for (const method of ["eth_blockNumber", "eth_chainId"]) {
          const r = await post(urlB, { jsonrpc: "2.0", id: calls, method, params: [] });
          calls++;
          if (r.status !== 200 || r.json?.result === undefined) failures.push(`http ${method}: ${r.text}`);
          const w = await ws.call(method, []);
          calls++;
          if (w.result === undefined) failures.push(`ws ${method}: ${JSON.stringify(w)}`);
        }
      }
    } finally {
      ws.close();
    }
    return { calls, failures };
  }

  it("tenant A floods slow eth_getLogs: A gets 504s, each sent once (no failover); B's calls all succeed; no breaker opens", async () => {
    a.methodDelayMs.set("eth_getLogs", 1_500);
    b.methodDelayMs.set("eth_getLogs", 1_500);
    await start();
    let flooding = true;
    const bRun = tenantB(() => !flooding);
    let sent = 0;
    const statuses = new Map<string, number>();
    for (let wave = 0; wave < 4; wave++) {
      const rs = await Promise.all(Array.from({ length: 20 }, () => post(urlA, getLogs(sent++))));
      for (const r of rs) {
        const k = `${r.status} ${r.json?.error?.data?.reason ?? "ok"}`;
        statuses.set(k, (statuses.get(k) ?? 0) + 1);
      }
    }
    flooding = false;
    const bResult = await bRun;
    assert.deepEqual([...statuses], [[`504 ${GatewayError.UpstreamTimeout.reason}`, 80]]);
    assert.deepEqual(bResult.failures, []);
    assert.ok(bResult.calls >= 8, `tenant B made ${bResult.calls} calls during the flood`);
    // Heavy calls are not failed over: every eth_getLogs reached exactly one node.
    assert.equal(a.count("eth_getLogs") + b.count("eth_getLogs"), sent);
    assert.ok(a.count("eth_getLogs") > 0 && b.count("eth_getLogs") > 0, "spread over both nodes");
    assert.deepEqual(breakers(), [
      ["a", false],
      ["b", false],
    ]);
    const m = await metrics();
    assert.deepEqual(samples(m, "rpcgw_upstream_breaker_opens_total"), []);
    assert.ok(
      samples(m, "rpcgw_upstream_requests_total").some(
        (l) => l.includes('outcome="timeout"') && !l.endsWith(" 0"),
      ),
    );
  });

  it("a flood larger than the nodes' connections: heavy calls keep to their share (503 upstream_busy beyond it), B's calls still get through", async () => {
    a.methodDelayMs.set("eth_getLogs", 1_500);
    b.methodDelayMs.set("eth_getLogs", 1_500);
    // 4 connections per node, half of them for heavy calls: 4 heavy calls in flight over the network.
    await start({ UPSTREAM_CONNECTIONS: "4", UPSTREAM_HEAVY_SHARE_PERCENT: "50" });
    let flooding = true;
    const bRun = tenantB(() => !flooding);
    const statuses = new Map<string, number>();
    let sent = 0;
    for (let wave = 0; wave < 3; wave++) {
      const rs = await Promise.all(Array.from({ length: 30 }, () => post(urlA, getLogs(sent++))));
      for (const r of rs) {
        const k = `${r.status} ${r.json?.error?.data?.reason ?? "ok"}`;
        statuses.set(k, (statuses.get(k) ?? 0) + 1);
      }
    }
    flooding = false;
    const bResult = await bRun;
    assert.deepEqual(bResult.failures, []);
    assert.ok(bResult.calls >= 8, `tenant B made ${bResult.calls} calls during the flood`);
    const busy = statuses.get(`503 ${GatewayError.UpstreamBusy.reason}`) ?? 0;
    const timedOut = statuses.get(`504 ${GatewayError.UpstreamTimeout.reason}`) ?? 0;
    assert.equal(busy + timedOut, sent, JSON.stringify([...statuses]));
    assert.ok(timedOut >= 4 && timedOut <= 3 * 4 + 4, `504s: ${timedOut}`);
    assert.equal(
      a.count("eth_getLogs") + b.count("eth_getLogs"),
      timedOut,
      "refused calls never left the gateway",
    );
    assert.deepEqual(breakers(), [
      ["a", false],
      ["b", false],
    ]);
  });

  it("slow light calls (eth_call) are failed over but open no breaker while the nodes pass their health probes", async () => {
    a.methodDelayMs.set("eth_call", 1_500);
    b.methodDelayMs.set("eth_call", 1_500);
    await start();
    let flooding = true;
    const bRun = tenantB(() => !flooding);
    const call = (id: number) => ({
      jsonrpc: "2.0",
      id,
      method: "eth_call",
      params: [{ to: "0x00" }, "latest"],
    });
    let sent = 0;
    for (let wave = 0; wave < 2; wave++) {
      const rs = await Promise.all(Array.from({ length: 10 }, () => post(urlA, call(sent++))));
      for (const r of rs)
        assert.equal(r.json?.error?.data?.reason, GatewayError.UpstreamTimeout.reason, r.text);
    }
    flooding = false;
    assert.deepEqual((await bRun).failures, []);
    assert.equal(a.count("eth_call") + b.count("eth_call"), 2 * sent, "each tried on both nodes");
    assert.deepEqual(breakers(), [
      ["a", false],
      ["b", false],
    ]);
  });

  it("a node that hangs on everything fails its health probes and its breaker opens (cause health_probe)", async () => {
    await start();
    a.mode = "hang";
    for (let i = 0; i < 20; i++) {
      const r = await post(urlB, { jsonrpc: "2.0", id: i, method: "eth_chainId" });
      assert.equal(r.status, 200, r.text);
    }
    const deadline = Date.now() + 5_000;
    while (!breakers()[0]![1] && Date.now() < deadline) await sleep(50);
    assert.deepEqual(breakers(), [
      ["a", true],
      ["b", false],
    ]);
    const opens = samples(await metrics(), "rpcgw_upstream_breaker_opens_total");
    assert.deepEqual(opens, [
      'rpcgw_upstream_breaker_opens_total{network="eth",upstream="a",cause="health_probe"} 1',
    ]);
  });

  it("a connection-refused node still opens its breaker (cause unreachable) and calls keep succeeding", async () => {
    await start({ HEALTH_CHECK_INTERVAL_MS: "60000" });
    await a.stop();
    // Selection steers away from a failing node, so it takes a few calls to reach it 3 times.
    for (let i = 0; i < 300 && !breakers()[0]![1]; i++) {
      const r = await post(urlB, { jsonrpc: "2.0", id: i, method: "eth_chainId" });
      assert.equal(r.status, 200, r.text);
    }
    assert.deepEqual(breakers(), [
      ["a", true],
      ["b", false],
    ]);
    const opens = samples(await metrics(), "rpcgw_upstream_breaker_opens_total");
    assert.deepEqual(opens, [
      'rpcgw_upstream_breaker_opens_total{network="eth",upstream="a",cause="unreachable"} 1',
    ]);
  });

  it("a node answering HTTP 429 is backed off for its Retry-After, without a breaker count; calls go to the other", async () => {
    await start({ BREAKER_FAILURE_THRESHOLD: "1" });
    a.mode = "http429";
    a.retryAfter = "3";
    a.reset();
    b.reset();
    for (let i = 0; i < 30; i++) {
      const r = await post(urlB, { jsonrpc: "2.0", id: i, method: "eth_gasPrice" });
      assert.equal(r.status, 200, r.text);
    }
    assert.ok(a.exchanges <= 1, `a got ${a.exchanges} exchanges while backed off`);
    assert.equal(b.count("eth_gasPrice"), 30, "b answered every call (the one a refused was failed over)");
    assert.deepEqual(breakers(), [
      ["a", false],
      ["b", false],
    ]);
    const m = await metrics();
    assert.deepEqual(samples(m, "rpcgw_upstream_breaker_opens_total"), []);
    assert.deepEqual(samples(m, "rpcgw_upstream_backoffs_total"), [
      'rpcgw_upstream_backoffs_total{network="eth",upstream="a"} 1',
    ]);
    // Both nodes throttling: a clear 503 naming it, and still no breaker opened.
    b.mode = "http429";
    a.mode = "http429";
    const r = await post(urlB, { jsonrpc: "2.0", id: 1, method: "eth_gasPrice" });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.error.data.reason, GatewayError.UpstreamRateLimited.reason);
    assert.deepEqual(breakers(), [
      ["a", false],
      ["b", false],
    ]);
  });

  it("a node answering a JSON-RPC rate-limit error (-32005) is backed off too; the client gets the other node's answer", async () => {
    await start({ BREAKER_FAILURE_THRESHOLD: "1", UPSTREAM_BACKOFF_DEFAULT_MS: "5000" });
    a.mode = "rpc429";
    for (let i = 0; i < 20; i++) {
      const r = await post(urlB, { jsonrpc: "2.0", id: i, method: "eth_gasPrice" });
      assert.equal(r.status, 200, r.text);
      assert.ok(r.json.result !== undefined, r.text);
    }
    assert.ok(a.count("eth_gasPrice") <= 1, `a got ${a.count("eth_gasPrice")} calls while backed off`);
    assert.deepEqual(breakers(), [
      ["a", false],
      ["b", false],
    ]);
    assert.equal(samples(await metrics(), "rpcgw_upstream_backoffs_total").length, 1);
  });
});
