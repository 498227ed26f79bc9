import assert from "node:assert/strict";
import { loadDataPlaneConfig } from "../../../../data-plane/src/config";
import type { StartedProcess } from "../../../helpers/process";
import { post, sleep } from "../harness";
import { TestWsClient } from "../ws/ws-client";
import { type BigAnswerGateway, MiB, rssBytes, startBigAnswerGateway, withPeakRss } from "./fixture";
import type { HugeUpstream } from "./huge-upstream";

/** Cap under test (small, so the RSS bound is sharp); the answers are 16x larger. */
const CAP = 8 * MiB;
const HUGE = 128 * MiB;
const NODE_ID = "0b7e3a52-9c1d-4e8f-a2b3-c4d5e6f70819";

describe("data plane: upstream answers above UPSTREAM_MAX_RESPONSE_BYTES", function () {
  this.timeout(90_000);
  let gw: BigAnswerGateway;
  let up: HugeUpstream;
  let dp: StartedProcess;
  let base: string;
  let appKey: string;
  let nodeKey: string;
  let baseline = 0;

  before(async () => {
    gw = await startBigAnswerGateway(NODE_ID, {
      UPSTREAM_MAX_RESPONSE_BYTES: String(CAP),
      // The coalescing test answers one WebSocket client with 4 x 3 MiB at once.
      WS_MAX_BUFFERED_BYTES: String(32 * MiB),
      // One heap: the RSS bounds below are measured against a baseline taken after warming every path,
      // and a warm-up request reaches only the thread its connection lands on.
      DATA_PLANE_THREADS: "1",
    });
    ({ up, dp, base, appKey, nodeKey } = gw);
    // Warm up every path once so the baseline includes what they allocate on first use.
    assert.equal((await post(`${base}/eth/rpc?apikey=${appKey}`, call("eth_chainId"))).status, 200);
    assert.equal((await post(`${base}/nodes/${NODE_ID}/${nodeKey}`, call("eth_chainId"))).status, 200);
    await sleep(300);
    baseline = rssBytes(dp.pid);
  });
  after(async () => {
    await gw?.close();
  });

  let nextId = 1;
  function call(method: string, params: unknown[] = []): object {
    return { jsonrpc: "2.0", id: nextId++, method, params };
  }
  const hugeLogs = (declareLength = false) => call("eth_getLogs", [{}, { hugeBytes: HUGE, declareLength }]);

  function assertTooLarge(err: { code: number; message: string; data?: { reason?: string } }): void {
    assert.equal(err.code, -32603);
    assert.equal(err.data?.reason, "upstream_response_too_large", JSON.stringify(err));
    assert.match(err.message, new RegExp(`response size cap of ${CAP} bytes`));
  }

  async function assertStillServing(): Promise<void> {
    const r = await post(`${base}/eth/rpc?apikey=${appKey}`, call("eth_chainId"));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.result, "0x7a69", "same upstream, breaker not opened");
  }

  function assertCutOff(from: number): void {
    const cut = up.huge.slice(from);
    assert.ok(cut.length >= 1, "the upstream was asked for the huge answer");
    for (const h of cut) {
      assert.equal(h.complete, false, "the connection was closed before the answer ended");
      assert.ok(h.written < HUGE / 2, `upstream sent ${h.written} bytes before the reader hung up`);
    }
  }

  it("shared network over HTTP (streamed, no length): 502 row naming the cap, RSS flat, next call fine", async () => {
    const from = up.huge.length;
    const { value: r, peak } = await withPeakRss(dp.pid, () =>
      post(`${base}/eth/rpc?apikey=${appKey}`, hugeLogs()),
    );
    assert.equal(r.status, 502, r.text.slice(0, 300));
    assertTooLarge(r.json.error);
    await up.settled();
    assertCutOff(from);
    assert.ok(peak - baseline < 48 * MiB, `RSS grew ${((peak - baseline) / MiB).toFixed(1)} MiB`);
    await assertStillServing();
  });

  it("a declared Content-Length over the cap fails before the body is read; repeated calls never trip the breaker", async () => {
    const from = up.huge.length;
    for (let i = 0; i < 3; i++) {
      const r = await post(`${base}/eth/rpc?apikey=${appKey}`, hugeLogs(i % 2 === 0));
      assert.equal(r.status, 502);
      assertTooLarge(r.json.error);
      await assertStillServing();
    }
    await up.settled();
    assertCutOff(from);
    // A batch goes upstream as one exchange, so its one (too large) answer fails the batch as a whole.
    const b = await post(`${base}/eth/rpc?apikey=${appKey}`, [hugeLogs(), call("eth_blockNumber")]);
    assert.equal(b.status, 502);
    assertTooLarge(b.json.error);
    await assertStillServing();
    assert.ok(rssBytes(dp.pid) - baseline < 48 * MiB);
  });

  it("dedicated-node endpoint: same row, RSS flat, the node answers the next call", async () => {
    const from = up.huge.length;
    const url = `${base}/nodes/${NODE_ID}/${nodeKey}`;
    const { value: r, peak } = await withPeakRss(dp.pid, () => post(url, hugeLogs()));
    assert.equal(r.status, 502, r.text.slice(0, 300));
    assertTooLarge(r.json.error);
    await up.settled();
    assertCutOff(from);
    assert.ok(peak - baseline < 48 * MiB, `RSS grew ${((peak - baseline) / MiB).toFixed(1)} MiB`);
    const ok = await post(url, call("eth_chainId"));
    assert.equal(ok.status, 200);
    assert.equal(ok.json.result, "0x7a69");
  });

  it("WebSocket: a call, and a subscribe answered over the upstream socket, get the row; then all is well", async () => {
    const ws = await TestWsClient.open(`ws://${base.slice("http://".length)}/eth/rpc?apikey=${appKey}`);
    try {
      const from = up.huge.length;
      const { value: a, peak } = await withPeakRss(dp.pid, async () => {
        const c = await ws.call("eth_getLogs", [{}, { hugeBytes: HUGE }], 20_000);
        const s = await ws.call("eth_subscribe", ["logs", { hugeBytes: HUGE }], 20_000);
        return { c, s };
      });
      assertTooLarge(a.c.error);
      assertTooLarge(a.s.error);
      await up.settled();
      assertCutOff(from);
      assert.ok(peak - baseline < 48 * MiB, `RSS grew ${((peak - baseline) / MiB).toFixed(1)} MiB`);
      // The upstream socket was replaced: an ordinary subscription and call work on the same connection.
      const sub = await ws.call("eth_subscribe", ["newHeads"], 10_000);
      assert.equal(typeof sub.result, "string", JSON.stringify(sub));
      const id = await ws.call("eth_chainId");
      assert.equal(id.result, "0x7a69");
    } finally {
      ws.close();
    }
    await assertStillServing();
  });

  it("calls coalesced into one upstream batch whose sum is over the cap are retried one by one and succeed", async () => {
    const ws = await TestWsClient.open(`ws://${base.slice("http://".length)}/eth/rpc?apikey=${appKey}`);
    try {
      const n = 4;
      const each = 3 * MiB; // 4 x 3 MiB > CAP; each one alone fits
      // Sent back to back on one socket; how many arrive in one event-loop turn (and are coalesced) is up
      // to the kernel and the machine's load, so the round is repeated until one batch went over the cap.
      let overCapBatches = 0;
      for (let round = 0; round < 5 && overCapBatches === 0; round++) {
        const from = up.ethCallBatches.length;
        const firstId = 1000 + round * n;
        for (let i = 0; i < n; i++) {
          ws.sendRaw(
            JSON.stringify({
              jsonrpc: "2.0",
              id: firstId + i,
              method: "eth_call",
              params: [{ sizedBytes: each, i, round }, "0x1"],
            }),
          );
        }
        const ours = (m: { id: number }) => m.id >= firstId && m.id < firstId + n;
        await ws.until(() => ws.messages.filter(ours).length === n, 20_000);
        for (let i = 0; i < n; i++) {
          const m = ws.messages.find((x) => x.id === firstId + i);
          assert.equal(m.error, undefined, JSON.stringify(m.error));
          assert.equal(m.result.length, 2 + each);
        }
        const batches = up.ethCallBatches.slice(from);
        const overCap = batches.filter((b) => b * each > CAP);
        overCapBatches += overCap.length;
        // Every call was answered exactly once by an exchange that fit; the calls of each batch over the
        // cap were sent again (one by one), so the node saw them twice.
        const sent = batches.reduce((a, b) => a + b, 0);
        const resent = overCap.reduce((a, b) => a + b, 0);
        assert.equal(sent, n + resent, `upstream exchanges ${JSON.stringify(batches)}`);
        assert.ok(
          batches.filter((b) => b === 1).length >= resent,
          `resent one by one: ${JSON.stringify(batches)}`,
        );
      }
      assert.ok(overCapBatches > 0, "in 5 rounds the calls were never coalesced over the cap");
    } finally {
      ws.close();
    }
  });

  it("the default cap is 32 MiB", () => {
    assert.equal(loadDataPlaneConfig({}).UPSTREAM_MAX_RESPONSE_BYTES, 32 * MiB);
  });
});
