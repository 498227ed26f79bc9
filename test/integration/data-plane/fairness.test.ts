import assert from "node:assert/strict";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { eventually } from "../../helpers/eventually";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "./harness";
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
 * Client-call and probe timeouts. Generous on purpose: on a loaded machine an event-loop stall of a few
 * hundred ms can fire a timer before an answer that already arrived is read, so every "fast" answer must
 * fit with a wide margin; the slow methods are slower still (SLOW_MS), so they time out whatever the load.
 */
const TIMEOUT_MS = 2_000;
const PROBE_TIMEOUT_MS = 1_500;
const SLOW_MS = 5_000;

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

  /** `weightA`: node a's weight (b's is 100). */
  const start = async (env: Record<string, string> = {}, weightA = 100) => {
    gw = await startGateway(
      {
        CACHE_MAX_BYTES: "0",
        UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS),
        BREAKER_FAILURE_THRESHOLD: "3",
        BREAKER_COOLDOWN_MS: "5000",
        HEALTH_PROBE_TIMEOUT_MS: String(PROBE_TIMEOUT_MS),
        // Tenant A floods alone here: the per-key caps (concurrency.test.ts) would hide what this file tests.
        MAX_HEAVY_IN_FLIGHT_PER_KEY: "0",
        ...env,
      },
      async (s) => {
        await s.putNetwork(
          evmNetwork("eth", [
            { id: "a", httpUrl: a.url, weight: weightA },
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
  const metrics = async () => (await fetch(`${gw.metricsBase}/metrics`)).text();

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
    a.methodDelayMs.set("eth_getLogs", SLOW_MS);
    b.methodDelayMs.set("eth_getLogs", SLOW_MS);
    await start();
    let flooding = true;
    const bRun = tenantB(() => !flooding);
    let sent = 0;
    const statuses = new Map<string, number>();
    // One wave of 40 at once (within the nodes' heavy share: 2 x 32 connections).
    const rs = await Promise.all(Array.from({ length: 40 }, () => post(urlA, getLogs(sent++))));
    for (const r of rs) {
      const k = `${r.status} ${r.json?.error?.data?.reason ?? "ok"}`;
      statuses.set(k, (statuses.get(k) ?? 0) + 1);
    }
    flooding = false;
    const bResult = await bRun;
    assert.deepEqual([...statuses], [[`504 ${GatewayError.UpstreamTimeout.reason}`, 40]]);
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
    a.methodDelayMs.set("eth_getLogs", SLOW_MS);
    b.methodDelayMs.set("eth_getLogs", SLOW_MS);
    // 4 connections per node, half of them for heavy calls: 4 heavy calls in flight over the network.
    await start({ UPSTREAM_CONNECTIONS: "4", UPSTREAM_HEAVY_SHARE_PERCENT: "50" });
    let flooding = true;
    const bRun = tenantB(() => !flooding);
    const statuses = new Map<string, number>();
    let sent = 0;
    // Two waves at once: 60 heavy calls for 4 heavy slots.
    const waves = await Promise.all(
      [0, 1].map(() => Promise.all(Array.from({ length: 30 }, () => post(urlA, getLogs(sent++))))),
    );
    for (const r of waves.flat()) {
      const k = `${r.status} ${r.json?.error?.data?.reason ?? "ok"}`;
      statuses.set(k, (statuses.get(k) ?? 0) + 1);
    }
    flooding = false;
    const bResult = await bRun;
    assert.deepEqual(bResult.failures, []);
    assert.ok(bResult.calls >= 8, `tenant B made ${bResult.calls} calls during the flood`);
    const busy = statuses.get(`503 ${GatewayError.UpstreamBusy.reason}`) ?? 0;
    const timedOut = statuses.get(`504 ${GatewayError.UpstreamTimeout.reason}`) ?? 0;
    assert.equal(busy + timedOut, sent, JSON.stringify([...statuses]));
    assert.ok(timedOut >= 4 && timedOut <= 2 * 4 + 4, `504s: ${timedOut}`);
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
    a.methodDelayMs.set("eth_call", SLOW_MS);
    b.methodDelayMs.set("eth_call", SLOW_MS);
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
    const rs = await Promise.all(Array.from({ length: 20 }, () => post(urlA, call(sent++))));
    for (const r of rs)
      assert.equal(r.json?.error?.data?.reason, GatewayError.UpstreamTimeout.reason, r.text);
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
    for (let i = 0; i < 10; i++) {
      const r = await post(urlB, { jsonrpc: "2.0", id: i, method: "eth_chainId" });
      assert.equal(r.status, 200, r.text);
    }
    // Health checks every 2 s, each failing after PROBE_TIMEOUT_MS: 3 failures within ~8 s.
    await eventually(() => breakers()[0]![1], "a's breaker opens", 15_000);
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
    // Selection steers away from a failing node after its first failure (its error rate multiplies its
    // score by up to 11): weighing a 10,000 to b's 100 keeps calls going to it, so its failures are what
    // open its breaker.
    await start({ HEALTH_CHECK_INTERVAL_MS: "60000" }, 10_000);
    await a.stop();
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

  // Review of issue 13: an invalid 200 settled as a success first, then one failure, so the count stuck at 1.
  const COOLDOWN_MS = 2_000;
  /** Sends one call per poll (each may be the half-open one) until `done`. */
  const callUntil = (done: () => boolean, what: string) =>
    eventually(
      async () => {
        if (done()) return true;
        const r = await post(urlB, { jsonrpc: "2.0", id: 1, method: "eth_gasPrice" });
        assert.equal(r.status, 200, r.text);
        return done();
      },
      what,
      20_000,
      50,
    );
  for (const mode of ["garbage", "empty200"] as const) {
    it(`a node answering 200 with an invalid body (${mode}) opens its breaker at the threshold (cause bad_response); a half-open call answered the same re-opens it`, async () => {
      // No health checks: only client calls judge the node here.
      // Weighed far above b, so that selection keeps sending calls to a while it fails (see above).
      await start({ HEALTH_CHECK_INTERVAL_MS: "600000", BREAKER_COOLDOWN_MS: String(COOLDOWN_MS) }, 10_000);
      a.mode = mode;
      a.reset();
      for (let i = 0; i < 300 && !breakers()[0]![1]; i++) {
        const r = await post(urlB, { jsonrpc: "2.0", id: i, method: "eth_gasPrice" });
        assert.equal(r.status, 200, r.text);
      }
      assert.deepEqual(breakers(), [
        ["a", true],
        ["b", false],
      ]);
      assert.equal(a.exchanges, 3, "opened by exactly BREAKER_FAILURE_THRESHOLD invalid answers");
      assert.deepEqual(samples(await metrics(), "rpcgw_upstream_breaker_opens_total"), [
        'rpcgw_upstream_breaker_opens_total{network="eth",upstream="a",cause="bad_response"} 1',
      ]);
      // After the cooldown one half-open call reaches a; its invalid answer re-opens the breaker.
      await callUntil(() => a.exchanges >= 4, "the half-open call after the cooldown");
      const reopenedAtMs = Date.now();
      assert.equal(a.exchanges, 4);
      for (let i = 0; i < 20; i++) {
        const r = await post(urlB, { jsonrpc: "2.0", id: i, method: "eth_gasPrice" });
        assert.equal(r.status, 200, r.text);
      }
      // Only meaningful while the new cooldown lasts (a loaded machine may take longer for 20 calls).
      if (Date.now() - reopenedAtMs < COOLDOWN_MS) {
        assert.equal(a.exchanges, 4, "the breaker re-opened: no call reached a during the new cooldown");
      }
      assert.deepEqual(breakers(), [
        ["a", true],
        ["b", false],
      ]);
      // A healed node closes it at the next half-open call.
      a.mode = "ok";
      await callUntil(() => !breakers()[0]![1], "the half-open call that closes the breaker");
      assert.deepEqual(breakers(), [
        ["a", false],
        ["b", false],
      ]);
    });
  }

  it("health probes answered 200 with garbage open the breaker (cause health_probe)", async () => {
    await start({ HEALTH_CHECK_INTERVAL_MS: "200" });
    a.mode = "garbage";
    await eventually(() => breakers()[0]![1], "a's breaker opens", 10_000);
    assert.deepEqual(breakers(), [
      ["a", true],
      ["b", false],
    ]);
    assert.deepEqual(samples(await metrics(), "rpcgw_upstream_breaker_opens_total"), [
      'rpcgw_upstream_breaker_opens_total{network="eth",upstream="a",cause="health_probe"} 1',
    ]);
  });

  // Review of issue 13: a client could provoke a 413 (geth caps bodies at 5 MiB) on every node through
  // coalescing, and every non-2xx counted toward the breaker.
  it("HTTP 413 (request too large for the node) opens no breaker: the big call gets a Node Error row, coalesced neighbours and ordinary calls succeed", async () => {
    // Threshold 1: a single counted failure would open a breaker. Both nodes cap bodies at 100 kB here.
    await start({ BREAKER_FAILURE_THRESHOLD: "1", UPSTREAM_COALESCE_MAX: "20" });
    a.maxBodyBytes = 100_000;
    b.maxBodyBytes = 100_000;
    const ethCall = (id: number, bytes: number) => ({
      jsonrpc: "2.0",
      id,
      method: "eth_call",
      params: [{ to: "0x00", data: `0x${"ab".repeat(bytes / 2)}` }, "latest"],
    });
    // 150 kB params: above the coalescing bound (64 KiB), sent alone, refused by the node. 30 kB params:
    // coalesced (a 20-call batch of them is 600 kB: refused, then re-sent one by one), each fits.
    const [big, medium, small] = await Promise.all([
      Promise.all(Array.from({ length: 3 }, (_, i) => post(urlA, ethCall(i, 150_000)))),
      Promise.all(Array.from({ length: 20 }, (_, i) => post(urlA, ethCall(100 + i, 30_000)))),
      Promise.all(
        Array.from({ length: 20 }, (_, i) => post(urlB, { jsonrpc: "2.0", id: i, method: "eth_gasPrice" })),
      ),
    ]);
    for (const r of big) {
      assert.equal(r.status, 502, r.text);
      assert.equal(r.json.error.data.reason, GatewayError.UpstreamRequestRefused.reason);
      assert.equal(r.json.error.data.category, GatewayError.UpstreamRequestRefused.category);
      assert.equal(GatewayError.UpstreamRequestRefused.category, "Node Error");
    }
    for (const r of medium) assert.equal(r.status, 200, r.text.slice(0, 200));
    for (const r of small) assert.equal(r.status, 200, r.text);
    // The big calls were not failed over (which would hand each node the client's body in turn): each
    // reached one node once.
    assert.equal(a.refusedSingles + b.refusedSingles, 3, "single bodies refused");
    assert.deepEqual(breakers(), [
      ["a", false],
      ["b", false],
    ]);
    assert.deepEqual(samples(await metrics(), "rpcgw_upstream_breaker_opens_total"), []);
    const after = await post(urlB, { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
    assert.equal(after.json.result, "0x7a69");
  });

  it("coalesced batches are cut before 1 MiB: 20 calls of 60 kB reach a node capping bodies at 1.1 MB without one 413", async () => {
    await start({ BREAKER_FAILURE_THRESHOLD: "1", UPSTREAM_COALESCE_MAX: "20" });
    for (const u of [a, b]) {
      u.maxBodyBytes = 1_100_000;
      u.delayMs = 200; // answers overlap, so the calls below arrive while others wait: they coalesce
      u.reset();
    }
    const ethCall = (id: number) => ({
      jsonrpc: "2.0",
      id,
      method: "eth_call",
      params: [{ to: "0x00", data: `0x${"cd".repeat(30_000)}` }, "latest"],
    });
    const rs = await Promise.all(Array.from({ length: 40 }, (_, i) => post(urlA, ethCall(i))));
    for (const r of rs) assert.equal(r.status, 200, r.text.slice(0, 200));
    assert.equal(a.refusedTooLarge + b.refusedTooLarge, 0, "no body crossed the node's cap");
    assert.equal(a.count("eth_call") + b.count("eth_call"), 40);
    assert.ok(
      a.exchanges + b.exchanges < 40,
      `expected coalesced exchanges, got ${a.exchanges + b.exchanges} (largest batch ${Math.max(a.largestBatch, b.largestBatch)})`,
    );
    assert.ok(Math.max(a.largestBatch, b.largestBatch) <= 17, "at most 1 MiB / 60 kB calls per batch");
  });
});
