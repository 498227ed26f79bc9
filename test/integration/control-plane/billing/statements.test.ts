import assert from "node:assert/strict";
import { STATEMENT_CSV_COLUMNS } from "../../../../control-plane/src/billing/statement.csv";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import { ADMIN_TOKEN, code, createApp, type Harness, type Json, startHarness } from "../harness";
import { ingestorFor, recorderFor } from "../usage/helpers";

const C = ErrorCategory;
const DAY = 86_400_000;
const HOUR = 3_600_000;

const AMOUNTS = "requests computeUnits refusedRequests refusedComputeUnits servedRequests servedComputeUnits";
const STATEMENT = `workspaceId workspaceName month from to complete ${AMOUNTS}
  lines { appId appName network method ${AMOUNTS} }
  byApp { appId appName ${AMOUNTS} }
  byNetwork { network ${AMOUNTS} }
  days { date dailyRequestLimit overLimit ${AMOUNTS} }
  daysOverLimit
  plans { planId name from to dailyRequestLimit monthlyRequestLimit requestsPerSecond }
  csv`;
const Q = `query($w: ID, $m: String!) { usageStatement(workspaceId: $w, month: $m) { ${STATEMENT} } }`;

const monthKey = (ms: number) => new Date(ms).toISOString().slice(0, 7);
const dayKey = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** RFC 4180 parse (quoted cells, doubled quotes, CRLF). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") {
      row.push(cell);
      cell = "";
    } else if (ch === "\r" && text[i + 1] === "\n") {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = "";
      i++;
    } else cell += ch;
  }
  assert.equal(cell, "", "the CSV ends with a line break");
  return rows;
}

/** The data rows of a statement CSV as objects keyed by column. */
function csvRecords(text: string): Record<string, string>[] {
  const [header, ...rows] = parseCsv(text);
  assert.deepEqual(header, [...STATEMENT_CSV_COLUMNS]);
  return rows.map((r) => {
    assert.equal(r.length, header!.length, JSON.stringify(r));
    return Object.fromEntries(header!.map((c, i) => [c, r[i]!]));
  });
}

