import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ControlPlaneWorker, startWorker } from "../../../../control-plane/src/worker/worker";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import { JobName } from "../../../../shared/src/queue/names";
import { eventually } from "../../../helpers/eventually";
import { createApp, type Harness, type Json, startHarness } from "../harness";
import { ingestorFor, recorderFor } from "../usage/helpers";
import { WebhookReceiver } from "../webhooks/receiver";

const C = ErrorCategory;
const DAY = 86_400_000;
const HOUR = 3_600_000;
const DELAY_MS = 600_000;
const dayKey = (ms: number) => new Date(ms).toISOString().slice(0, 10);

const CREATE = `mutation($i: CreateWebhookEndpointInput!, $w: ID) {
  createWebhookEndpoint(input: $i, workspaceId: $w) { secret endpoint { id } } }`;

describe("billing: usage.daily webhook (real Postgres, Redis, worker; fake clock)", function () {
  this.timeout(90_000);
  let h: Harness;
  let worker: ControlPlaneWorker | undefined;
  let worker2: ControlPlaneWorker | undefined;
  let dataDir: string;
  const rx = new WebhookReceiver();
  let a: { token: string; workspaceId: string };
  let b: { token: string; workspaceId: string };
  let alpha: { id: string };
  let beta: { id: string };
  const todayStart = Math.floor(Date.now() / DAY) * DAY;
  // Days well before yesterday, which the worker's own scheduled pass (on the real clock) never reports.
  const D = todayStart - 5 * DAY;
  const D2 = todayStart - 4 * DAY;
  const D3 = todayStart - 3 * DAY;
  const startTheWorker = () =>
    startWorker(h.config, undefined, {
      usage: { enabled: false },
      nodes: { dataDir, syncIntervalMs: 60_000 },
    });
  const usageDailyOn = (path: string, day: string) =>
    rx.on(path).filter((r) => r.json?.type === "usage.daily" && r.json.data.day === day);
  const deliveryRows = async (workspaceId: string, day: string): Promise<Json[]> =>
    h.cp.dataSource.query(
      `SELECT d.id, d.status, d.payload FROM webhook_deliveries d JOIN usage_daily_events u ON u.event_id = d.event_id
       WHERE u.workspace_id = $1 AND u.day = $2::date`,
      [workspaceId, day],
    );

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "rg-usage-daily-"));
    await rx.start();
    h = await startHarness({
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true",
      WEBHOOK_RETRY_BASE_MS: "200",
      WEBHOOK_USAGE_DAILY_DELAY_MS: String(DELAY_MS),
    });
    worker = await startTheWorker();
    a = await h.signUp();
    b = await h.signUp();
    const c = await h.signUp();
    alpha = await createApp(h, a.token, "alpha");
    beta = await createApp(h, a.token, "beta");
    const bApp = await createApp(h, b.token, "b-app");
    // Workspaces "existed" on the reported days.
    await h.cp.dataSource.query(`UPDATE workspaces SET created_at = $1`, [new Date(D - 30 * DAY)]);
    const endpoint = async (token: string, path: string, eventTypes: string[], enabled = true) => {
      const d = await h.ok(CREATE, { i: { url: rx.url(path), eventTypes, enabled } }, token);
      rx.setSecret(path, d.createWebhookEndpoint.secret);
    };
    await endpoint(a.token, "/a", ["USAGE_DAILY"]);
    await endpoint(a.token, "/a2", ["USAGE_DAILY", "KEY_REGENERATED"]);
    // B has usage but subscribes to something else; C's only usage.daily endpoint is disabled.
    await endpoint(b.token, "/b", ["KEY_REGENERATED"]);
    await endpoint(c.token, "/c", ["USAGE_DAILY"], false);

    const r = recorderFor(h, "dp-daily");
    const rec = (
      at: number,
      appId: string | null,
      ws: string,
      network: string,
      method: string,
      cat: ErrorCategory,
      n: number,
    ) => {
      r.clock.now = at;
      for (let i = 0; i < n; i++)
        r.rec.record({ workspaceId: ws, appId, network, method, category: cat, latencyMs: 3 });
    };
    const A = a.workspaceId;
    rec(D + 1 * HOUR, alpha.id, A, "eth", "eth_call", C.Success, 10);
    rec(D + 2 * HOUR, alpha.id, A, "eth", "eth_getLogs", C.NodeError, 1);
    rec(D + 23 * HOUR, alpha.id, A, "dot", "state_getStorage", C.Success, 3);
    rec(D + 23 * HOUR, alpha.id, A, "dot", "state_getStorage", C.TooManyRequests, 2);
    rec(D + 12 * HOUR, beta.id, A, "eth", "eth_blockNumber", C.Success, 5);
    rec(D + 12 * HOUR, null, A, "node-xyz", "eth_call", C.Success, 4);
    // Outside the day on both sides, and another tenant.
    rec(D - 60_000, alpha.id, A, "eth", "eth_call", C.Success, 100);
    rec(D + DAY, alpha.id, A, "eth", "eth_call", C.Success, 200);
    rec(D + HOUR, bApp.id, b.workspaceId, "eth", "eth_call", C.Success, 7);
    await r.close();
    const ing = ingestorFor(h);
    assert.ok((await ing.drain()) > 0);
    ing.close();
  });

  after(async () => {
    await worker2?.close();
    await worker?.close();
    await h?.close();
    await rx.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("reports the previous UTC day once it is settled: nothing before the delay, then one signed event per subscribed endpoint", async () => {
    const ops = worker!.webhooks.ops;
    // 00:05 UTC the day after D: inside the settle delay, nothing is due.
    assert.deepEqual(await ops.usageDaily(undefined, D + DAY + 5 * 60_000), { day: null, emitted: 0 });
    assert.equal((await deliveryRows(a.workspaceId, dayKey(D))).length, 0);
    // 00:10 UTC: D is reported, for A only (B is not subscribed, C's endpoint is disabled).
    assert.deepEqual(await ops.usageDaily(undefined, D + DAY + DELAY_MS), { day: dayKey(D), emitted: 1 });
    const [ea] = await rx
      .waitFor("/a", () => usageDailyOn("/a", dayKey(D)).length >= 1)
      .then(() => usageDailyOn("/a", dayKey(D)));
    const [ea2] = await rx
      .waitFor("/a2", () => usageDailyOn("/a2", dayKey(D)).length >= 1)
      .then(() => usageDailyOn("/a2", dayKey(D)));
    assert.ok(ea!.verified && ea2!.verified, "signed with each endpoint's secret");
    assert.equal(ea!.id, ea2!.id, "one event, one id on every endpoint");
    assert.equal(ea!.body, ea2!.body);
    const e = ea!.json;
    assert.equal(e.type, "usage.daily");
    assert.equal(e.workspaceId, a.workspaceId);
    const amounts = (requests: number, refused = 0) => ({
      requests,
      computeUnits: requests,
      refusedRequests: refused,
      refusedComputeUnits: refused,
    });
    assert.deepEqual(e.data, {
      day: dayKey(D),
      from: new Date(D).toISOString(),
      to: new Date(D + DAY).toISOString(),
      ...amounts(25, 2),
      apps: [
        {
          appId: alpha.id,
          appName: "alpha",
          ...amounts(16, 2),
          networks: [
            { network: "eth", ...amounts(11) },
            { network: "dot", ...amounts(5, 2) },
          ],
        },
        { appId: beta.id, appName: "beta", ...amounts(5), networks: [{ network: "eth", ...amounts(5) }] },
        { appId: null, appName: null, ...amounts(4), networks: [{ network: "node-xyz", ...amounts(4) }] },
      ],
      networks: [
        { network: "eth", ...amounts(16) },
        { network: "dot", ...amounts(5, 2) },
        { network: "node-xyz", ...amounts(4) },
      ],
    });
    // The same day's statement rows agree with the event.
    const month = dayKey(D).slice(0, 7);
    const s = (
      await h.ok(
        `query($w: ID, $m: String!) { usageStatement(workspaceId: $w, month: $m) { days { date requests computeUnits refusedRequests } } }`,
        { w: a.workspaceId, m: month },
        a.token,
      )
    ).usageStatement;
    assert.deepEqual(
      s.days.find((x: Json) => x.date === dayKey(D)),
      { date: dayKey(D), requests: 25, computeUnits: 25, refusedRequests: 2 },
    );
    assert.equal(rx.on("/b").length, 0);
    assert.equal(rx.on("/c").length, 0);
  });

  it("idempotent: the job run again, and two workers racing, record one event per workspace and day", async () => {
    const ops = worker!.webhooks.ops;
    // D again, at a later hour and as an explicit day: nothing new.
    assert.deepEqual(await ops.usageDaily(undefined, D + DAY + 5 * HOUR), { day: dayKey(D), emitted: 0 });
    assert.deepEqual(await ops.usageDaily(dayKey(D), D + DAY + 6 * HOUR), { day: dayKey(D), emitted: 0 });
    assert.equal((await deliveryRows(a.workspaceId, dayKey(D))).length, 2, "one delivery per endpoint");
    // Two workers (own connections and pools), each running the pass for D2 several times at once.
    worker2 = await startTheWorker();
    const ops2 = worker2.webhooks.ops;
    const now = D2 + DAY + DELAY_MS;
    const results = await Promise.all([
      ops.usageDaily(undefined, now),
      ops2.usageDaily(undefined, now),
      ops.usageDaily(dayKey(D2), now),
      ops2.usageDaily(dayKey(D2), now),
    ]);
    assert.equal(
      results.reduce((t, r) => t + r.emitted, 0),
      1,
      JSON.stringify(results),
    );
    const markers: Json[] = await h.cp.dataSource.query(
      `SELECT workspace_id FROM usage_daily_events WHERE day = $1::date`,
      [dayKey(D2)],
    );
    assert.deepEqual(
      markers.map((m) => m.workspace_id),
      [a.workspaceId],
    );
    await eventually(
      async () => (await deliveryRows(a.workspaceId, dayKey(D2))).every((d) => d.status === "SUCCEEDED"),
      "D2's deliveries succeeded",
    );
    assert.equal((await deliveryRows(a.workspaceId, dayKey(D2))).length, 2);
    assert.equal(usageDailyOn("/a", dayKey(D2)).length, 1);
    assert.equal(usageDailyOn("/a2", dayKey(D2)).length, 1);
    // D2 holds the 200 requests sent at its first instant (00:00 UTC).
    assert.equal(usageDailyOn("/a", dayKey(D2))[0]!.json.data.requests, 200);
    // A day without usage is reported with zeros (a billing system sees the day was counted).
    const empty = dayKey(D - 2 * DAY);
    assert.deepEqual(await ops2.usageDaily(empty, now), { day: empty, emitted: 1 });
    const [z] = await rx
      .waitFor("/a", () => usageDailyOn("/a", empty).length === 1)
      .then(() => usageDailyOn("/a", empty));
    assert.equal(z!.json.data.requests, 0);
    assert.deepEqual(z!.json.data.apps, []);
    // After all that, D still had exactly one event on each endpoint.
    assert.equal(usageDailyOn("/a", dayKey(D)).length, 1);
    assert.equal(usageDailyOn("/a2", dayKey(D)).length, 1);
  });

  it("through the queue: a job naming a day reports it; a bad day is refused for good and reports nothing", async () => {
    const q = worker!.webhooks.queue.queue;
    await q.add(JobName.UsageDaily, { day: dayKey(D3) });
    await rx.waitFor("/a", () => usageDailyOn("/a", dayKey(D3)).length === 1);
    for (const day of ["abc", "2026-02-30", dayKey(todayStart), dayKey(todayStart + DAY), "2026-13-01"]) {
      const job = await q.add(JobName.UsageDaily, { day });
      await eventually(async () => (await job.getState()) === "failed", `job ${day} failed`);
      const failed = await q.getJob(job.id!);
      assert.match(failed!.failedReason, /day must be a UTC day before today as YYYY-MM-DD/);
      assert.equal(failed!.attemptsMade, 1, "not retried");
    }
    const poisoned = await q.add(JobName.UsageDaily, { day: 42 } as unknown as { day: string });
    await eventually(async () => (await poisoned.getState()) === "failed", "poisoned job failed");
    const today: Json[] = await h.cp.dataSource.query(
      `SELECT day FROM usage_daily_events WHERE day >= $1::date`,
      [dayKey(todayStart)],
    );
    assert.deepEqual(today, []);
    // The worker is still serving the queue after them.
    const later = dayKey(D - 3 * DAY);
    await q.add(JobName.UsageDaily, { day: later });
    await rx.waitFor("/a", () => usageDailyOn("/a", later).length === 1);
  });
});
