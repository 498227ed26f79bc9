import assert from "node:assert/strict";
import { DataSource, type DataSourceOptions } from "typeorm";
import { createDataSource, MIGRATIONS, migrate } from "../../../../control-plane/src/db/data-source";
import { UsageComputeUnits1700000025200 } from "../../../../control-plane/src/db/migrations/1700000025200-usage-compute-units";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import { utcDayKey } from "../../../../shared/src/quota/day";
import { createTestDatabase, type TestDatabase } from "../../../helpers/postgres";
import { ADMIN_TOKEN, code, createApp, type Harness, type Json, startHarness } from "../harness";
import { ingestorFor, setPlanDailyComputeUnitLimit, usageRow, xaddUsage } from "./helpers";

const HOUR = 3_600_000;
const DAY = 86_400_000;
const C = ErrorCategory;

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe("control-plane: compute units in the usage rollups and reports (stream -> ingestion -> GraphQL)", () => {
  let h: Harness;
  let a: { token: string; workspaceId: string };
  let b: { token: string; workspaceId: string };
  let alpha: { id: string };
  let beta: { id: string };
  let bApp: { id: string };
  const now = Date.now();
  const todayStart = Math.floor(now / DAY) * DAY;
  const curHour = Math.floor(now / HOUR) * HOUR;

  const report = async (token: string, fields: string, filter: Json = {}) =>
    (await h.ok(`query($f: UsageFilter!) { usage(filter: $f) { ${fields} } }`, { f: filter }, token)).usage;

  before(async () => {
    h = await startHarness();
    // The rows sit at hours relative to `now`: the service's clock is pinned to it (see queries.test.ts).
    (h.cp.services.usage as unknown as { now: () => number }).now = () => now;
    a = await h.signUp();
    b = await h.signUp();
    alpha = await createApp(h, a.token, "alpha");
    beta = await createApp(h, a.token, "beta");
    bApp = await createApp(h, b.token, "b-app");
    const A = a.workspaceId;
    // One entry from a data plane that weighs methods, one from an older data plane (no computeUnits):
    // its rows count a weight of 1.
    await xaddUsage(h, [
      usageRow({
        minute: todayStart,
        workspaceId: A,
        appId: alpha.id,
        method: "eth_call",
        count: 10,
        computeUnits: 260,
      }),
      usageRow({
        minute: todayStart,
        workspaceId: A,
        appId: alpha.id,
        method: "eth_getLogs",
        count: 4,
        computeUnits: 240,
      }),
      usageRow({
        minute: todayStart,
        workspaceId: A,
        appId: alpha.id,
        method: "eth_getLogs",
        count: 2,
        computeUnits: 120,
        category: C.NodeError,
      }),
      usageRow({
        minute: curHour,
        workspaceId: A,
        appId: beta.id,
        method: "eth_call",
        count: 3,
        computeUnits: 78,
        category: C.TooManyRequests,
      }),
      usageRow({
        minute: curHour,
        workspaceId: A,
        appId: beta.id,
        method: "eth_chainId",
        count: 5,
        computeUnits: 0,
      }),
      usageRow({
        minute: curHour,
        workspaceId: b.workspaceId,
        appId: bApp.id,
        method: "eth_call",
        count: 7,
        computeUnits: 182,
      }),
    ]);
    await xaddUsage(h, [
      usageRow({ minute: curHour, workspaceId: A, appId: beta.id, method: "eth_blockNumber", count: 6 }),
      // Two days ago: history only.
      usageRow({
        minute: todayStart - 2 * DAY + 5 * HOUR,
        workspaceId: A,
        appId: alpha.id,
        method: "eth_call",
        count: 9,
        computeUnits: 234,
      }),
    ]);
    const ing = ingestorFor(h);
    assert.equal(await ing.drain(), 2);
    assert.equal(ing.ing.stats.invalidRows, 0);
    ing.close();
  });

  after(async () => {
    await h?.close();
  });

  it("the ingestor folds computeUnits into the minute, hour and day rollups; a row without it counts its requests", async () => {
    for (const table of ["usage_minute", "usage_hour", "usage_day"]) {
      const rows: { method: string; c: number; cu: number }[] = await h.cp.dataSource.query(
        `SELECT method, sum(count)::int AS c, sum(compute_units)::int AS cu FROM ${table}
         WHERE workspace_id = $1 GROUP BY method ORDER BY method`,
        [a.workspaceId],
      );
      assert.deepEqual(
        rows,
        [
          { method: "eth_blockNumber", c: 6, cu: 6 },
          { method: "eth_call", c: 22, cu: 572 },
          { method: "eth_chainId", c: 5, cu: 0 },
          { method: "eth_getLogs", c: 6, cu: 360 },
        ],
        table,
      );
    }
  });

  it("a redelivered entry adds no compute units; a row with impossible compute units is skipped, its neighbours kept", async () => {
    const ws = (await h.signUp()) as { token: string; workspaceId: string };
    const app = await createApp(h, ws.token, "dup");
    const row = usageRow({
      minute: curHour,
      workspaceId: ws.workspaceId,
      appId: app.id,
      method: "eth_call",
      count: 2,
      computeUnits: 52,
    });
    await xaddUsage(h, [row], "dup-batch");
    await xaddUsage(h, [row], "dup-batch");
    await xaddUsage(h, [
      { ...row, method: "eth_negative", computeUnits: -5 },
      { ...row, method: "eth_fraction", computeUnits: 1.5 },
      { ...row, method: "eth_huge", computeUnits: 1e300 },
      { ...row, method: "eth_text", computeUnits: "26" },
      { ...row, method: "eth_getBalance", computeUnits: 38 },
    ]);
    const ing = ingestorFor(h);
    await ing.drain();
    assert.equal(ing.ing.stats.duplicates, 1);
    assert.equal(ing.ing.stats.invalidRows, 4);
    ing.close();
    const rows = await h.cp.dataSource.query(
      `SELECT method, count::int AS c, compute_units::int AS cu FROM usage_day WHERE workspace_id = $1 ORDER BY method`,
      [ws.workspaceId],
    );
    assert.deepEqual(rows, [
      { method: "eth_call", c: 2, cu: 52 },
      { method: "eth_getBalance", c: 2, cu: 38 },
    ]);
  });

  it("requests24h: compute units beside the requests, the series adding up to the total", async () => {
    const r = (
      await report(a.token, "requests24h { total computeUnits series { at success errors computeUnits } }")
    ).requests24h;
    assert.equal(r.total, 30);
    assert.equal(r.computeUnits, 260 + 240 + 120 + 78 + 0 + 6);
    assert.equal(sum(r.series.map((p: Json) => p.computeUnits)), r.computeUnits);
    const at = (t: number) => r.series.find((p: Json) => new Date(p.at).getTime() === t);
    // In the first hour of the UTC day, today's start is the current hour: its point holds both.
    if (todayStart >= curHour - 23 * HOUR)
      assert.equal(at(todayStart).computeUnits, todayStart === curHour ? 620 + 84 : 620);
    assert.equal(at(curHour).computeUnits, todayStart === curHour ? 620 + 84 : 84);
  });

  it("methods: a compute-unit column that adds up to the report's total, sortable by it", async () => {
    const d = await report(
      a.token,
      `requests24h { computeUnits }
       byCu: methods(sortBy: COMPUTE_UNITS) { method requests computeUnits }
       asc: methods(sortBy: COMPUTE_UNITS, order: ASC) { method computeUnits }`,
    );
    assert.deepEqual(d.byCu, [
      { method: "eth_getLogs", requests: 6, computeUnits: 360 },
      { method: "eth_call", requests: 13, computeUnits: 338 },
      { method: "eth_blockNumber", requests: 6, computeUnits: 6 },
      { method: "eth_chainId", requests: 5, computeUnits: 0 },
    ]);
    assert.equal(sum(d.byCu.map((m: Json) => m.computeUnits)), d.requests24h.computeUnits);
    assert.deepEqual(
      d.asc.map((m: Json) => m.method),
      ["eth_chainId", "eth_blockNumber", "eth_call", "eth_getLogs"],
    );
    // One app only.
    const beta1 = await report(a.token, "methods(sortBy: COMPUTE_UNITS) { method computeUnits }", {
      appId: beta.id,
    });
    assert.deepEqual(beta1.methods, [
      { method: "eth_call", computeUnits: 78 },
      { method: "eth_blockNumber", computeUnits: 6 },
      { method: "eth_chainId", computeUnits: 0 },
    ]);
  });

  it("history: compute units per day and per app, adding up; limitReached by compute units when the plan limits them", async () => {
    await h.ok(
      `mutation { upsertPlan(input: { name: "cu-plan", dailyRequestLimit: 1000, requestsPerSecond: 10 }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "cu-plan") { id } }`,
      { w: a.workspaceId },
      ADMIN_TOKEN,
    );
    const fields =
      "history(days: 3) { date total computeUnits limitReached byApp { app { name } count computeUnits } }";
    let days = (await report(a.token, fields)).history;
    assert.equal(days.length, 3);
    const today = days[2];
    assert.equal(today.date, utcDayKey(now));
    assert.equal(today.total, 30);
    assert.equal(today.computeUnits, 704);
    assert.deepEqual(today.byApp, [
      { app: { name: "alpha" }, count: 16, computeUnits: 620 },
      { app: { name: "beta" }, count: 14, computeUnits: 84 },
    ]);
    assert.equal(sum(today.byApp.map((x: Json) => x.computeUnits)), today.computeUnits);
    assert.deepEqual(
      { total: days[0].total, computeUnits: days[0].computeUnits },
      { total: 9, computeUnits: 234 },
    );
    assert.ok(
      days.every((d: Json) => !d.limitReached),
      "requests only: 30 of 1000",
    );
    // Served compute units today (every category but Too Many Requests): 704 - 78 = 626.
    await setPlanDailyComputeUnitLimit(h, "cu-plan", 627);
    days = (await report(a.token, fields)).history;
    assert.deepEqual(
      days.map((d: Json) => d.limitReached),
      [false, false, false],
      "626 of 627",
    );
    await setPlanDailyComputeUnitLimit(h, "cu-plan", 626);
    days = (await report(a.token, fields)).history;
    assert.deepEqual(
      days.map((d: Json) => d.limitReached),
      [false, false, true],
      "626 of 626",
    );
    // A requests-only plan again.
    await setPlanDailyComputeUnitLimit(h, "cu-plan", null);
    days = (await report(a.token, fields)).history;
    assert.deepEqual(
      days.map((d: Json) => d.limitReached),
      [false, false, false],
    );
  });

  it("today: compute units from the live counter when there is one, else from the rollups; the plan's compute-unit limit", async () => {
    const fields = "today { count limit computeUnits computeUnitLimit }";
    const day = utcDayKey(now);
    await h.redis.del(h.names.quotaDay(a.workspaceId, day), h.names.computeUnitQuotaDay(a.workspaceId, day));
    // No counters: served requests / compute units of today's day rollup (Too Many Requests excluded).
    assert.deepEqual((await report(a.token, fields)).today, {
      count: 27,
      limit: 1000,
      computeUnits: 626,
      computeUnitLimit: null,
    });
    await setPlanDailyComputeUnitLimit(h, "cu-plan", 50_000);
    await h.redis.set(h.names.quotaDay(a.workspaceId, day), "40");
    await h.redis.set(h.names.computeUnitQuotaDay(a.workspaceId, day), "1234");
    assert.deepEqual((await report(a.token, fields)).today, {
      count: 40,
      limit: 1000,
      computeUnits: 1234,
      computeUnitLimit: 50_000,
    });
    // Workspace.today is the same resolver.
    const w = await h.ok(`{ workspace { ${fields} } }`, {}, a.token);
    assert.equal(w.workspace.today.computeUnits, 1234);
    // The request counter alone (the data plane keeps no compute-unit counter for a requests-only plan).
    await h.redis.del(h.names.computeUnitQuotaDay(a.workspaceId, day));
    assert.deepEqual((await report(a.token, fields)).today, {
      count: 40,
      limit: 1000,
      computeUnits: 626,
      computeUnitLimit: 50_000,
    });
    await setPlanDailyComputeUnitLimit(h, "cu-plan", null);
  });

  it("tenant isolation: compute units of another workspace are never counted nor reachable", async () => {
    const q = "requests24h { total computeUnits } methods { method computeUnits } today { computeUnits }";
    const own = await report(b.token, q);
    assert.deepEqual(own.requests24h, { total: 7, computeUnits: 182 });
    assert.deepEqual(own.methods, [{ method: "eth_call", computeUnits: 182 }]);
    assert.equal(own.today.computeUnits, 182);
    const gq = `query($f: UsageFilter!) { usage(filter: $f) { ${q} } }`;
    assert.equal(code(await h.gql(gq, { f: { appId: alpha.id } }, b.token)), "NOT_FOUND");
    assert.equal(code(await h.gql(gq, { f: { workspaceId: a.workspaceId } }, b.token)), "NOT_FOUND");
    assert.equal(code(await h.gql(gq, { f: {} })), "UNAUTHENTICATED");
    // The operator names the workspace.
    const op = await report(ADMIN_TOKEN, "requests24h { computeUnits }", { workspaceId: b.workspaceId });
    assert.equal(op.requests24h.computeUnits, 182);
  });

  it("platformUsage: compute units across every workspace, operator only", async () => {
    const q =
      "{ platformUsage { requests computeUnits series { computeUnits } byWorkspace { workspaceId requests computeUnits } } }";
    const u = (await h.ok(q, {}, ADMIN_TOKEN)).platformUsage;
    assert.equal(sum(u.series.map((p: Json) => p.computeUnits)), u.computeUnits);
    const ofA = u.byWorkspace.find((w: Json) => w.workspaceId === a.workspaceId);
    const ofB = u.byWorkspace.find((w: Json) => w.workspaceId === b.workspaceId);
    assert.deepEqual(ofA, { workspaceId: a.workspaceId, requests: 30, computeUnits: 704 });
    assert.deepEqual(ofB, { workspaceId: b.workspaceId, requests: 7, computeUnits: 182 });
    assert.equal(code(await h.gql(q, {}, a.token)), "FORBIDDEN");
  });
});

