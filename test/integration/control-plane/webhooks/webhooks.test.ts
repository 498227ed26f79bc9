import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { poisonedJobs } from "../../../../control-plane/src/common/metrics";
import { newWebhookEventId, recordDeliveries } from "../../../../control-plane/src/webhooks/webhook.queue";
import { type ControlPlaneWorker, startWorker } from "../../../../control-plane/src/worker/worker";
import { JobName, QueueName } from "../../../../shared/src/queue/names";
import { utcDayKey } from "../../../../shared/src/quota/day";
import { ADMIN_TOKEN, code, createApp, type Harness, type Json, startHarness } from "../harness";
import { setPlanDailyComputeUnitLimit } from "../usage/helpers";
import { type Received, WebhookReceiver } from "./receiver";

const RETRY_BASE_MS = 300;
const QUOTA_CHECK_MS = 150;

const ENDPOINT_FIELDS =
  "id workspaceId url description eventTypes enabled secretCreatedAt createdAt updatedAt";
const CREATE = `mutation($i: CreateWebhookEndpointInput!, $w: ID) {
  createWebhookEndpoint(input: $i, workspaceId: $w) { secret endpoint { ${ENDPOINT_FIELDS} } } }`;
const DELIVERIES = `query($e: ID!, $first: Int, $after: ID) { webhookDeliveries(endpointId: $e, first: $first, after: $after) {
  id eventId eventType payload status attemptCount nextAttemptAt createdAt completedAt
  attempts { attempt statusCode error durationMs responseExcerpt at } } }`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for: ${what}`);
    await sleep(50);
  }
}

/**
 * Delivery jobs of `deliveryId` that could still run (queued, delayed for a retry, or running): none left
 * means no further attempt can come, which is what the "nothing more happens" checks wait for.
 */
async function liveDeliveryJobs(worker: ControlPlaneWorker, deliveryId: string): Promise<number> {
  const jobs = await worker.webhooks.queue.queue.getJobs(["waiting", "delayed", "active", "prioritized"]);
  return jobs.filter((j) => j?.name === JobName.WebhookDeliver && j.data?.deliveryId === deliveryId).length;
}

describe("webhooks: endpoints, signed deliveries with retries, events, isolation (real Postgres, Redis, worker)", function () {
  this.timeout(120_000);
  let h: Harness;
  let worker: ControlPlaneWorker | undefined;
  let dataDir: string;
  const rx = new WebhookReceiver();
  let a: { token: string; workspaceId: string };
  let b: { token: string; workspaceId: string };

  const create = async (token: string, input: Json, path: string, workspaceId?: string) => {
    const d = await h.ok<{ createWebhookEndpoint: { secret: string; endpoint: Json } }>(
      CREATE,
      { i: { url: rx.url(path), ...input }, w: workspaceId ?? null },
      token,
    );
    rx.setSecret(path, d.createWebhookEndpoint.secret);
    return d.createWebhookEndpoint;
  };
  const deliveries = async (token: string, endpointId: string, first = 20): Promise<Json[]> =>
    (await h.ok<{ webhookDeliveries: Json[] }>(DELIVERIES, { e: endpointId, first }, token))
      .webhookDeliveries;
  const startTheWorker = () =>
    startWorker(h.config, undefined, {
      usage: { enabled: false },
      nodes: { dataDir, syncIntervalMs: 60_000 },
    });

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "rg-webhooks-"));
    await rx.start();
    h = await startHarness({
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true",
      WEBHOOK_RETRY_BASE_MS: String(RETRY_BASE_MS),
      WEBHOOK_MAX_ATTEMPTS: "4",
      WEBHOOK_TIMEOUT_MS: "3000",
      WEBHOOK_QUOTA_CHECK_INTERVAL_MS: String(QUOTA_CHECK_MS),
    });
    worker = await startTheWorker();
    a = await h.signUp();
    b = await h.signUp();
  });
  after(async () => {
    await worker?.close();
    await h?.close();
    await rx.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("validates endpoints: http(s) only, no credentials, at least one event type", async () => {
    for (const [url, re] of [
      ["ftp://example.com/hook", /http:\/\/ or https:\/\//],
      ["https://user:pw@example.com/hook", /user name or password/],
      ["https://user@example.com/hook", /user name or password/],
      ["not a url", /Not a valid URL/],
      [`https://example.com/${"a".repeat(2100)}`, /2048 characters/],
    ] as const) {
      const r = await h.gql(CREATE, { i: { url, eventTypes: ["KEY_REGENERATED"] } }, a.token);
      assert.equal(code(r), "BAD_USER_INPUT", url);
      assert.equal(r.errors?.[0]?.extensions?.field, "url");
      assert.match(r.errors![0]!.message, re);
    }
    const none = await h.gql(CREATE, { i: { url: "https://example.com/h", eventTypes: [] } }, a.token);
    assert.equal(code(none), "BAD_USER_INPUT");
    assert.equal(none.errors?.[0]?.extensions?.field, "eventTypes");
    const anon = await h.gql(CREATE, {
      i: { url: "https://example.com/h", eventTypes: ["KEY_REGENERATED"] },
    });
    assert.equal(code(anon), "UNAUTHENTICATED");
  });

  it("creates an endpoint: the secret is shown once, stored sealed to the row, never readable again", async () => {
    const { secret, endpoint } = await create(
      a.token,
      { eventTypes: ["KEY_REGENERATED", "KEY_REGENERATED"], description: " main " },
      "/created",
    );
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.deepEqual(endpoint.eventTypes, ["KEY_REGENERATED"]);
    assert.equal(endpoint.description, "main");
    assert.equal(endpoint.enabled, true);
    assert.equal(endpoint.workspaceId, a.workspaceId);
    const rows: { secret_ciphertext: string }[] = await h.cp.dataSource.query(
      "SELECT secret_ciphertext FROM webhook_endpoints WHERE id = $1",
      [endpoint.id],
    );
    assert.match(rows[0]!.secret_ciphertext, /^v2\./);
    assert.ok(!rows[0]!.secret_ciphertext.includes(secret.slice(6, 20)));
    // The endpoint type has no secret field at all.
    const r = await h.gql(
      `query($id: ID!) { webhookEndpoint(id: $id) { id secret } }`,
      { id: endpoint.id },
      a.token,
    );
    assert.equal(code(r), "GRAPHQL_VALIDATION_FAILED");
    const listed = await h.ok<{ webhookEndpoints: Json[] }>(
      `{ webhookEndpoints { ${ENDPOINT_FIELDS} } }`,
      {},
      a.token,
    );
    assert.deepEqual(
      listed.webhookEndpoints.map((e) => e.id),
      [endpoint.id],
    );
    // Rotation: a new secret, shown once; the old one signs nothing more.
    const rot = await h.ok<{ rotateWebhookSecret: { secret: string; endpoint: Json } }>(
      `mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret endpoint { id secretCreatedAt } } }`,
      { id: endpoint.id },
      a.token,
    );
    assert.notEqual(rot.rotateWebhookSecret.secret, secret);
    assert.ok(
      new Date(rot.rotateWebhookSecret.endpoint.secretCreatedAt) >= new Date(endpoint.secretCreatedAt),
    );
    await h.ok(
      `mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`,
      { id: endpoint.id },
      a.token,
    );
    const [got] = await rx.waitFor("/created", (rs) => rs.length === 1);
    assert.equal(got!.verified, false, "signed with the old secret");
    rx.setSecret("/created", rot.rotateWebhookSecret.secret);
    await h.ok(
      `mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`,
      { id: endpoint.id },
      a.token,
    );
    const rs = await rx.waitFor("/created", (x) => x.length === 2);
    assert.equal(rs[1]!.verified, true, "signed with the rotated secret");
  });

  it("test event: 500, 500, then 200 — every attempt signed, recorded, retried with exponential backoff", async () => {
    const { endpoint } = await create(a.token, { eventTypes: ["QUOTA_THRESHOLD"] }, "/retry");
    rx.script("/retry", [500, 500]);
    const sent = await h.ok<{ sendTestWebhook: Json }>(
      `mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id eventId eventType status attemptCount attempts { attempt } } }`,
      { id: endpoint.id },
      a.token,
    );
    const d0 = sent.sendTestWebhook;
    assert.equal(d0.status, "PENDING");
    assert.equal(d0.eventType, "webhook.test");
    assert.match(d0.eventId, /^evt_[0-9a-f]{32}$/);
    assert.deepEqual(d0.attempts, []);
    const got = await rx.waitFor("/retry", (rs) => rs.length === 3);
    for (const r of got) {
      assert.ok(r.verified, `attempt signature: ${r.signature}`);
      assert.equal(r.id, d0.eventId, "the same webhook-id on every attempt");
      assert.equal(r.body, got[0]!.body, "the same body on every attempt");
      assert.ok(Math.abs(Number(r.timestamp) - r.at / 1000) < 5, "a current webhook-timestamp");
    }
    assert.equal(got[0]!.json.type, "webhook.test");
    assert.equal(got[0]!.json.id, d0.eventId);
    assert.equal(got[0]!.json.workspaceId, a.workspaceId);
    assert.equal(got[0]!.json.data.endpointId, endpoint.id);
    // Backoff: after failed attempt n the worker waits base * 2^(n-1) (lower bounds; a loaded machine only adds).
    const gap1 = got[1]!.at - got[0]!.at;
    const gap2 = got[2]!.at - got[1]!.at;
    assert.ok(gap1 >= RETRY_BASE_MS * 0.9, `first retry after ${gap1} ms`);
    assert.ok(gap2 >= 2 * RETRY_BASE_MS * 0.9, `second retry after ${gap2} ms`);
    const d = await until("delivery succeeded", async () => {
      const [x] = await deliveries(a.token, endpoint.id);
      return x?.status === "SUCCEEDED" ? x : undefined;
    });
    assert.equal(d.id, d0.id);
    assert.equal(d.attemptCount, 3);
    assert.equal(d.nextAttemptAt, null);
    assert.ok(d.completedAt);
    assert.equal(d.payload, got[0]!.body);
    assert.deepEqual(
      d.attempts.map((x: Json) => [x.attempt, x.statusCode, x.error]),
      [
        [1, 500, "HTTP 500"],
        [2, 500, "HTTP 500"],
        [3, 200, null],
      ],
    );
    assert.equal(d.attempts[0].responseExcerpt.length, 256, "only an excerpt of the body is stored");
    assert.ok(rx.failureBody.startsWith(d.attempts[0].responseExcerpt));
    assert.equal(d.attempts[2].responseExcerpt, "ok");
    for (const x of d.attempts) assert.ok(Number.isInteger(x.durationMs) && x.durationMs >= 0);
    const at = d.attempts.map((x: Json) => new Date(x.at).getTime());
    assert.ok(
      at[1] - at[0] >= RETRY_BASE_MS * 0.9 && at[2] - at[1] >= 2 * RETRY_BASE_MS * 0.9,
      `attempt times ${at}`,
    );
  });

  it("a poisoned delivery job fails at once (no retries), is kept among the failed jobs and counted; other deliveries go on", async () => {
    const counted = async () =>
      (await poisonedJobs.get()).values.find((v) => v.labels.queue === QueueName.Webhooks)?.value ?? 0;
    const before = await counted();
    const q = worker!.webhooks.queue.queue;
    // Not a delivery id (Postgres would refuse it on every attempt), with retries and a long backoff.
    const poisoned = await q.add(
      JobName.WebhookDeliver,
      { deliveryId: "not-a-uuid\u0000" },
      { attempts: 6, backoff: { type: "exponential", delay: 60_000 }, removeOnFail: 50 },
    );
    const { endpoint } = await create(a.token, { eventTypes: ["QUOTA_THRESHOLD"] }, "/after-poison");
    await h.ok(
      `mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`,
      { id: endpoint.id },
      a.token,
    );
    await rx.waitFor("/after-poison", (rs) => rs.length === 1);
    const job = await until("the poisoned job failed", async () => {
      const j = await q.getJob(poisoned.id!);
      return j !== undefined && (await j.getState()) === "failed" ? j : undefined;
    });
    assert.equal(job.attemptsMade, 1, "no retry of a payload that can never run");
    assert.match(job.failedReason, /poisoned webhook-deliver payload/);
    assert.equal(await counted(), before + 1);
  });

  it("gives up after WEBHOOK_MAX_ATTEMPTS: FAILED with every attempt recorded", async () => {
    const { endpoint } = await create(a.token, { eventTypes: ["QUOTA_THRESHOLD"] }, "/down");
    rx.script("/down", [503, 503, 503, 503, 503]);
    await h.ok(
      `mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`,
      { id: endpoint.id },
      a.token,
    );
    const d = await until(
      "delivery failed",
      async () => {
        const [x] = await deliveries(a.token, endpoint.id);
        return x?.status === "FAILED" ? x : undefined;
      },
      30_000,
    );
    assert.deepEqual(
      d.attempts.map((x: Json) => x.statusCode),
      [503, 503, 503, 503],
    );
    await until("the delivery's job is gone", async () => (await liveDeliveryJobs(worker!, d.id)) === 0);
    assert.equal(rx.on("/down").length, 4, "no attempt after the last");
  });

  it("key.regenerated reaches the subscribed endpoints only, without the key", async () => {
    const keys = await create(a.token, { eventTypes: ["KEY_REGENERATED"] }, "/keys");
    const nodesOnly = await create(a.token, { eventTypes: ["NODE_STATUS"] }, "/nodes-only");
    const disabled = await create(a.token, { eventTypes: ["KEY_REGENERATED"], enabled: false }, "/disabled");
    const theirs = await create(b.token, { eventTypes: ["KEY_REGENERATED"] }, "/other-workspace");
    const app = await createApp(h, a.token, "billing");
    const regen = await h.ok<{ regenerateApiKey: { apiKey: string } }>(
      `mutation($id: ID!) { regenerateApiKey(appId: $id, gracePeriodSeconds: 3600) { apiKey } }`,
      { id: app.id },
      a.token,
    );
    const [ev] = await rx.waitFor("/keys", (rs) => rs.length === 1);
    assert.ok(ev!.verified);
    assert.equal(ev!.json.type, "key.regenerated");
    assert.equal(ev!.json.workspaceId, a.workspaceId);
    assert.equal(ev!.json.data.kind, "app");
    assert.equal(ev!.json.data.appId, app.id);
    assert.equal(ev!.json.data.appName, "billing");
    assert.ok(Date.parse(ev!.json.data.previousKeyExpiresAt) > Date.now() + 3_000_000);
    assert.ok(!ev!.body.includes(app.apiKey) && !ev!.body.includes(regen.regenerateApiKey.apiKey));
    // The fan-out writes all of an event's deliveries at once, before any is sent: with /keys delivered,
    // the other endpoints have none, so nothing can reach them later.
    assert.equal((await deliveries(a.token, nodesOnly.endpoint.id)).length, 0, "not subscribed");
    assert.equal((await deliveries(a.token, disabled.endpoint.id)).length, 0, "disabled");
    assert.equal(rx.on("/nodes-only").length, 0, "not subscribed");
    assert.equal(rx.on("/disabled").length, 0, "disabled");
    assert.equal(rx.on("/other-workspace").length, 0, "another workspace");
    assert.equal((await deliveries(b.token, theirs.endpoint.id)).length, 0);
    const [rec] = await until("key delivery recorded", async () => {
      const ds = await deliveries(a.token, keys.endpoint.id);
      return ds[0]?.status === "SUCCEEDED" ? ds : undefined;
    });
    assert.equal(rec!.eventType, "key.regenerated");
    assert.equal(rec!.eventId, ev!.id);
  });

  it("another workspace can neither list, read, change, test nor see deliveries of an endpoint (NOT_FOUND)", async () => {
    const { endpoint } = await create(a.token, { eventTypes: ["KEY_REGENERATED"] }, "/private");
    const id = endpoint.id;
    const ops: [string, Json][] = [
      [`query($id: ID!) { webhookEndpoint(id: $id) { id } }`, { id }],
      [`query($id: ID!) { webhookDeliveries(endpointId: $id) { id } }`, { id }],
      [`mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: { enabled: false }) { id } }`, { id }],
      [`mutation($id: ID!) { deleteWebhookEndpoint(id: $id) }`, { id }],
      [`mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret } }`, { id }],
      [`mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`, { id }],
      [`query($w: ID!) { webhookEndpoints(workspaceId: $w) { id } }`, { w: a.workspaceId }],
      [
        `mutation($w: ID!) { createWebhookEndpoint(workspaceId: $w, input: { url: "https://example.com", eventTypes: [KEY_REGENERATED] }) { secret } }`,
        { w: a.workspaceId },
      ],
    ];
    for (const [q, v] of ops) {
      const r = await h.gql(q, v, b.token);
      assert.equal(code(r), "NOT_FOUND", `${q}: ${JSON.stringify(r.errors)}`);
    }
    const mine = await h.ok<{ webhookEndpoints: Json[] }>("{ webhookEndpoints { id } }", {}, b.token);
    assert.ok(!mine.webhookEndpoints.some((e) => e.id === id));
    // Untouched, and still A's to manage.
    const still = await h.ok<{ webhookEndpoint: Json }>(
      `query($id: ID!) { webhookEndpoint(id: $id) { enabled } }`,
      { id },
      a.token,
    );
    assert.equal(still.webhookEndpoint.enabled, true);
    // The operator reaches any workspace's endpoints.
    const op = await h.ok<{ webhookEndpoints: Json[] }>(
      `query($w: ID!) { webhookEndpoints(workspaceId: $w) { id } }`,
      { w: a.workspaceId },
      ADMIN_TOKEN,
    );
    assert.ok(op.webhookEndpoints.some((e) => e.id === id));
    const upd = await h.ok<{ updateWebhookEndpoint: Json }>(
      `mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: { enabled: false, description: "", eventTypes: [QUOTA_THRESHOLD, NODE_STATUS] }) { enabled description eventTypes } }`,
      { id },
      a.token,
    );
    assert.deepEqual(upd.updateWebhookEndpoint, {
      enabled: false,
      description: null,
      eventTypes: ["QUOTA_THRESHOLD", "NODE_STATUS"],
    });
    assert.equal(
      await h
        .ok(`mutation($id: ID!) { deleteWebhookEndpoint(id: $id) }`, { id }, a.token)
        .then((d) => d.deleteWebhookEndpoint),
      id,
    );
    const gone = await h.gql(`query($id: ID!) { webhookEndpoint(id: $id) { id } }`, { id }, a.token);
    assert.equal(code(gone), "NOT_FOUND");
  });

  it("roles: every member reads endpoints and deliveries; only an OWNER or ADMIN manages them; a VIEWER sees URLs masked", async () => {
    const { endpoint } = await create(
      a.token,
      { eventTypes: ["KEY_REGENERATED"] },
      "/roles/T0KEN-in-path?sig=s3cret",
    );
    const id = endpoint.id;
    const member = async (role: string) => {
      const email = `wh-${role.toLowerCase()}-${Date.now()}@example.com`;
      const acct = await h.signUp(email);
      const inv = await h.ok<{ inviteMember: { token: string } }>(
        `mutation($e: String!, $r: WorkspaceRole!) { inviteMember(email: $e, role: $r) { token } }`,
        { e: email, r: role },
        a.token,
      );
      await h.ok(
        `mutation($t: String!) { acceptInvitation(token: $t) { id } }`,
        { t: inv.inviteMember.token },
        acct.token,
      );
      return acct.token;
    };
    const [admin, memberToken, viewer] = [
      await member("ADMIN"),
      await member("MEMBER"),
      await member("VIEWER"),
    ];
    const manage: [string, Json][] = [
      [`mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: { description: "x" }) { id } }`, { id }],
      [`mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret } }`, { id }],
      [`mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`, { id }],
      [`mutation($id: ID!) { deleteWebhookEndpoint(id: $id) }`, { id }],
      [
        `mutation($w: ID!) { createWebhookEndpoint(workspaceId: $w, input: { url: "https://example.com/h", eventTypes: [KEY_REGENERATED] }) { secret } }`,
        { w: a.workspaceId },
      ],
    ];
    // URLs: whole for the OWNER, an ADMIN and a MEMBER; scheme, host and port only for a VIEWER.
    const whole = rx.url("/roles/T0KEN-in-path?sig=s3cret");
    const masked = `${new URL(whole).origin}/********`;
    for (const [token, url, isMasked] of [
      [a.token, whole, false],
      [admin, whole, false],
      [memberToken, whole, false],
      [viewer, masked, true],
    ] as const) {
      const one = await h.ok(`query($id: ID!) { webhookEndpoint(id: $id) { url urlMasked } }`, { id }, token);
      assert.deepEqual(one.webhookEndpoint, { url, urlMasked: isMasked });
      const all = await h.ok(
        `query($w: ID!) { webhookEndpoints(workspaceId: $w) { id url } }`,
        { w: a.workspaceId },
        token,
      );
      assert.equal(all.webhookEndpoints.find((e: Json) => e.id === id).url, url);
      if (isMasked) assert.doesNotMatch(JSON.stringify(all), /T0KEN|s3cret/);
    }
    for (const token of [memberToken, viewer]) {
      const list = await h.ok<{ webhookEndpoints: Json[] }>(
        `query($w: ID!) { webhookEndpoints(workspaceId: $w) { id } }`,
        { w: a.workspaceId },
        token,
      );
      assert.ok(list.webhookEndpoints.some((e) => e.id === id));
      await h.ok(`query($id: ID!) { webhookDeliveries(endpointId: $id) { id } }`, { id }, token);
      for (const [q, v] of manage) {
        const r = await h.gql(q, v, token);
        assert.equal(code(r), "FORBIDDEN", `${q}: ${JSON.stringify(r.errors)}`);
        assert.match(r.errors![0]!.message, /may not add, change, test or delete webhook endpoints/);
      }
    }
    // The ADMIN may do all of it (the delete last).
    for (const [q, v] of manage) await h.ok(q, v, admin);
    const gone = await h.gql(`query($id: ID!) { webhookEndpoint(id: $id) { id } }`, { id }, a.token);
    assert.equal(code(gone), "NOT_FOUND");
  });

  it("a secret ciphertext copied from another endpoint does not open: the delivery fails, unsigned", async () => {
    const donor = await create(a.token, { eventTypes: ["KEY_REGENERATED"] }, "/donor");
    const victim = await create(a.token, { eventTypes: ["KEY_REGENERATED"] }, "/victim");
    // Sealed to the donor's row id: in the victim's row the AES-GCM tag does not verify.
    await h.cp.dataSource.query(
      `UPDATE webhook_endpoints SET secret_ciphertext = (SELECT secret_ciphertext FROM webhook_endpoints WHERE id = $1) WHERE id = $2`,
      [donor.endpoint.id, victim.endpoint.id],
    );
    await h.ok(
      `mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`,
      { id: victim.endpoint.id },
      a.token,
    );
    const d = await until("refused", async () => {
      const [x] = await deliveries(a.token, victim.endpoint.id);
      return x?.status === "FAILED" ? x : undefined;
    });
    assert.equal(d.attempts.length, 1);
    assert.match(d.attempts[0].error, /signing secret unreadable/);
    assert.equal(rx.on("/victim").length, 0, "nothing sent");
    // Rotating gives the endpoint a secret of its own again.
    const rot = await h.ok<{ rotateWebhookSecret: { secret: string } }>(
      `mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret } }`,
      { id: victim.endpoint.id },
      a.token,
    );
    rx.setSecret("/victim", rot.rotateWebhookSecret.secret);
    await h.ok(
      `mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`,
      { id: victim.endpoint.id },
      a.token,
    );
    const [got] = await rx.waitFor("/victim", (rs) => rs.length === 1);
    assert.ok(got!.verified);
  });

  it("pages deliveries newest first with first/after, and deletes old ones (retention)", async () => {
    const { endpoint } = await create(a.token, { eventTypes: ["KEY_REGENERATED"] }, "/pages");
    const sent: string[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await h.ok<{ sendTestWebhook: { id: string } }>(
        `mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`,
        { id: endpoint.id },
        a.token,
      );
      sent.push(d.sendTestWebhook.id);
    }
    const page = async (after: string | null) =>
      (
        await h.ok<{ webhookDeliveries: Json[] }>(DELIVERIES, { e: endpoint.id, first: 2, after }, a.token)
      ).webhookDeliveries.map((d) => d.id);
    const p1 = await page(null);
    assert.deepEqual(p1, [sent[2], sent[1]]);
    const p2 = await page(p1[1]!);
    assert.deepEqual(p2, [sent[0]]);
    assert.deepEqual(await page(p2[0]!), []);
    const big = await h.gql(DELIVERIES, { e: endpoint.id, first: 101 }, a.token);
    assert.equal(code(big), "BAD_USER_INPUT");
    // Retention: a delivery older than WEBHOOK_DELIVERY_RETENTION_DAYS (30) goes, with its attempts.
    await rx.waitFor("/pages", (rs) => rs.length === 3);
    await h.cp.dataSource.query(
      `UPDATE webhook_deliveries SET created_at = now() - interval '31 days' WHERE id = $1`,
      [sent[0]],
    );
    assert.equal(await worker!.webhooks.ops.retention(), 1);
    assert.deepEqual(await page(null), [sent[2], sent[1]]);
    const left: { n: number }[] = await h.cp.dataSource.query(
      "SELECT count(*)::int AS n FROM webhook_attempts WHERE delivery_id = $1",
      [sent[0]],
    );
    assert.equal(left[0]!.n, 0);
  });

  it("a pending delivery whose job was lost (Redis flushed) is queued again when a worker starts", async () => {
    const { endpoint } = await create(a.token, { eventTypes: ["KEY_REGENERATED"] }, "/lost");
    // The row as the control plane writes it, but its job never reached (or was flushed from) Redis.
    const [id] = await recordDeliveries(
      h.cp.dataSource,
      {
        id: newWebhookEventId(),
        type: "webhook.test",
        workspaceId: a.workspaceId,
        occurredAt: new Date().toISOString(),
        data: {},
      },
      [endpoint.id],
    );
    assert.equal(await liveDeliveryJobs(worker!, id!), 0, "no job");
    assert.equal(rx.on("/lost").length, 0, "no job, no delivery");
    await worker!.close();
    worker = await startTheWorker();
    const [got] = await rx.waitFor("/lost", (rs) => rs.length === 1);
    assert.ok(got!.verified);
    const d = await until("delivered", async () => {
      const [x] = await deliveries(a.token, endpoint.id);
      return x?.status === "SUCCEEDED" ? x : undefined;
    });
    assert.equal(d.id, id);
    assert.equal(d.attemptCount, 1);
  });

  describe("quota.threshold", () => {
    let ws: { token: string; workspaceId: string };
    const day = () => utcDayKey(Date.now());
    const counter = () => h.names.quotaDay(ws.workspaceId, day());
    const events = (): Received[] => rx.on("/quota").filter((r) => r.json?.type === "quota.threshold");

    before(async () => {
      ws = await h.signUp();
      await h.ok(
        `mutation { upsertPlan(input: { name: "tiny", dailyRequestLimit: 1000, requestsPerSecond: 10 }) { id } }`,
        {},
        ADMIN_TOKEN,
      );
      await h.ok(
        `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "tiny") { id } }`,
        { w: ws.workspaceId },
        ADMIN_TOKEN,
      );
      await create(ws.token, { eventTypes: ["QUOTA_THRESHOLD"] }, "/quota");
    });

    it("fires at 80% and at 100% of the daily limit, once per UTC day each", async () => {
      await h.redis.set(counter(), "799");
      // A check round run here (the repeatable job runs them too): it emits nothing below 80%.
      assert.equal(await worker!.webhooks.ops.checkQuotas(), 0);
      assert.equal(events().length, 0, "79.9% is below the first threshold");
      await h.redis.set(counter(), "800");
      const [e80] = await rx.waitFor("/quota", (rs) => rs.length >= 1);
      assert.ok(e80!.verified);
      assert.equal(e80!.json.workspaceId, ws.workspaceId);
      assert.deepEqual(
        { ...e80!.json.data, resetsAt: undefined },
        { thresholdPercent: 80, unit: "requests", day: day(), used: 800, limit: 1000, resetsAt: undefined },
      );
      assert.equal(Date.parse(e80!.json.data.resetsAt) % 86_400_000, 0, "next 00:00 UTC");
      await h.redis.set(counter(), "950");
      assert.equal(await worker!.webhooks.ops.checkQuotas(), 0, "80% fires once");
      assert.equal(events().length, 1, "80% fires once");
      await h.redis.set(counter(), "1003");
      const all = await rx.waitFor("/quota", (rs) => rs.length >= 2);
      assert.equal(all[1]!.json.data.thresholdPercent, 100);
      assert.equal(all[1]!.json.data.used, 1003);
      assert.equal(await worker!.webhooks.ops.checkQuotas(), 0, "100% fires once");
      assert.equal(events().length, 2, "100% fires once");
      assert.ok(await h.redis.exists(h.names.webhookQuotaMarker(ws.workspaceId, day(), 80)));
      assert.ok(await h.redis.exists(h.names.webhookQuotaMarker(ws.workspaceId, day(), 100)));
    });

    it("once per day holds across a worker restart and with two workers checking at once", async () => {
      await worker!.close();
      worker = await startTheWorker();
      assert.equal(await worker!.webhooks.ops.checkQuotas(), 0, "a restarted worker does not fire again");
      assert.equal(events().length, 2, "a restarted worker does not fire again");
      // A second workspace crossing both thresholds while two workers check concurrently: one event each.
      const other = await h.signUp();
      await h.ok(
        `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "tiny") { id } }`,
        { w: other.workspaceId },
        ADMIN_TOKEN,
      );
      const { endpoint } = await create(other.token, { eventTypes: ["QUOTA_THRESHOLD"] }, "/quota-two");
      const second = await startTheWorker();
      try {
        await h.redis.set(h.names.quotaDay(other.workspaceId, day()), "5000");
        const emitted = await Promise.all([
          worker!.webhooks.ops.checkQuotas(),
          second.webhooks.ops.checkQuotas(),
          worker!.webhooks.ops.checkQuotas(),
        ]);
        const got = await rx.waitFor("/quota-two", (rs) => rs.length >= 2);
        // The repeatable checks of both workers run beside these calls: one more round from each finds
        // both markers set, and the endpoint has exactly the two deliveries.
        assert.equal(await worker!.webhooks.ops.checkQuotas(), 0);
        assert.equal(await second.webhooks.ops.checkQuotas(), 0);
        assert.equal(rx.on("/quota-two").length, 2, `emitted per call ${emitted}`);
        assert.deepEqual(got.map((r) => r.json.data.thresholdPercent).sort(), [100, 80]);
        assert.equal((await deliveries(other.token, endpoint.id)).length, 2);
      } finally {
        await second.close();
      }
    });

    it("a new UTC day fires again (the markers are per day)", async () => {
      const tomorrow = Date.now() + 86_400_000;
      await h.redis.set(h.names.quotaDay(ws.workspaceId, utcDayKey(tomorrow)), "900");
      assert.equal(await worker!.webhooks.ops.checkQuotas(tomorrow), 1);
      assert.equal(await worker!.webhooks.ops.checkQuotas(tomorrow), 0);
      const rs = await rx.waitFor("/quota", (x) => x.length >= 3);
      assert.equal(rs[2]!.json.data.day, utcDayKey(tomorrow));
      assert.equal(rs[2]!.json.data.thresholdPercent, 80);
    });

    it("a plan with a daily compute-unit limit: thresholds in compute units too, each event saying its unit", async () => {
      const cu = await h.signUp();
      await h.ok(
        `mutation { upsertPlan(input: { name: "cu-tiny", dailyRequestLimit: 1000, requestsPerSecond: 10 }) { id } }`,
        {},
        ADMIN_TOKEN,
      );
      await setPlanDailyComputeUnitLimit(h, "cu-tiny", 10_000);
      await h.ok(
        `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "cu-tiny") { id } }`,
        { w: cu.workspaceId },
        ADMIN_TOKEN,
      );
      await create(cu.token, { eventTypes: ["QUOTA_THRESHOLD"] }, "/quota-cu");
      const cuCounter = h.names.computeUnitQuotaDay(cu.workspaceId, day());
      const reqCounter = h.names.quotaDay(cu.workspaceId, day());
      await h.redis.set(reqCounter, "100");
      await h.redis.set(cuCounter, "7999");
      assert.equal(await worker!.webhooks.ops.checkQuotas(), 0, "79.99% of the compute units");
      // Heavy methods: 80% of the compute units while requests are at 10%.
      await h.redis.set(cuCounter, "8000");
      const [e80] = await rx.waitFor("/quota-cu", (rs) => rs.length >= 1);
      assert.ok(e80!.verified);
      assert.deepEqual(
        { ...e80!.json.data, resetsAt: undefined },
        {
          thresholdPercent: 80,
          unit: "computeUnits",
          day: day(),
          used: 8000,
          limit: 10_000,
          resetsAt: undefined,
        },
      );
      // The request thresholds go on as before, with their own markers.
      await h.redis.set(reqCounter, "800");
      const two = await rx.waitFor("/quota-cu", (rs) => rs.length >= 2);
      assert.deepEqual(
        { ...two[1]!.json.data, resetsAt: undefined },
        { thresholdPercent: 80, unit: "requests", day: day(), used: 800, limit: 1000, resetsAt: undefined },
      );
      await h.redis.set(cuCounter, "10250");
      const three = await rx.waitFor("/quota-cu", (rs) => rs.length >= 3);
      assert.deepEqual(
        [three[2]!.json.data.unit, three[2]!.json.data.thresholdPercent, three[2]!.json.data.used],
        ["computeUnits", 100, 10_250],
      );
      assert.equal(await worker!.webhooks.ops.checkQuotas(), 0, "each fires once");
      assert.equal(rx.on("/quota-cu").length, 3);
      assert.ok(await h.redis.exists(h.names.webhookQuotaMarker(cu.workspaceId, day(), 80, "computeUnits")));
      assert.ok(await h.redis.exists(h.names.webhookQuotaMarker(cu.workspaceId, day(), 80)));
      assert.equal(await h.redis.exists(h.names.webhookQuotaMarker(cu.workspaceId, day(), 100)), 0);

      // A requests-only plan: a compute-unit counter (whatever left it) fires nothing.
      const before = events().length;
      await h.redis.set(h.names.computeUnitQuotaDay(ws.workspaceId, day()), "999999999");
      assert.equal(await worker!.webhooks.ops.checkQuotas(), 0);
      assert.equal(events().length, before);
      assert.equal(
        await h.redis.exists(h.names.webhookQuotaMarker(ws.workspaceId, day(), 80, "computeUnits")),
        0,
      );
    });
  });
});

