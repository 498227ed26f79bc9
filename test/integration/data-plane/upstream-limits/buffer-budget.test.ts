import assert from "node:assert/strict";
import type { StartedProcess } from "../../../helpers/process";
import { post, sleep } from "../harness";
import { type BigAnswerGateway, MiB, rssBytes, startBigAnswerGateway, withPeakRss } from "./fixture";
import type { HugeUpstream } from "./huge-upstream";

/** Budget under test: small, so the RSS bound is sharp. */
const BUDGET = 32 * MiB;
/** Each burst answer fits the per-answer cap; 16 of them together are 6x the budget. */
const EACH = 12 * MiB;
const N = 16;
const NODE_ID = "5c0f3e1a-7b2d-4c6e-9f80-a1b2c3d4e5f6";

describe("data plane: UPSTREAM_BUFFER_BUDGET_BYTES bounds the answers buffered together", function () {
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
      // One answer may be nearly the whole budget: after the burst, that one fits only if it all came back.
      UPSTREAM_MAX_RESPONSE_BYTES: String(31 * MiB),
      UPSTREAM_BUFFER_BUDGET_BYTES: String(BUDGET),
      // Two serving threads: the budget bounds the process, so they share it (SharedBufferBudget).
      DATA_PLANE_THREADS: "2",
    });
    ({ up, dp, base, appKey, nodeKey } = gw);
    // Warm up every path once so the baseline includes what they allocate on first use.
    assert.equal((await post(`${base}/eth/rpc?apikey=${appKey}`, call("eth_chainId"))).status, 200);
    assert.equal((await post(`${base}/nodes/${NODE_ID}/${nodeKey}`, call("eth_chainId"))).status, 200);
    // Warm up the big-answer path once (one answer, well within the budget).
    assert.equal((await post(`${base}/eth/rpc?apikey=${appKey}`, big(EACH, 0))).status, 200);
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
  /**
   * An answer of `bytes` whose last bytes the upstream holds back `holdMs`. The params differ per call
   * (`n`): identical calls in flight together are answered by one upstream exchange.
   */
  let n = 0;
  const big = (bytes: number, holdMs: number) =>
    call("eth_getLogs", [{}, { hugeBytes: bytes, holdMs, n: n++ }]);

  it("a burst of big answers on the shared pool and the node endpoint: some refused with the row, RSS bounded, nothing lost", async () => {
    const from = up.huge.length;
    const urls = Array.from({ length: N }, (_, i) =>
      i % 2 === 0 ? `${base}/eth/rpc?apikey=${appKey}` : `${base}/nodes/${NODE_ID}/${nodeKey}`,
    );
    const { value: rs, peak } = await withPeakRss(dp.pid, () =>
      Promise.all(urls.map((u) => post(u, big(EACH, 1500)))),
    );
    const refused = rs.filter((r) => r.json?.error?.data?.reason === "upstream_buffer_full");
    const served = rs.filter((r) => r.status === 200 && typeof r.json?.result === "string");
    for (const r of refused) {
      assert.equal(r.status, 503);
      assert.equal(r.json.error.code, -32603);
      assert.match(r.json.error.message, /buffering too many large upstream answers/);
    }
    assert.equal(refused.length + served.length, N, rs.map((r) => r.text.slice(0, 200)).join("\n"));
    // At most BUDGET / EACH answers are held whole at once; how many arrive while others are held depends on
    // scheduling (a served or refused one makes room for a later one), so only "several" is certain.
    assert.ok(refused.length >= 2, `refused ${refused.length}`);
    assert.ok(served.length >= 1, "the budget is shared, not closed");
    for (const r of served) assert.equal(r.json.result.length, 2 + EACH);
    // Both paths draw on the one budget: each has refusals when N answers compete.
    const isRefused = (i: number) => rs[i]!.json?.error?.data?.reason === "upstream_buffer_full";
    assert.ok(
      urls.some((u, i) => u.includes("/eth/rpc") && isRefused(i)),
      "the shared pool refused some",
    );
    assert.ok(
      urls.some((u, i) => u.includes("/nodes/") && isRefused(i)),
      "the node endpoint refused some",
    );
    // The refused answers' connections were dropped: the upstream could not finish them.
    await up.settled();
    const mine = up.huge.slice(from);
    assert.equal(mine.length, N);
    assert.equal(mine.filter((h) => !h.complete).length, refused.length);
    const grew = (peak - baseline) / MiB;
    // Unbounded, the 16 answers alone are 192 MiB buffered: measured +430 MiB RSS with the budget out of the
    // way, +140..155 MiB with it (the 32 MiB budget, the copies a served answer makes once read: concat,
    // string, reply; and garbage not yet collected).
    assert.ok(grew < 256, `RSS grew ${grew.toFixed(1)} MiB`);
  });

  it("afterwards the budget is whole again: an answer of nearly the whole budget is served on both paths, ordinary calls too", async () => {
    for (const url of [`${base}/eth/rpc?apikey=${appKey}`, `${base}/nodes/${NODE_ID}/${nodeKey}`]) {
      const r = await post(url, big(30 * MiB, 0));
      assert.equal(r.status, 200, r.text.slice(0, 300));
      assert.equal(r.json.result.length, 2 + 30 * MiB);
      const id = await post(url, call("eth_chainId"));
      assert.equal(id.status, 200);
      assert.equal(id.json.result, "0x7a69", "same upstream: its breaker never opened");
    }
  });
});
