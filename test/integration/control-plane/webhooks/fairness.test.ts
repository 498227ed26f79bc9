import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newWebhookEventId, recordDeliveries } from "../../../../control-plane/src/webhooks/webhook.queue";
import { type ControlPlaneWorker, startWorker } from "../../../../control-plane/src/worker/worker";
import { eventually } from "../../../helpers/eventually";
import { code, type Harness, startHarness } from "../harness";
import { WebhookReceiver } from "./receiver";

const CREATE = `mutation($i: CreateWebhookEndpointInput!) {
  createWebhookEndpoint(input: $i) { secret endpoint { id } } }`;
const TEST = `mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`;
const TIMEOUT_MS = 5_000;

/**
 * One tenant, one fair share of webhook delivery (issue 24): test sends are throttled per endpoint, and a
 * workspace whose endpoint hangs holds at most WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE of the worker's
 * delivery slots, so another workspace's delivery arrives at once rather than after the queue ahead of it
 * has timed out. All receivers on loopback (WEBHOOK_ALLOW_PRIVATE_ADDRESSES).
 */
describe("webhooks: fair delivery across workspaces, throttled test sends (real Postgres, Redis, worker)", function () {
  this.timeout(90_000);
  let h: Harness;
  let worker: ControlPlaneWorker | undefined;
  let dataDir: string;
  const rx = new WebhookReceiver();
  /** An endpoint that never answers: every request is held open until the test ends. */
  let hang: Server;
  let hangUrl = "";
  const held: ServerResponse[] = [];
  let hangNow = 0;
  let hangMax = 0;
  let hangTotal = 0;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "rg-webhooks-fair-"));
    await rx.start();
    hang = createServer((req: IncomingMessage, res: ServerResponse) => {
      hangTotal++;
      hangNow++;
      hangMax = Math.max(hangMax, hangNow);
      held.push(res);
      req.resume();
      res.on("close", () => hangNow--);
    });
    await new Promise<void>((resolve) => hang.listen(0, "127.0.0.1", resolve));
    hangUrl = `http://127.0.0.1:${(hang.address() as AddressInfo).port}/hang`;
    h = await startHarness({
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true",
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      // No retry inside the test: every attempt the hanging endpoint sees is a first attempt.
      WEBHOOK_RETRY_BASE_MS: "600000",
      WEBHOOK_CONCURRENCY: "4",
      WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: "2",
      WEBHOOK_TEST_MAX_PER_ENDPOINT: "3",
      WEBHOOK_TEST_WINDOW_SECONDS: "60",
    });
    worker = await startWorker(h.config, undefined, {
      usage: { enabled: false },
      nodes: { dataDir, syncIntervalMs: 60_000 },
    });
  });

  after(async () => {
    // Let the held attempts end (connection reset) before the worker waits for its active jobs.
    for (const res of held) res.socket?.destroy();
    await worker?.close();
    hang?.closeAllConnections();
    await new Promise<void>((resolve) => (hang ? hang.close(() => resolve()) : resolve()));
    await h?.close();
    await rx.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("test sends: at most WEBHOOK_TEST_MAX_PER_ENDPOINT per window per endpoint, then TOO_MANY_REQUESTS", async () => {
    const owner = await h.signUp();
    const mk = async (path: string) => {
      const d = await h.ok(
        CREATE,
        { i: { url: rx.url(path), eventTypes: ["KEY_REGENERATED"] } },
        owner.token,
      );
      rx.setSecret(path, d.createWebhookEndpoint.secret);
      return d.createWebhookEndpoint.endpoint.id as string;
    };
    const one = await mk("/throttled");
    const two = await mk("/other");
    for (let i = 0; i < 3; i++) await h.ok(TEST, { id: one }, owner.token);
    const refused = await h.gql(TEST, { id: one }, owner.token);
    assert.equal(code(refused), "TOO_MANY_REQUESTS");
    assert.match(refused.errors![0]!.message, /Too many test sends to this endpoint \(limit 3 per 60 s\)/);
    const retry = refused.errors![0]!.extensions!.retryAfterSeconds as number;
    assert.ok(retry >= 1 && retry <= 60, String(retry));
    // Nothing was recorded for the refused call; the three accepted ones arrive.
    const rows: { n: string }[] = await h.cp.dataSource.query(
      "SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint_id = $1",
      [one],
    );
    assert.equal(Number(rows[0]!.n), 3);
    await rx.waitFor("/throttled", (rs) => rs.length === 3);
    // Another endpoint has its own budget.
    await h.ok(TEST, { id: two }, owner.token);
    await rx.waitFor("/other", (rs) => rs.length === 1);
  });

  it("a workspace whose endpoint hangs holds 2 of 4 delivery slots: another workspace's delivery arrives at once", async () => {
    const slow = await h.signUp();
    const fast = await h.signUp();
    const slowEndpoint = (
      await h.ok(CREATE, { i: { url: hangUrl, eventTypes: ["KEY_REGENERATED"] } }, slow.token)
    ).createWebhookEndpoint.endpoint.id as string;
    const created = await h.ok(
      CREATE,
      { i: { url: rx.url("/fast"), eventTypes: ["KEY_REGENERATED"] } },
      fast.token,
    );
    rx.setSecret("/fast", created.createWebhookEndpoint.secret);
    // 30 deliveries to the hanging endpoint, queued ahead of the other workspace's.
    const queued: string[] = [];
    for (let i = 0; i < 30; i++) {
      const ids = await recordDeliveries(
        h.cp.dataSource,
        {
          id: newWebhookEventId(),
          type: "key.regenerated",
          workspaceId: slow.workspaceId,
          occurredAt: new Date().toISOString(),
          data: { i },
        },
        [slowEndpoint],
      );
      for (const id of ids) await worker!.webhooks.queue.addDelivery(id);
      queued.push(...ids);
    }
    assert.equal(queued.length, 30);
    // Wait until the slow workspace holds its slots (two requests held open at the endpoint).
    await eventually(() => hangNow >= 2, "the hanging endpoint getting its deliveries");
    const t0 = Date.now();
    await h.ok(TEST, { id: created.createWebhookEndpoint.endpoint.id }, fast.token);
    const [got] = await rx.waitFor("/fast", (rs) => rs.length === 1, TIMEOUT_MS);
    const waitedMs = got!.at - t0;
    console.log(
      `      [measure] other workspace's delivery arrived ${waitedMs} ms after its send, with 30 of the slow workspace's queued ahead (attempt deadline ${TIMEOUT_MS} ms); hanging endpoint: at most ${hangMax} at once`,
    );
    assert.ok(got!.verified);
    assert.ok(waitedMs < TIMEOUT_MS, `waited ${waitedMs} ms: behind the hanging attempts`);
    assert.ok(hangMax <= 2, `the slow workspace had ${hangMax} deliveries in flight`);
    assert.ok(worker!.webhooks.ops.deferred > 0, "the slow workspace's other deliveries were put back");
    // Nothing was lost or spent: every slow delivery is still PENDING, and only the attempts really sent
    // were counted.
    const rows: { status: string; attempts: string }[] = await h.cp.dataSource.query(
      `SELECT status, sum(attempt_count)::text AS attempts FROM webhook_deliveries WHERE endpoint_id = $1 GROUP BY status`,
      [slowEndpoint],
    );
    assert.deepEqual(
      rows.map((r) => r.status),
      ["PENDING"],
    );
    assert.equal(Number(rows[0]!.attempts), hangTotal, "attempts counted = requests the endpoint saw");
  });
});
