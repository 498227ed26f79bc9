import assert from "node:assert/strict";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import { nextUtcMidnightMs, utcDayKey } from "../../../../shared/src/quota/day";
import { bucketIndex } from "../../../../shared/src/usage/contract";
import { ADMIN_TOKEN, code, createApp, Harness, Json, startHarness } from "../harness";
import { ingestorFor, recorderFor } from "./helpers";

const HOUR = 3_600_000;
const DAY = 86_400_000;
const C = ErrorCategory;

const REPORT = `requests24h { total success errors { serviceError nodeError clientError tooManyRequests unknownError }
    series { at success errors serviceError nodeError clientError tooManyRequests unknownError } }`;

describe("control-plane: usage queries (recorder -> stream -> ingestion -> GraphQL)", () => {
  let h: Harness;
  let a: { token: string; accountId: string; workspaceId: string };
  let b: { token: string; accountId: string; workspaceId: string };
  let c: { token: string; accountId: string; workspaceId: string };
  let alpha: { id: string };
  let beta: { id: string };
  let bApp: { id: string };
  let cApp: { id: string };
  const now = Date.now();
  const todayStart = Math.floor(now / DAY) * DAY;
  const curHour = Math.floor(now / HOUR) * HOUR;
  const cLatencies: number[] = [];

  before(async () => {
    h = await startHarness();
    // The data below sits at fixed hours relative to `now` (taken when mocha loaded this file, which can be
    // minutes before these tests run in the full suite): the service's clock is pinned to it, so an hour
    // boundary passing meanwhile does not shift the default 24-hour window.
    (h.cp.services.usage as unknown as { now: () => number }).now = () => now;
    a = await h.signUp();
    b = await h.signUp();
    c = await h.signUp();
    alpha = await createApp(h, a.token, "alpha");
    beta = await createApp(h, a.token, "beta");
    bApp = await createApp(h, b.token, "b-app");
    cApp = await createApp(h, c.token, "c-app");
    await h.ok(
      `mutation { upsertPlan(input: { name: "tiny", dailyRequestLimit: 20, requestsPerSecond: 10 }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "tiny") { id } }`,
      { w: a.workspaceId },
      ADMIN_TOKEN,
    );

    const r = recorderFor(h);
    const rec = (
      at: number,
      appId: string | null,
      workspaceId: string | null,
      network: string,
      method: string,
      category: ErrorCategory,
      latencies: number[],
    ) => {
      r.clock.now = at;
      for (const latencyMs of latencies)
        r.rec.record({ workspaceId, appId, network, method, category, latencyMs });
    };
    const A = a.workspaceId;
    // Today, app alpha (at 00:00 UTC) and app beta (start of the current hour).
    rec(todayStart, alpha.id, A, "eth", "eth_call", C.Success, [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]);
    rec(todayStart, alpha.id, A, "eth", "eth_call", C.NodeError, [500, 500]);
    rec(todayStart, alpha.id, A, "eth", "eth_getLogs", C.Success, [200, 200, 200, 200, 200]);
    rec(todayStart, alpha.id, A, "eth", "eth_getLogs", C.ClientError, [3]);
    rec(curHour, beta.id, A, "eth", "eth_blockNumber", C.Success, [2, 2, 2, 2]);
    rec(curHour, beta.id, A, "dot", "state_getStorage", C.ServiceError, [50]);
    rec(curHour, beta.id, A, "dot", "state_getStorage", C.TooManyRequests, [0.1, 0.1, 0.1]);
    rec(curHour, beta.id, A, "dot", "state_getStorage", C.UnknownError, [7]);
    // Older days (outside the 24 h window).
    rec(todayStart - 3 * DAY + 5 * HOUR, alpha.id, A, "eth", "eth_call", C.Success, new Array(20).fill(15));
    rec(todayStart - 2 * DAY + 5 * HOUR, beta.id, A, "eth", "eth_call", C.Success, new Array(5).fill(15));
    rec(todayStart - 2 * DAY + 6 * HOUR, alpha.id, A, "eth", "eth_call", C.Success, new Array(3).fill(15));
    // Another tenant, and public-endpoint traffic.
    rec(curHour, bApp.id, b.workspaceId, "eth", "eth_call", C.Success, new Array(100).fill(5));
    rec(curHour, null, null, "eth", "eth_chainId", C.Success, new Array(7).fill(1));
    // Tenant C: a wide latency distribution for the percentile check.
    let seed = 7;
    for (let i = 0; i < 2000; i++) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      const u = seed / 2147483648;
      cLatencies.push(Math.round(-Math.log(1 - u) * 80 * 1000) / 1000 + 0.5);
    }
    rec(curHour, cApp.id, c.workspaceId, "eth", "eth_getBalance", C.Success, cLatencies);
    await r.close();

    const ing = ingestorFor(h);
    assert.ok((await ing.drain()) > 0);
    ing.close();
  });

  after(async () => {
    await h?.close();
  });

  it("requests24h: totals, categories and an hourly series of the caller's workspace", async () => {
    const d = await h.ok(`{ usage(filter: {}) { workspaceId ${REPORT} } }`, {}, a.token);
    const r = d.usage.requests24h;
    assert.equal(d.usage.workspaceId, a.workspaceId);
    assert.equal(r.total, 27);
    assert.equal(r.success, 19);
    assert.deepEqual(r.errors, {
      serviceError: 1,
      nodeError: 2,
      clientError: 1,
      tooManyRequests: 3,
      unknownError: 1,
    });
    assert.equal(r.series.length, 24);
    assert.equal(new Date(r.series[23].at).getTime(), curHour);
    assert.equal(new Date(r.series[0].at).getTime(), curHour - 23 * HOUR);
    const sum = (k: string) => r.series.reduce((acc: number, p: Json) => acc + p[k], 0);
    assert.equal(sum("success"), 19);
    assert.equal(sum("errors"), 8);
    // Per category and hour, exactly: alpha's traffic at 00:00 UTC, beta's in the current hour (the same
    // hour between 00:00 and 01:00 UTC), every other hour zero.
    const zero = {
      success: 0,
      errors: 0,
      serviceError: 0,
      nodeError: 0,
      clientError: 0,
      tooManyRequests: 0,
      unknownError: 0,
    };
    const expected = new Map<number, typeof zero>();
    const add = (at: number, v: Partial<typeof zero>) => {
      const p = { ...(expected.get(at) ?? zero) };
      for (const [k, n] of Object.entries(v)) p[k as keyof typeof zero] += n;
      expected.set(at, p);
    };
    add(todayStart, { success: 15, errors: 3, nodeError: 2, clientError: 1 });
    add(curHour, { success: 4, errors: 5, serviceError: 1, tooManyRequests: 3, unknownError: 1 });
    for (const p of r.series as Json[]) {
      const { at, ...values } = p;
      const t = new Date(at).getTime();
      assert.deepEqual(values, expected.get(t) ?? zero, `hour ${new Date(t).toISOString()}`);
    }
    for (const k of Object.keys(r.errors)) assert.equal(sum(k), r.errors[k], k);
  });

  it("filters by app and network", async () => {
    const q = `query($f: UsageFilter!) { usage(filter: $f) { requests24h { total success } } }`;
    const byApp = await h.ok(q, { f: { appId: beta.id } }, a.token);
    assert.deepEqual(byApp.usage.requests24h, { total: 9, success: 4 });
    const byNet = await h.ok(q, { f: { network: "dot" } }, a.token);
    assert.deepEqual(byNet.usage.requests24h, { total: 5, success: 0 });
    const both = await h.ok(q, { f: { appId: alpha.id, network: "dot" } }, a.token);
    assert.deepEqual(both.usage.requests24h, { total: 0, success: 0 });
  });

  it("methods: per-method table with every sort key and order", async () => {
    const q = `query($s: MethodSort, $o: SortOrder) { usage(filter: {}) {
      methods(sortBy: $s, order: $o) { method requests errors p50 p95 avg } } }`;
    const def = (await h.ok(`{ usage(filter: {}) { methods { method requests errors } } }`, {}, a.token))
      .usage.methods;
    assert.deepEqual(def, [
      { method: "eth_call", requests: 12, errors: 2 },
      { method: "eth_getLogs", requests: 6, errors: 1 },
      { method: "state_getStorage", requests: 5, errors: 5 },
      { method: "eth_blockNumber", requests: 4, errors: 0 },
    ]);
    const byErrors = (await h.ok(q, { s: "ERRORS", o: "DESC" }, a.token)).usage.methods;
    assert.deepEqual(
      byErrors.map((m: Json) => m.method),
      ["state_getStorage", "eth_call", "eth_getLogs", "eth_blockNumber"],
    );
    const asc = (await h.ok(q, { s: "REQUESTS", o: "ASC" }, a.token)).usage.methods;
    assert.deepEqual(
      asc.map((m: Json) => m.method),
      ["eth_blockNumber", "state_getStorage", "eth_getLogs", "eth_call"],
    );
    for (const s of ["P50", "P95", "AVG"]) {
      for (const o of ["ASC", "DESC"]) {
        const rows = (await h.ok(q, { s, o }, a.token)).usage.methods as Json[];
        const k = s.toLowerCase();
        for (let i = 1; i < rows.length; i++) {
          const cmp = rows[i]![k] - rows[i - 1]![k];
          assert.ok(o === "ASC" ? cmp >= 0 : cmp <= 0, `${s} ${o}: ${JSON.stringify(rows)}`);
        }
      }
    }
    const logs = ((await h.ok(q, {}, a.token)).usage.methods as Json[]).find(
      (m) => m.method === "eth_getLogs",
    )!;
    // eth_getLogs: 5 x 200 ms + 1 x 3 ms.
    assert.equal(logs.avg, Math.round((1003 / 6) * 1000) / 1000);
    assert.equal(bucketIndex(logs.p50), bucketIndex(200));
    assert.equal(bucketIndex(logs.p95), bucketIndex(200));
  });

  it("responseTime: p50 / p95 within one histogram bucket of the exact values, exact average", async () => {
    const q = `query($m: String) { usage(filter: {}) { responseTime(method: $m) { p50 p95 avg } } }`;
    const call = (await h.ok(q, { m: "eth_call" }, a.token)).usage.responseTime;
    // eth_call: 10..100 step 10 and 2 x 500 -> exact p50 = 60, p95 = 500.
    assert.equal(bucketIndex(call.p50), bucketIndex(60));
    assert.equal(bucketIndex(call.p95), bucketIndex(500));
    assert.equal(call.avg, Math.round((1550 / 12) * 1000) / 1000);
    const none = (await h.ok(q, { m: "eth_nothing" }, a.token)).usage.responseTime;
    assert.deepEqual(none, { p50: null, p95: null, avg: null });

    const wide = (await h.ok(q, {}, c.token)).usage.responseTime;
    const sorted = [...cLatencies].sort((x, y) => x - y);
    const exact = (p: number) => sorted[Math.ceil(p * sorted.length) - 1]!;
    assert.equal(bucketIndex(wide.p50), bucketIndex(exact(0.5)), `p50 ${wide.p50} vs ${exact(0.5)}`);
    assert.equal(bucketIndex(wide.p95), bucketIndex(exact(0.95)), `p95 ${wide.p95} vs ${exact(0.95)}`);
    const mean = cLatencies.reduce((x, y) => x + y, 0) / cLatencies.length;
    assert.ok(Math.abs(wide.avg - mean) < 0.01, `${wide.avg} vs ${mean}`);
  });

  it("history: per UTC day, by app, with limitReached against the plan's daily limit", async () => {
    const q = `query($f: UsageFilter!, $d: Int) { usage(filter: $f) {
      history(days: $d) { date total byApp { app { id name } count } limitReached } } }`;
    const days = (await h.ok(q, { f: {}, d: 5 }, a.token)).usage.history as Json[];
    const key = (t: number) => new Date(t).toISOString().slice(0, 10);
    assert.deepEqual(
      days.map((d) => d.date),
      [4, 3, 2, 1, 0].map((n) => key(todayStart - n * DAY)),
    );
    assert.deepEqual(days[0], { date: key(todayStart - 4 * DAY), total: 0, byApp: [], limitReached: false });
    assert.deepEqual(days[1], {
      date: key(todayStart - 3 * DAY),
      total: 20,
      byApp: [{ app: { id: alpha.id, name: "alpha" }, count: 20 }],
      limitReached: true,
    });
    assert.deepEqual(days[2], {
      date: key(todayStart - 2 * DAY),
      total: 8,
      byApp: [
        { app: { id: beta.id, name: "beta" }, count: 5 },
        { app: { id: alpha.id, name: "alpha" }, count: 3 },
      ],
      limitReached: false,
    });
    assert.equal(days[3].total, 0);
    // Today: 27 requests, 24 served (3 were Too Many Requests) >= 20.
    assert.deepEqual(days[4], {
      date: key(todayStart),
      total: 27,
      byApp: [
        { app: { id: alpha.id, name: "alpha" }, count: 18 },
        { app: { id: beta.id, name: "beta" }, count: 9 },
      ],
      limitReached: true,
    });
    const def = (await h.ok(q, { f: {} }, a.token)).usage.history as Json[];
    assert.equal(def.length, 30, "30 days by default");
    const betaOnly = (await h.ok(q, { f: { appId: beta.id }, d: 3 }, a.token)).usage.history as Json[];
    assert.deepEqual(
      betaOnly.map((d) => [d.total, d.limitReached]),
      [
        [5, false],
        [0, false],
        [9, true],
      ],
      "the limit is workspace-wide, the breakdown follows the filter",
    );
    const bad = await h.gql(`{ usage(filter: {}) { history(days: 0) { date } } }`, {}, a.token);
    assert.equal(code(bad), "BAD_USER_INPUT");
  });

  it("today: the live Redis daily counter when present, else Postgres; limit and reset time", async () => {
    const q = `{ usage(filter: {}) { today { count limit resetsAt } } workspace { today { count limit resetsAt } } }`;
    const before = await h.ok(q, {}, a.token);
    const expected = {
      count: 24,
      limit: 20,
      resetsAt: new Date(nextUtcMidnightMs(Date.now())).toISOString(),
    };
    assert.deepEqual(before.usage.today, expected);
    assert.deepEqual(before.workspace.today, expected);
    await h.redis.set(h.names.quotaDay(a.workspaceId, utcDayKey(Date.now())), "123");
    const live = await h.ok(q, {}, a.token);
    assert.equal(live.usage.today.count, 123);
    assert.equal(live.workspace.today.count, 123);
    const other = await h.ok(`{ workspace { today { count limit } } }`, {}, b.token);
    assert.deepEqual(other.workspace.today, { count: 100, limit: 500000 });
  });

  it("explicit ranges: longer than 7 days give a daily series from the day rollups", async () => {
    const q = `query($f: UsageFilter!) { usage(filter: $f) { from to requests24h { total series { at success } } } }`;
    const from = new Date(todayStart - 9 * DAY).toISOString();
    const to = new Date(now + 1000).toISOString();
    const d = (await h.ok(q, { f: { from, to } }, a.token)).usage;
    assert.equal(d.requests24h.total, 27 + 20 + 8);
    assert.equal(d.requests24h.series.length, 10);
    assert.equal(d.requests24h.series[6].success, 20);
    // Daily points carry the categories too: today's, from usage_day.
    const daily = (
      await h.ok(
        `query($f: UsageFilter!) { usage(filter: $f) { requests24h { series {
          at success errors serviceError nodeError clientError tooManyRequests unknownError } } } }`,
        { f: { from, to } },
        a.token,
      )
    ).usage.requests24h.series as Json[];
    assert.deepEqual(daily[9], {
      at: new Date(todayStart).toISOString(),
      success: 19,
      errors: 8,
      serviceError: 1,
      nodeError: 2,
      clientError: 1,
      tooManyRequests: 3,
      unknownError: 1,
    });
    const bad = await h.gql(q, { f: { from: to, to: from } }, a.token);
    assert.equal(code(bad), "BAD_USER_INPUT");
  });

  it("tenant isolation: another workspace's app or workspace id is NOT_FOUND; own data only", async () => {
    const q = `query($f: UsageFilter!) { usage(filter: $f) { requests24h { total } methods { method } } }`;
    assert.equal(code(await h.gql(q, { f: { appId: alpha.id } }, b.token)), "NOT_FOUND");
    assert.equal(code(await h.gql(q, { f: { workspaceId: a.workspaceId } }, b.token)), "NOT_FOUND");
    assert.equal(code(await h.gql(q, { f: { appId: "not-a-uuid" } }, b.token)), "NOT_FOUND");
    assert.equal(code(await h.gql(q, { f: {} })), "UNAUTHENTICATED");
    const own = await h.ok(q, { f: {} }, b.token);
    assert.deepEqual(own.usage, { requests24h: { total: 100 }, methods: [{ method: "eth_call" }] });
    // Operator: names the workspace; an app of another workspace than the one named is NOT_FOUND.
    const op = await h.ok(q, { f: { workspaceId: a.workspaceId } }, ADMIN_TOKEN);
    assert.equal(op.usage.requests24h.total, 27);
    assert.equal(code(await h.gql(q, { f: {} }, ADMIN_TOKEN)), "BAD_USER_INPUT");
    assert.equal(
      code(await h.gql(q, { f: { workspaceId: a.workspaceId, appId: bApp.id } }, ADMIN_TOKEN)),
      "NOT_FOUND",
    );
  });
});