describe("control-plane: the usage compute-units migration", () => {
  let db: TestDatabase;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db?.drop();
  });

  it("backfills every existing rollup row with its request count (weight 1), and down() goes back", async () => {
    const at = MIGRATIONS.indexOf(UsageComputeUnits1700000025200);
    assert.ok(at > 0);
    const old = new DataSource({
      ...createDataSource(db.url).options,
      migrations: MIGRATIONS.slice(0, at),
    } as DataSourceOptions);
    await old.initialize();
    try {
      await migrate(old);
      const ws = "11111111-1111-1111-1111-111111111111";
      const nil = "00000000-0000-0000-0000-000000000000";
      for (const [table, col, v] of [
        ["usage_minute", "minute", "2026-01-02T03:04:00Z"],
        ["usage_hour", "hour", "2026-01-02T03:00:00Z"],
        ["usage_day", "day", "2026-01-02"],
      ]) {
        await old.query(
          `INSERT INTO ${table} (${col}, workspace_id, app_id, network, method, category, count, latency_sum_ms)
           VALUES ($1, $2, $3, 'eth', 'eth_call', 'Success', 41, 0), ($1, $2, $3, 'eth', 'eth_getLogs', 'Success', 7, 0)`,
          [v, ws, nil],
        );
      }
    } finally {
      await old.destroy();
    }
    const ds = createDataSource(db.url);
    await ds.initialize();
    try {
      const applied = await migrate(ds);
      assert.ok(applied.includes("UsageComputeUnits1700000025200"), applied.join(","));
      for (const table of ["usage_minute", "usage_hour", "usage_day"]) {
        assert.deepEqual(
          await ds.query(
            `SELECT method, count::int AS c, compute_units::int AS cu FROM ${table} ORDER BY method`,
          ),
          [
            { method: "eth_call", c: 41, cu: 41 },
            { method: "eth_getLogs", c: 7, cu: 7 },
          ],
          table,
        );
      }
      const runner = ds.createQueryRunner();
      try {
        await new UsageComputeUnits1700000025200().down(runner);
        const cols = await ds.query(
          `SELECT count(*)::int AS n FROM information_schema.columns WHERE column_name = 'compute_units' AND table_name LIKE 'usage_%'`,
        );
        assert.equal(cols[0].n, 0);
        await new UsageComputeUnits1700000025200().up(runner);
      } finally {
        await runner.release();
      }
    } finally {
      await ds.destroy();
    }
  });
});
