import assert from "node:assert/strict";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import type { DataPlane } from "../../../data-plane/src/data-plane";
import { utcDayKey, utcMonthKey } from "../../../shared/src/quota/day";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import {
  ADMIN_TOKEN,
  code,
  createApp,
  type Harness,
  type Json,
  startHarness,
  startHarnessDataPlane,
} from "../control-plane/harness";
import { WebhookReceiver } from "../control-plane/webhooks/receiver";
import { post } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";

const DAY = 86_400_000;
const DAILY_LIMIT = 60;
const ZERO = "0x0000000000000000000000000000000000000000";

/** What the test sent and what the gateway answered, per app x network x method. */
class Sent {
  readonly lines = new Map<string, { requests: number; refused: number }>();
  /** Compute units the served answers said they cost (X-Compute-Units), and whether every one said. */
  servedComputeUnits = 0;
  everyServedPriced = true;
  priced(status: number, header: string | null): void {
    if (status === 429) return;
    if (header === null) this.everyServedPriced = false;
    else this.servedComputeUnits += Number(header);
  }
  add(app: string, network: string, method: string, n: number, refused: boolean): void {
    const k = `${app}|${network}|${method}`;
    const l = this.lines.get(k) ?? { requests: 0, refused: 0 };
    l.requests += n;
    if (refused) l.refused += n;
    this.lines.set(k, l);
  }
  sum(f: (l: { requests: number; refused: number }) => number): number {
    let t = 0;
    for (const l of this.lines.values()) t += f(l);
    return t;
  }
}

const STATEMENT = `requests computeUnits refusedRequests refusedComputeUnits servedRequests servedComputeUnits
  lines { appId network method requests computeUnits refusedRequests }
  days { date requests computeUnits refusedRequests dailyRequestLimit overLimit }
  daysOverLimit plans { name dailyRequestLimit } csv`;