describe("webhooks: private addresses refused unless WEBHOOK_ALLOW_PRIVATE_ADDRESSES", function () {
  this.timeout(60_000);
  let h: Harness;
  let worker: ControlPlaneWorker | undefined;
  let dataDir: string;
  const rx = new WebhookReceiver();
  let a: { token: string; workspaceId: string };

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "rg-webhooks-"));
    await rx.start();
    h = await startHarness({ WEBHOOK_RETRY_BASE_MS: "100" });
    assert.equal(h.config.webhooks.allowPrivateAddresses, false, "the default");
    worker = await startWorker(h.config, undefined, { usage: { enabled: false }, nodes: { dataDir } });
    a = await h.signUp();
  });
  after(async () => {
    await worker?.close();
    await h?.close();
    await rx.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("refuses IP-literal private URLs at creation", async () => {
    const port = rx.portNumber;
    for (const url of [
      `http://127.0.0.1:${port}/`,
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://[::ffff:7f00:1]:${port}/`,
      `http://0x7f.1:${port}/`,
      `http://2130706433:${port}/`,
      "http://10.1.2.3/",
      "http://192.168.0.10/",
      "http://172.16.5.4/",
      "http://100.64.0.1/",
      "http://169.254.169.254/latest/meta-data",
      "http://0.0.0.0/",
      "http://[::]/",
      "http://[fd00::1]/",
      "http://[fe80::1]/",
    ]) {
      const r = await h.gql(CREATE, { i: { url, eventTypes: ["KEY_REGENERATED"] } }, a.token);
      assert.equal(code(r), "BAD_USER_INPUT", url);
      assert.match(r.errors![0]!.message, /Webhooks cannot be sent to/, url);
    }
    assert.equal(rx.connections, 0);
  });

  it("a name that resolves to loopback is refused at delivery without any connection", async () => {
    const d = await h.ok<{ createWebhookEndpoint: { endpoint: Json } }>(
      CREATE,
      { i: { url: rx.url("/local", "localhost"), eventTypes: ["KEY_REGENERATED"] } },
      a.token,
    );
    const id = d.createWebhookEndpoint.endpoint.id;
    await h.ok(`mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }`, { id }, a.token);
    const del = await until("refused delivery", async () => {
      const [x] = (await h.ok<{ webhookDeliveries: Json[] }>(DELIVERIES, { e: id }, a.token))
        .webhookDeliveries;
      return x?.status === "FAILED" ? x : undefined;
    });
    assert.equal(del.attempts.length, 1, "a refused address is not retried");
    assert.equal(del.attempts[0].statusCode, null);
    assert.match(
      del.attempts[0].error,
      /^address refused: localhost resolves to (127\.0\.0\.1|::1) is a loopback address$/,
    );
    // The one attempt is over (FAILED is written after it); no job is left to try again.
    await until("the delivery's job is gone", async () => (await liveDeliveryJobs(worker!, del.id)) === 0);
    assert.equal(rx.connections, 0, "no connection was made");
    assert.equal(rx.requests.length, 0);
  });
});