describe("billing: monthly usage statements (recorder -> stream -> ingestion -> GraphQL)", function () {
  this.timeout(60_000);
  let h: Harness;
  let a: { token: string; accountId: string; workspaceId: string };
  let b: { token: string; accountId: string; workspaceId: string };
  let alpha: { id: string };
  let beta: { id: string };
  const now = Date.now();
  const d = new Date(now);
  const thisMonthStart = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  const prevStart = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, 1);
  const prevLastDay = thisMonthStart - DAY;
  const prev = monthKey(prevStart);
  const current = monthKey(now);

  before(async () => {
    h = await startHarness();
    a = await h.signUp();
    b = await h.signUp();
    alpha = await createApp(h, a.token, "alpha");
    beta = await createApp(h, a.token, 'beta, "the second"');
    const bApp = await createApp(h, b.token, "b-app");
    await h.ok(
      `mutation { upsertPlan(input: { name: "tiny", dailyRequestLimit: 20, requestsPerSecond: 10 }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    const r = recorderFor(h);
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
        r.rec.record({ workspaceId: ws, appId, network, method, category: cat, latencyMs: 5 });
    };
    const A = a.workspaceId;
    // The previous month: day 1, day 2, its last day (23:00), dedicated-node traffic (no app).
    rec(prevStart + 5 * HOUR, alpha.id, A, "eth", "eth_call", C.Success, 30);
    rec(prevStart + DAY + 20 * HOUR, beta.id, A, "eth", "eth_getLogs", C.Success, 25);
    rec(prevLastDay + 23 * HOUR, alpha.id, A, "dot", "state_getStorage", C.Success, 10);
    rec(prevLastDay + 23 * HOUR, alpha.id, A, "dot", "state_getStorage", C.TooManyRequests, 5);
    rec(prevLastDay + 23 * HOUR, null, A, "node-abc", "eth_call", C.Success, 15);
    // Just outside it on both sides.
    rec(prevStart - 60_000, alpha.id, A, "eth", "eth_call", C.Success, 7);
    rec(thisMonthStart, alpha.id, A, "eth", "eth_call", C.Success, 4);
    // Another tenant in the same month.
    rec(prevStart + 5 * HOUR, bApp.id, b.workspaceId, "eth", "eth_call", C.Success, 100);
    await r.close();
    const ing = ingestorFor(h);
    assert.ok((await ing.drain()) > 0);
    ing.close();
  });

  after(async () => {
    await h?.close();
  });

  it("refuses bad months with a clear BAD_USER_INPUT on `month`", async () => {
    const next = monthKey(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
    for (const [m, re] of [
      ["2026-13", /month number is 01\.\.12/],
      ["2026-00", /month number is 01\.\.12/],
      ["abc", /YYYY-MM, e\.g\. 2026-11; got "abc"/],
      ["2026-1", /YYYY-MM/],
      ["2026-11-01", /YYYY-MM/],
      ["", /YYYY-MM/],
      ["1969-12", /no month before 1970-01/],
      [next, new RegExp(`${next} is in the future: the latest statement is the current month, ${current}`)],
      ["9999-12", /in the future/],
    ] as const) {
      const res = await h.gql(Q, { m }, a.token);
      assert.equal(code(res), "BAD_USER_INPUT", m);
      assert.equal(res.errors?.[0]?.extensions?.field, "month", m);
      assert.match(res.errors![0]!.message, re, m);
    }
    // A huge value: refused with its first characters only, and the server keeps answering.
    const huge = await h.gql(Q, { m: `2026-11${"'; DROP TABLE usage_day; --".repeat(20_000)}` }, a.token);
    assert.equal(code(huge), "BAD_USER_INPUT");
    assert.ok(huge.errors![0]!.message.length < 200, huge.errors![0]!.message.slice(0, 300));
    assert.equal((await h.ok(Q, { m: current }, a.token)).usageStatement.month, current);
    // The operator's page validates the same way.
    const op = await h.gql(`query { usageStatements(month: "2026-13") { month } }`, {}, ADMIN_TOKEN);
    assert.equal(code(op), "BAD_USER_INPUT");
  });

  it("records every plan change in the plan history (trigger on workspaces)", async () => {
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "tiny") { id } }`,
      { w: a.workspaceId },
      ADMIN_TOKEN,
    );
    // Setting the same plan again is not a change.
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "tiny") { id } }`,
      { w: a.workspaceId },
      ADMIN_TOKEN,
    );
    const rows: Json[] = await h.cp.dataSource.query(
      `SELECT p.name, pp.started_at, pp.ended_at FROM workspace_plan_periods pp JOIN plans p ON p.id = pp.plan_id
       WHERE pp.workspace_id = $1 ORDER BY pp.started_at, pp.id`,
      [a.workspaceId],
    );
    assert.deepEqual(
      rows.map((r) => [r.name, r.ended_at === null]),
      [
        ["free", false],
        ["tiny", true],
      ],
    );
    assert.equal(
      rows[0]!.ended_at.getTime(),
      rows[1]!.started_at.getTime(),
      "the old period ends as the new one starts",
    );
    const s = (await h.ok(Q, { m: current }, a.token)).usageStatement;
    assert.deepEqual(
      s.plans.map((p: Json) => [p.name, p.dailyRequestLimit]),
      [
        ["free", 500000],
        ["tiny", 20],
      ],
    );
    assert.equal(s.plans[0].to, s.plans[1].from, "the periods are contiguous");
  });

  it("a past month: lines by app, network and method, days, days over the limit and the plans in force", async () => {
    // History as it would be had A been on free since before the month and moved to tiny on day 2, 12:00.
    const change = new Date(prevStart + DAY + 12 * HOUR);
    await h.cp.dataSource.query(
      `UPDATE workspace_plan_periods SET started_at = $2, ended_at = $3
       WHERE workspace_id = $1 AND plan_id = (SELECT id FROM plans WHERE name = 'free')`,
      [a.workspaceId, new Date(prevStart - 10 * DAY), change],
    );
    await h.cp.dataSource.query(
      `UPDATE workspace_plan_periods SET started_at = $2
       WHERE workspace_id = $1 AND plan_id = (SELECT id FROM plans WHERE name = 'tiny')`,
      [a.workspaceId, change],
    );
    const s = (await h.ok(Q, { m: prev }, a.token)).usageStatement;
    assert.equal(s.workspaceId, a.workspaceId);
    assert.equal(s.month, prev);
    assert.equal(s.from, new Date(prevStart).toISOString());
    assert.equal(s.to, new Date(thisMonthStart).toISOString());
    assert.equal(s.complete, true);
    // Rows without compute units (this recorder writes none) weigh 1 each.
    const amounts = (requests: number, refused = 0) => ({
      requests,
      computeUnits: requests,
      refusedRequests: refused,
      refusedComputeUnits: refused,
      servedRequests: requests - refused,
      servedComputeUnits: requests - refused,
    });
    assert.deepEqual(
      {
        requests: s.requests,
        computeUnits: s.computeUnits,
        refusedRequests: s.refusedRequests,
        refusedComputeUnits: s.refusedComputeUnits,
        servedRequests: s.servedRequests,
        servedComputeUnits: s.servedComputeUnits,
      },
      amounts(85, 5),
    );
    assert.deepEqual(s.lines, [
      { appId: alpha.id, appName: "alpha", network: "eth", method: "eth_call", ...amounts(30) },
      {
        appId: beta.id,
        appName: 'beta, "the second"',
        network: "eth",
        method: "eth_getLogs",
        ...amounts(25),
      },
      { appId: null, appName: null, network: "node-abc", method: "eth_call", ...amounts(15) },
      { appId: alpha.id, appName: "alpha", network: "dot", method: "state_getStorage", ...amounts(15, 5) },
    ]);
    assert.deepEqual(s.byApp, [
      { appId: alpha.id, appName: "alpha", ...amounts(45, 5) },
      { appId: beta.id, appName: 'beta, "the second"', ...amounts(25) },
      { appId: null, appName: null, ...amounts(15) },
    ]);
    assert.deepEqual(s.byNetwork, [
      { network: "eth", ...amounts(55) },
      { network: "dot", ...amounts(15, 5) },
      { network: "node-abc", ...amounts(15) },
    ]);
    // Every day of the month; the limit is the lowest of the plans in force that day.
    const days = Math.round((thisMonthStart - prevStart) / DAY);
    assert.equal(s.days.length, days);
    assert.equal(s.days[0].date, dayKey(prevStart));
    assert.deepEqual(s.days[0], {
      date: dayKey(prevStart),
      dailyRequestLimit: 500000,
      overLimit: false,
      ...amounts(30),
    });
    // Day 2: 25 served against tiny's 20 (in force from 12:00).
    assert.deepEqual(s.days[1], {
      date: dayKey(prevStart + DAY),
      dailyRequestLimit: 20,
      overLimit: true,
      ...amounts(25),
    });
    // Last day: 10 served on app keys (+ 15 on a dedicated node, which the daily quota does not count) < 20.
    assert.deepEqual(s.days[days - 1], {
      date: dayKey(prevLastDay),
      dailyRequestLimit: 20,
      overLimit: false,
      ...amounts(30, 5),
    });
    for (const day of s.days.slice(2, -1))
      assert.deepEqual(day, { date: day.date, dailyRequestLimit: 20, overLimit: false, ...amounts(0) });
    assert.deepEqual(s.daysOverLimit, [dayKey(prevStart + DAY)]);
    assert.deepEqual(
      s.plans.map((p: Json) => [p.name, p.from, p.to]),
      [
        ["free", new Date(prevStart).toISOString(), change.toISOString()],
        ["tiny", change.toISOString(), new Date(thisMonthStart).toISOString()],
      ],
    );

    // The CSV says the same: usage rows and day rows each add up to the total row.
    const recs = csvRecords(s.csv);
    const total = recs.filter((r) => r.section === "total");
    assert.equal(total.length, 1);
    assert.deepEqual(
      [
        total[0]!.requests,
        total[0]!.compute_units,
        total[0]!.refused_requests,
        total[0]!.refused_compute_units,
      ],
      ["85", "85", "5", "5"],
    );
    assert.equal(total[0]!.workspace_id, a.workspaceId);
    const sum = (rows: Record<string, string>[], col: string) => rows.reduce((t, r) => t + Number(r[col]), 0);
    for (const section of ["usage", "day"]) {
      const rows = recs.filter((r) => r.section === section);
      for (const col of ["requests", "compute_units", "refused_requests", "refused_compute_units"]) {
        assert.equal(sum(rows, col), Number(total[0]![col]), `${section} ${col}`);
      }
    }
    assert.equal(recs.filter((r) => r.section === "usage").length, 4);
    assert.equal(recs.filter((r) => r.section === "day").length, days);
    assert.deepEqual(
      recs.filter((r) => r.section === "day" && r.over_limit === "true").map((r) => r.date),
      [dayKey(prevStart + DAY)],
    );
    assert.deepEqual(
      recs.filter((r) => r.section === "plan").map((r) => [r.plan, r.from, r.to, r.daily_request_limit]),
      [
        ["free", new Date(prevStart).toISOString(), change.toISOString(), "500000"],
        ["tiny", change.toISOString(), new Date(thisMonthStart).toISOString(), "20"],
      ],
    );
    const betaRow = recs.find((r) => r.app_id === beta.id)!;
    assert.equal(betaRow.app, 'beta, "the second"');

    // The operator reads the same statement by naming the workspace.
    const op = (await h.ok(Q, { w: a.workspaceId, m: prev }, ADMIN_TOKEN)).usageStatement;
    assert.deepEqual(op, s);
  });

  it("tenant isolation: another workspace's usage never shows; its statement answers NOT_FOUND", async () => {
    const sb = (await h.ok(Q, { m: prev }, b.token)).usageStatement;
    assert.equal(sb.workspaceId, b.workspaceId);
    assert.equal(sb.requests, 100);
    assert.deepEqual(
      sb.lines.map((l: Json) => [l.appName, l.requests]),
      [["b-app", 100]],
    );
    const res = await h.gql(Q, { w: a.workspaceId, m: prev }, b.token);
    assert.equal(code(res), "NOT_FOUND");
    assert.equal(res.data, null);
    assert.equal(code(await h.gql(Q, { w: "not-a-uuid", m: prev }, b.token)), "NOT_FOUND");
    assert.equal(code(await h.gql(Q, { m: prev })), "UNAUTHENTICATED");
    // The operator must name the workspace.
    const noWs = await h.gql(Q, { m: prev }, ADMIN_TOKEN);
    assert.equal(code(noWs), "BAD_USER_INPUT");
    // Tenants may not use the operator's page.
    const page = await h.gql(
      `query($m: String!) { usageStatements(month: $m) { month } }`,
      { m: prev },
      a.token,
    );
    assert.equal(code(page), "FORBIDDEN");
  });

  it("a spreadsheet formula in a name is defused in the CSV, and the process keeps answering", async () => {
    const evil = await createApp(h, a.token, '=HYPERLINK("http://x")');
    // Its own instance id: batch ids are instanceId:sequence, and the worker counts each once.
    const r = recorderFor(h, "dp-evil");
    r.clock.now = now;
    r.rec.record({
      workspaceId: a.workspaceId,
      appId: evil.id,
      network: "eth",
      method: "eth_call",
      category: C.Success,
      latencyMs: 1,
    });
    await r.close();
    const ing = ingestorFor(h);
    await ing.drain();
    ing.close();
    const s = (await h.ok(Q, { m: current }, a.token)).usageStatement;
    const row = csvRecords(s.csv).find((x) => x.app_id === evil.id)!;
    assert.equal(row.app, '\'=HYPERLINK("http://x")');
    assert.ok(s.csv.includes(`"'=HYPERLINK(""http://x"")"`));
    // The GraphQL field keeps the name as it is.
    assert.equal(s.lines.find((l: Json) => l.appId === evil.id).appName, '=HYPERLINK("http://x")');
  });

  it("operator: every workspace's statement for a month in pages, each once", async () => {
    // A third workspace, and A's creation backdated into the previous month (the page lists workspaces that
    // existed during the month).
    const c = await h.signUp();
    await h.cp.dataSource.query(`UPDATE workspaces SET created_at = $2 WHERE id = $1`, [
      a.workspaceId,
      new Date(prevStart - DAY),
    ]);
    const all: Json[] = [];
    let after: string | null = null;
    let pages = 0;
    for (;;) {
      const res: Json = (
        await h.ok(
          `query($m: String!, $after: ID) { usageStatements(month: $m, first: 2, after: $after) { month nextCursor statements { workspaceId requests computeUnits daysOverLimit } } }`,
          { m: current, after },
          ADMIN_TOKEN,
        )
      ).usageStatements;
      pages++;
      assert.equal(res.month, current);
      all.push(...res.statements);
      if (res.nextCursor === null) break;
      after = res.nextCursor;
    }
    const ids = all.map((s) => s.workspaceId);
    assert.deepEqual(ids, [...ids].sort(), "ordered by workspace id");
    assert.deepEqual([...ids].sort(), [a.workspaceId, b.workspaceId, c.workspaceId].sort());
    assert.equal(pages, 2);
    // Each page statement equals the single one.
    for (const s of all) {
      const one = (await h.ok(Q, { w: s.workspaceId, m: current }, ADMIN_TOKEN)).usageStatement;
      assert.equal(s.requests, one.requests);
      assert.equal(s.computeUnits, one.computeUnits);
    }
    // Only A existed during the previous month; its page statement is the detailed one.
    const prevPage = (
      await h.ok(
        `query($m: String!) { usageStatements(month: $m) { nextCursor statements { workspaceId requests daysOverLimit } } }`,
        { m: prev },
        ADMIN_TOKEN,
      )
    ).usageStatements;
    assert.deepEqual(prevPage, {
      nextCursor: null,
      statements: [{ workspaceId: a.workspaceId, requests: 85, daysOverLimit: [dayKey(prevStart + DAY)] }],
    });
    for (const [first, after2] of [
      [0, null],
      [201, null],
      [10, "nope"],
    ] as const) {
      const res = await h.gql(
        `query($f: Int!, $a: ID) { usageStatements(month: "2026-01", first: $f, after: $a) { month } }`,
        { f: first, a: after2 },
        ADMIN_TOKEN,
      );
      assert.equal(code(res), "BAD_USER_INPUT", `${first} ${after2}`);
    }
  });
});
