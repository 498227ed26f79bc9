import assert from "node:assert/strict";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import type { DataPlane } from "../../../data-plane/src/data-plane";
import { utcDayKey } from "../../../shared/src/quota/day";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { usageSettled } from "../../helpers/usage-stream";
import {
  ADMIN_TOKEN,
  createApp,
  type Harness,
  type Json,
  startHarness,
  startHarnessDataPlane,
} from "../control-plane/harness";
import { WebhookReceiver } from "../control-plane/webhooks/receiver";
import { post } from "../data-plane/harness";

const ZERO = "0x0000000000000000000000000000000000000000";
const NET = "evm-anvil";

/**
 * Compute units through the whole stack: the data plane weighs each request object (the network's
 * method weights), answers `X-Compute-Units`, writes `computeUnits` into its usage rows, request-log
 * records and compute-unit quota counter; the worker folds them into Postgres; GraphQL reports, the request
 * log and the `quota.threshold` webhook show them. Expected figures are the answers' own headers.
 */
describe("compute units end to end: gateway -> Redis -> worker -> Postgres -> GraphQL and webhooks", function () {
  this.timeout(180_000);
  let h: Harness;
  let anvil: Anvil;
  let worker: ControlPlaneWorker | undefined;
  let dp: DataPlane | undefined;
  let ws: { token: string; workspaceId: string };
  let rpc: string;
  const rx = new WebhookReceiver();

  before(async () => {
    await rx.start();
    h = await startHarness({
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true",
      WEBHOOK_QUOTA_CHECK_INTERVAL_MS: "150",
    });
    anvil = await startAnvil();
    await h.ok(
      `mutation($a: String!) {
        n: createNetwork(input: { slug: "${NET}", name: "Anvil", protocol: EVM, chainId: 31337 }) { id }
        u: addUpstream(networkSlug: "${NET}", input: { httpUrl: $a }) { id }
        w: setMethodCost(networkSlug: "${NET}", method: "eth_blockNumber", units: 7) { defaultUnits }
        p: upsertPlan(input: { name: "metered", dailyRequestLimit: 100000, requestsPerSecond: 1000,
                               dailyComputeUnitLimit: 2000 }) { id } }`,
      { a: anvil.httpUrl },
      ADMIN_TOKEN,
    );
    ws = await h.signUp();
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "metered") { id } }`,
      { w: ws.workspaceId },
      ADMIN_TOKEN,
    );
    const app = await createApp(h, ws.token, "indexer");
    const created = await h.ok(
      `mutation($i: CreateWebhookEndpointInput!) { createWebhookEndpoint(input: $i) { secret } }`,
      { i: { url: rx.url("/quota"), eventTypes: ["QUOTA_THRESHOLD"] } },
      ws.token,
    );
    rx.setSecret("/quota", created.createWebhookEndpoint.secret);
    worker = await startWorker(h.config, undefined, { usage: { blockMs: 100, consumerName: "cu-e2e" } });
    dp = await startHarnessDataPlane(h, {
      HEALTH_CHECK_INTERVAL_MS: "200",
      USAGE_FLUSH_INTERVAL_MS: "200",
      REQUEST_LOG_FLUSH_INTERVAL_MS: "100",
      REQUEST_LOG_SAMPLE_PERCENT: "100",
    });
    rpc = `http://127.0.0.1:${dp.port}/${NET}/rpc?apikey=${app.apiKey}`;
    // The network's upstream is usable once health checked.
    await eventually(
      async () => (await post(rpc, { jsonrpc: "2.0", id: 0, method: "eth_chainId" })).status === 200,
      "the data plane answers",
      30_000,
    );
  });

  after(async () => {
    await dp?.close();
    await worker?.close();
    await anvil?.stop();
    await h?.close();
    await rx.close();
  });

  it("what the answers charged is what usage, the request log, today and quota.threshold show", async () => {
    let charged = 0;
    const send = async (body: object) => {
      const r = await post(rpc, body);
      assert.equal(r.status, 200, r.text);
      charged += Number(r.headers.get("x-compute-units"));
      return r;
    };
    for (let i = 0; i < 5; i++) {
      const r = await send({ jsonrpc: "2.0", id: i, method: "eth_blockNumber" });
      assert.equal(r.headers.get("x-compute-units"), "7", "the network's override");
    }
    const batch = Array.from({ length: 20 }, (_, i) => ({
      jsonrpc: "2.0",
      id: i,
      method: "eth_getBalance",
      params: [ZERO, "latest"],
    }));
    for (let b = 0; b < 5; b++) {
      const r = await send(batch);
      assert.equal(r.headers.get("x-compute-units"), String(20 * 19), "a batch costs its elements' weights");
    }
    assert.equal(charged, 5 * 7 + 100 * 19);

    await usageSettled(h.redis, h.names.usageStream(), [dp!]);
    const u = (
      await h.ok(
        `{ usage(filter: {}) { requests24h { computeUnits series { computeUnits } }
            methods(sortBy: COMPUTE_UNITS) { method requests computeUnits }
            history(days: 1) { computeUnits byApp { computeUnits } } } }`,
        {},
        ws.token,
      )
    ).usage;
    assert.equal(u.requests24h.computeUnits, charged);
    assert.equal(
      u.requests24h.series.reduce((a: number, p: Json) => a + p.computeUnits, 0),
      charged,
    );
    const byMethod = Object.fromEntries(u.methods.map((m: Json) => [m.method, m]));
    assert.deepEqual(byMethod.eth_getBalance, {
      method: "eth_getBalance",
      requests: 100,
      computeUnits: 1900,
    });
    assert.deepEqual(byMethod.eth_blockNumber, { method: "eth_blockNumber", requests: 5, computeUnits: 35 });
    assert.equal(byMethod.eth_chainId.computeUnits, 0);
    assert.equal(u.history[0].computeUnits, charged);
    assert.equal(u.history[0].byApp[0].computeUnits, charged);

    // Today: the limiter's live compute-unit counter (flushed by the data plane's quota tracker).
    await eventually(
      async () => {
        const t = (await h.ok(`{ workspace { today { computeUnits computeUnitLimit } } }`, {}, ws.token))
          .workspace.today;
        return t.computeUnits === charged && t.computeUnitLimit === 2000;
      },
      "today's compute units",
      30_000,
    );
    // `today` falls back to the day rollup while the counter is absent, so it may be satisfied first: the
    // counter itself is written by the quota tracker's next flush.
    await eventually(
      async () =>
        Number(await h.redis.get(h.names.computeUnitQuotaDay(ws.workspaceId, utcDayKey(Date.now())))) ===
        charged,
      "the live compute-unit counter",
      30_000,
    );

    // Request log: every element with its weight.
    await usageSettled(h.redis, h.names.requestLogStream());
    const log = (
      await h.ok(
        `{ requestLog(filter: {}, first: 200) { edges { node { method computeUnits } } } }`,
        {},
        ws.token,
      )
    ).requestLog.edges.map((e: Json) => e.node);
    const logged = (m: string) => log.filter((n: Json) => n.method === m).map((n: Json) => n.computeUnits);
    assert.deepEqual(logged("eth_blockNumber"), [7, 7, 7, 7, 7]);
    assert.equal(logged("eth_getBalance").length, 100);
    assert.ok(logged("eth_getBalance").every((c: number) => c === 19));
    assert.ok(logged("eth_chainId").every((c: number) => c === 0));

    // 1,935 of 2,000 compute units: the 80% compute-unit event; requests (about 110 of 100,000) none.
    const [e] = await rx.waitFor("/quota", (rs) => rs.length >= 1, 30_000);
    assert.ok(e!.verified);
    assert.deepEqual(
      { unit: e!.json.data.unit, thresholdPercent: e!.json.data.thresholdPercent, limit: e!.json.data.limit },
      { unit: "computeUnits", thresholdPercent: 80, limit: 2000 },
    );
    assert.ok(e!.json.data.used >= 1600 && e!.json.data.used <= charged, String(e!.json.data.used));
    assert.equal(await worker!.webhooks.ops.checkQuotas(), 0);
    assert.equal(rx.on("/quota").length, 1);
  });
});