describe("billing end to end: the statement adds up (data plane -> Redis -> worker -> Postgres -> GraphQL)", function () {
  this.timeout(180_000);
  let h: Harness;
  let anvil: Anvil;
  let stub: StubUpstream;
  let worker: ControlPlaneWorker | undefined;
  let dp: DataPlane | undefined;
  const rx = new WebhookReceiver();
  let a: { token: string; workspaceId: string };
  let b: { token: string; workspaceId: string };
  let alpha: { id: string; apiKey: string };
  let beta: { id: string; apiKey: string };
  let bApp: { id: string; apiKey: string };

  before(async () => {
    await rx.start();
    h = await startHarness({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true" });
    anvil = await startAnvil({ blockTimeSec: 1 });
    stub = await new StubUpstream().start();
    await h.ok(
      `mutation($a: String!, $w: String, $s: String!) {
        n1: createNetwork(input: { slug: "evm-anvil", name: "Anvil", protocol: EVM, chainId: 31337 }) { id }
        n2: createNetwork(input: { slug: "evm-stub", name: "Stub", protocol: EVM, chainId: 31337 }) { id }
        u1: addUpstream(networkSlug: "evm-anvil", input: { httpUrl: $a, wsUrl: $w }) { id }
        u2: addUpstream(networkSlug: "evm-stub", input: { httpUrl: $s }) { id }
        p: upsertPlan(input: { name: "small", dailyRequestLimit: ${DAILY_LIMIT}, requestsPerSecond: 1000 }) { id } }`,
      { a: anvil.httpUrl, w: anvil.wsUrl, s: stub.url },
      ADMIN_TOKEN,
    );
    a = await h.signUp();
    b = await h.signUp();
    alpha = await createApp(h, a.token, "alpha");
    beta = await createApp(h, a.token, "beta");
    bApp = await createApp(h, b.token, "b-app");
    // A starts on free and moves to a plan with a small daily limit: two plans in force this month.
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "small") { id } }`,
      { w: a.workspaceId },
      ADMIN_TOKEN,
    );
    const d = await h.ok(
      `mutation($i: CreateWebhookEndpointInput!) { createWebhookEndpoint(input: $i) { secret } }`,
      { i: { url: rx.url("/daily"), eventTypes: ["USAGE_DAILY"] } },
      a.token,
    );
    rx.setSecret("/daily", d.createWebhookEndpoint.secret);
    worker = await startWorker(h.config, undefined, { usage: { blockMs: 100, consumerName: "billing-e2e" } });
    dp = await startHarnessDataPlane(h, {
      HEALTH_CHECK_INTERVAL_MS: "200",
      USAGE_FLUSH_INTERVAL_MS: "200",
      RATE_LIMIT_MODE: "local",
      QUOTA_MODE: "redis",
      SHARED_NODE_EXTRA_NAMESPACES: "stub",
    });
  });

  after(async () => {
    await dp?.close();
    await worker?.close();
    await anvil?.stop();
    await stub?.stop();
    await h?.close();
    await rx.close();
  });

  it("requests by app, network and method match what was sent; totals equal the rollups and the quota counters; the daily limit day is flagged", async () => {
    const sent = new Sent();
    const base = `http://127.0.0.1:${dp!.port}`;
    const url = (net: string, key: string) => `${base}/${net}/rpc?apikey=${key}`;
    const one = async (app: string, key: string, net: string, method: string, params?: unknown[]) => {
      const r = await post(url(net, key), { jsonrpc: "2.0", id: 1, method, ...(params ? { params } : {}) });
      assert.ok(r.status === 200 || r.status === 429, `${method}: ${r.status} ${r.text}`);
      sent.add(app, net, method, 1, r.status === 429);
      if (app !== bApp.id) sent.priced(r.status, r.headers.get("x-compute-units"));
      return r;
    };
    const batch = async (app: string, key: string, net: string, method: string, n: number) => {
      const body = Array.from({ length: n }, (_, i) => ({ jsonrpc: "2.0", id: i, method }));
      const r = await post(url(net, key), body);
      assert.ok(r.status === 200 || r.status === 429, `batch ${method}: ${r.status} ${r.text}`);
      sent.add(app, net, method, n, r.status === 429);
      sent.priced(r.status, r.headers.get("x-compute-units"));
      return r;
    };
    for (let i = 0; i < 5; i++)
      assert.equal((await one(alpha.id, alpha.apiKey, "evm-anvil", "eth_chainId")).json.result, "0x7a69");
    for (let i = 0; i < 3; i++) await one(alpha.id, alpha.apiKey, "evm-anvil", "eth_blockNumber");
    const balances = await post(
      url("evm-anvil", alpha.apiKey),
      Array.from({ length: 10 }, (_, i) => ({
        jsonrpc: "2.0",
        id: i,
        method: "eth_getBalance",
        params: [ZERO, "latest"],
      })),
    );
    assert.equal(balances.json.length, 10);
    sent.add(alpha.id, "evm-anvil", "eth_getBalance", 10, false);
    sent.priced(balances.status, balances.headers.get("x-compute-units"));
    for (let i = 0; i < 4; i++) await one(beta.id, beta.apiKey, "evm-stub", "eth_getBalance", [ZERO]);
    // An upstream error is still a response object: served, counted by the quota.
    for (let i = 0; i < 2; i++)
      assert.equal((await one(beta.id, beta.apiKey, "evm-stub", "stub_error")).json.error.code, -32000);
    // Up to the plan's daily limit, then past it: batches of 10 until one is refused for the day.
    let refusal: Json | undefined;
    for (let i = 0; i < 20 && !refusal; i++) {
      const r = await batch(alpha.id, alpha.apiKey, "evm-anvil", "eth_blockNumber", 10);
      if (r.status === 429) refusal = r.json;
    }
    assert.ok(refusal, "the daily limit was reached");
    assert.equal(refusal.error.data.reason, "daily_limit");
    // A refused batch leaves room below the limit: singles on the other app and network fill it, until one
    // is refused too (the limit is the workspace's, whatever the app).
    let single = 0;
    for (let i = 0; i < 10 && single !== 429; i++) {
      single = (await one(beta.id, beta.apiKey, "evm-stub", "eth_getBalance", [ZERO])).status;
    }
    assert.equal(single, 429);
    // Workspace B's traffic is its own.
    for (let i = 0; i < 3; i++) await one(bApp.id, bApp.apiKey, "evm-anvil", "eth_chainId");

    // Everything answered is flushed (close() flushes usage and quota), and the worker has committed it.
    await dp!.close();
    dp = undefined;
    await eventually(
      async () => {
        const groups = (await h.redis.xinfo("GROUPS", h.names.usageStream())) as unknown[][];
        return groups.every((g) => {
          const f: Record<string, unknown> = {};
          for (let i = 0; i + 1 < g.length; i += 2) f[String(g[i])] = g[i + 1];
          return Number(f.lag) === 0 && Number(f.pending) === 0;
        });
      },
      "the usage stream is drained",
      30_000,
    );

    const now = Date.now();
    const month = utcMonthKey(now);
    const today = utcDayKey(now);
    const s = (
      await h.ok(`query($m: String!) { usageStatement(month: $m) { ${STATEMENT} } }`, { m: month }, a.token)
    ).usageStatement;

    // 1. Against what was sent (B's requests are not in A's statement).
    const mine = new Sent();
    for (const [k, v] of sent.lines) if (!k.startsWith(bApp.id)) mine.lines.set(k, v);
    assert.deepEqual(
      Object.fromEntries(
        s.lines.map((l: Json) => [
          `${l.appId}|${l.network}|${l.method}`,
          { requests: l.requests, refused: l.refusedRequests },
        ]),
      ),
      Object.fromEntries(mine.lines),
    );
    assert.equal(
      s.requests,
      mine.sum((l) => l.requests),
    );
    assert.equal(
      s.refusedRequests,
      mine.sum((l) => l.refused),
    );
    assert.ok(s.refusedRequests >= 11, `refused ${s.refusedRequests}`);
    assert.equal(s.servedRequests, s.requests - s.refusedRequests);

    // 2. Against the rollups, every grain, for the same workspace and month.
    const monthStart = new Date(Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), 1));
    for (const [table, col] of [
      ["usage_minute", "minute"],
      ["usage_hour", "hour"],
      ["usage_day", "day"],
    ] as const) {
      const [row] = await h.cp.dataSource.query(
        `SELECT sum(count)::float8 AS requests, sum(compute_units)::float8 AS cu,
                coalesce(sum(count) FILTER (WHERE category = 'Too Many Requests'), 0)::float8 AS refused
         FROM ${table} WHERE workspace_id = $1 AND ${col} >= $2`,
        [a.workspaceId, table === "usage_day" ? utcDayKey(monthStart.getTime()) : monthStart],
      );
      assert.deepEqual(
        { requests: row.requests, computeUnits: row.cu, refused: row.refused },
        { requests: s.requests, computeUnits: s.computeUnits, refused: s.refusedRequests },
        table,
      );
    }
    // Compute units against what the answers said they cost; a gateway that prices no method (no
    // X-Compute-Units header) weighs every request object 1.
    if (sent.everyServedPriced) assert.equal(s.servedComputeUnits, sent.servedComputeUnits);
    else assert.equal(s.computeUnits, s.requests);
    // Every line's compute units add up to the total (and each is its rollup's).
    assert.equal(
      s.lines.reduce((t: number, l: Json) => t + l.computeUnits, 0),
      s.computeUnits,
    );

    // 3. Against the quota counters the data plane enforced: what was served on app keys is what it counted.
    const monthCount = Number(await h.redis.get(h.names.quotaMonth(a.workspaceId, month)));
    const dayCount = Number(await h.redis.get(h.names.quotaDay(a.workspaceId, today)));
    assert.equal(monthCount, s.servedRequests, "month counter");
    assert.equal(dayCount, s.servedRequests, "day counter");
    // A single was refused: the workspace had used its whole day.
    assert.equal(s.servedRequests, DAILY_LIMIT);

    // 4. The day the limit was reached, and the plans in force.
    const day = s.days.find((x: Json) => x.date === today);
    assert.deepEqual(day, {
      date: today,
      requests: s.requests,
      computeUnits: s.computeUnits,
      refusedRequests: s.refusedRequests,
      dailyRequestLimit: DAILY_LIMIT,
      overLimit: true,
    });
    assert.deepEqual(s.plans, [
      { name: "free", dailyRequestLimit: 500000 },
      { name: "small", dailyRequestLimit: DAILY_LIMIT },
    ]);
    assert.deepEqual(s.daysOverLimit, [today]);

    // 5. usage.daily for the same day (the clock moved past tomorrow's settle delay) carries the same totals.
    const ops = worker!.webhooks.ops;
    const tomorrow = Math.floor(now / DAY) * DAY + DAY;
    assert.deepEqual(await ops.usageDaily(undefined, tomorrow + h.config.webhooks.usageDailyDelayMs), {
      day: today,
      emitted: 1,
    });
    const [ev] = await rx.waitFor("/daily", (rs) => rs.length >= 1);
    assert.ok(ev!.verified);
    assert.deepEqual(
      {
        requests: ev!.json.data.requests,
        computeUnits: ev!.json.data.computeUnits,
        refusedRequests: ev!.json.data.refusedRequests,
      },
      { requests: s.requests, computeUnits: s.computeUnits, refusedRequests: s.refusedRequests },
    );
    const appRequests = (id: string) =>
      [...mine.lines].filter(([k]) => k.startsWith(`${id}|`)).reduce((t, [, l]) => t + l.requests, 0);
    assert.deepEqual(Object.fromEntries(ev!.json.data.apps.map((x: Json) => [x.appId, x.requests])), {
      [alpha.id]: appRequests(alpha.id),
      [beta.id]: appRequests(beta.id),
    });
    // B sees only its own three requests; A's statement is not B's to read.
    const sb = (
      await h.ok(`query($m: String!) { usageStatement(month: $m) { requests } }`, { m: month }, b.token)
    ).usageStatement;
    assert.equal(sb.requests, 3);
    const cross = await h.gql(
      `query($w: ID, $m: String!) { usageStatement(workspaceId: $w, month: $m) { requests } }`,
      { w: a.workspaceId, m: month },
      b.token,
    );
    assert.equal(code(cross), "NOT_FOUND");
    console.log(
      `      statement ${month}: ${s.requests} requests (${s.servedRequests} served, ${s.refusedRequests} refused), ${s.computeUnits} compute units; quota counter ${monthCount}`,
    );
  });
});
