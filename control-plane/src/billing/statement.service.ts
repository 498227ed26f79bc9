import { DataSource } from "typeorm";
import { RequestContext } from "../auth/context";
import { badInput, isUuid } from "../common/errors";
import { requirePlatformOperator } from "../operator/operator.service";
import { PLAN_DAILY_CU_LIMIT_SQL, PLAN_MONTHLY_CU_LIMIT_SQL } from "../plans/plan-limits.sql";
import { NIL_UUID } from "../usage/usage.sql";
import { Permission } from "../workspaces/roles";
import { WorkspaceService } from "../workspaces/workspace.service";
import { daysOfMonth, parseStatementMonth, StatementMonth } from "./month";
import { add, amountsOf, BILLING_SUMS, type BillingAmounts, entry, zero } from "./rollup-sums";
import {
  StatementAmounts,
  StatementAppTotal,
  StatementDay,
  StatementLine,
  StatementNetworkTotal,
  StatementPlanPeriod,
  UsageStatement,
  UsageStatementPage,
} from "./statement.types";

/** Statements per page of `usageStatements` (default and most). */
export const STATEMENTS_PAGE_DEFAULT = 50;
export const STATEMENTS_PAGE_MAX = 200;

const DAY = 86_400_000;

// biome-ignore lint/suspicious/noExplicitAny: raw pg rows
type Row = Record<string, any>;

const byAmount = (a: StatementAmounts, b: StatementAmounts) =>
  b.requests - a.requests || b.computeUnits - a.computeUnits;

interface PlanRow {
  workspace_id: string;
  plan_id: string;
  name: string;
  daily: number;
  monthly: number | null;
  daily_cu: number | null;
  monthly_cu: number | null;
  rps: number;
  started_at: Date;
  ended_at: Date | null;
}

/**
 * Monthly usage statements (docs/billing.md): one workspace's for its OWNER or ADMIN (Permission.ReadBilling)
 * or the operator, and every workspace's for the operator, a page at a time. Built from usage_day (the
 * rollups the dashboards read, maintained exactly once per usage batch at ingestion) and
 * workspace_plan_periods; one query of each for a whole page of workspaces.
 */
export class StatementService {
  constructor(
    private readonly ds: DataSource,
    private readonly workspaces: WorkspaceService,
    private readonly now: () => number = Date.now,
  ) {}

  async statement(ctx: RequestContext, workspaceId: string | null | undefined, month: string) {
    const access = await this.workspaces.authorize(ctx, workspaceId, Permission.ReadBilling);
    const m = parseStatementMonth(month, this.now());
    const [s] = await this.build([access.workspaceId], m);
    return s!;
  }

  /** Operator: the statements of every workspace that existed during the month, by workspace id. */
  async statements(
    ctx: RequestContext,
    month: string,
    first: number = STATEMENTS_PAGE_DEFAULT,
    after?: string | null,
  ): Promise<UsageStatementPage> {
    requirePlatformOperator(ctx);
    const m = parseStatementMonth(month, this.now());
    if (!Number.isInteger(first) || first < 1 || first > STATEMENTS_PAGE_MAX) {
      throw badInput("first", `first must be 1..${STATEMENTS_PAGE_MAX}`);
    }
    if (after != null && !isUuid(after)) throw badInput("after", "after must be a workspace id (nextCursor)");
    const rows: Row[] = await this.ds.query(
      `SELECT id FROM workspaces WHERE created_at < $1 AND ($2::uuid IS NULL OR id > $2::uuid)
       ORDER BY id LIMIT $3`,
      [new Date(m.toMs), after ?? null, first + 1],
    );
    const ids = rows.slice(0, first).map((r) => r.id as string);
    const page = new UsageStatementPage();
    page.month = m.key;
    page.statements = await this.build(ids, m);
    page.nextCursor = rows.length > first ? ids[ids.length - 1]! : null;
    return page;
  }

  /** The statements of `workspaceIds` (in that order) for month `m`; ids are known to exist. */
  async build(workspaceIds: string[], m: StatementMonth): Promise<UsageStatement[]> {
    if (workspaceIds.length === 0) return [];
    const nowMs = this.now();
    const fromDay = new Date(m.fromMs).toISOString().slice(0, 10);
    const toDay = new Date(m.toMs).toISOString().slice(0, 10);
    const usage: Row[] = await this.ds.query(
      `SELECT workspace_id, to_char(day, 'YYYY-MM-DD') AS day, app_id, network, method,
              ${BILLING_SUMS}
       FROM usage_day WHERE workspace_id = ANY($1::uuid[]) AND day >= $2::date AND day < $3::date
       GROUP BY 1, 2, 3, 4, 5`,
      [workspaceIds, fromDay, toDay],
    );
    // Periods of zero length (two changes in one instant) were never in force.
    const plans: PlanRow[] = await this.ds.query(
      `SELECT pp.workspace_id, pp.plan_id, p.name, p.daily_request_limit::float8 AS daily,
              p.monthly_request_limit::float8 AS monthly, p.requests_per_second AS rps,
              ${PLAN_DAILY_CU_LIMIT_SQL} AS daily_cu, ${PLAN_MONTHLY_CU_LIMIT_SQL} AS monthly_cu, pp.started_at, pp.ended_at
       FROM workspace_plan_periods pp JOIN plans p ON p.id = pp.plan_id
       WHERE pp.workspace_id = ANY($1::uuid[]) AND pp.started_at < $3
         AND (pp.ended_at IS NULL OR (pp.ended_at > $2 AND pp.ended_at > pp.started_at))
       ORDER BY pp.workspace_id, pp.started_at, pp.id`,
      [workspaceIds, new Date(m.fromMs), new Date(m.toMs)],
    );
    const wsRows: Row[] = await this.ds.query(`SELECT id, name FROM workspaces WHERE id = ANY($1::uuid[])`, [
      workspaceIds,
    ]);
    const appIds = [...new Set(usage.map((r) => r.app_id as string).filter((id) => id !== NIL_UUID))];
    const appNames = new Map<string, string>();
    if (appIds.length > 0) {
      const apps: Row[] = await this.ds.query(`SELECT id, name FROM apps WHERE id = ANY($1::uuid[])`, [
        appIds,
      ]);
      for (const a of apps) appNames.set(a.id, a.name);
    }
    const wsNames = new Map<string, string>(wsRows.map((r) => [r.id, r.name]));
    const usageByWs = groupBy(usage, (r) => r.workspace_id as string);
    const plansByWs = groupBy(plans, (r) => r.workspace_id);
    const dates = daysOfMonth(m, nowMs);
    return workspaceIds.map((id) =>
      assemble({
        workspaceId: id,
        workspaceName: wsNames.get(id) ?? "",
        month: m,
        nowMs,
        dates,
        usage: usageByWs.get(id) ?? [],
        plans: plansByWs.get(id) ?? [],
        appNames,
      }),
    );
  }
}

function groupBy<T>(rows: T[], key: (r: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const r of rows) entry(out, key(r), () => [] as T[]).push(r);
  return out;
}

/** A day's amounts while a statement is assembled, and what its daily quota counted. */
interface DayTally {
  date: string;
  amounts: BillingAmounts;
  /** Served request objects and compute units on app keys (dedicated-node traffic is not in the quota). */
  quotaRequests: number;
  quotaComputeUnits: number;
}

function dayTally(date: string): DayTally {
  return { date, amounts: zero(), quotaRequests: 0, quotaComputeUnits: 0 };
}

function lowest(current: number | null, v: number): number {
  return current === null ? v : Math.min(current, v);
}

/** One statement from its workspace's rows (pure: unit-tested on its own). */
export function assemble(input: {
  workspaceId: string;
  workspaceName: string;
  month: StatementMonth;
  nowMs: number;
  dates: string[];
  usage: Row[];
  plans: PlanRow[];
  appNames: Map<string, string>;
}): UsageStatement {
  const { month: m, nowMs } = input;
  const s = Object.assign(new UsageStatement(), zero());
  s.workspaceId = input.workspaceId;
  s.workspaceName = input.workspaceName;
  s.month = m.key;
  s.from = new Date(m.fromMs);
  s.to = new Date(m.toMs);
  s.complete = m.complete;
  const lines = new Map<string, StatementLine>();
  const apps = new Map<string, StatementAppTotal>();
  const networks = new Map<string, StatementNetworkTotal>();
  const days = new Map<string, DayTally>();
  for (const date of input.dates) days.set(date, dayTally(date));
  for (const r of input.usage) {
    const a = amountsOf(r);
    const appId = r.app_id === NIL_UUID ? null : (r.app_id as string);
    const appName = appId === null ? null : (input.appNames.get(appId) ?? "(deleted app)");
    const lineKey = `${r.app_id}|${r.network}|${r.method}`;
    const line = entry(lines, lineKey, () =>
      Object.assign(new StatementLine(), zero(), { appId, appName, network: r.network, method: r.method }),
    );
    add(line, a);
    add(
      entry(apps, r.app_id, () => Object.assign(new StatementAppTotal(), zero(), { appId, appName })),
      a,
    );
    add(
      entry(networks, r.network, () =>
        Object.assign(new StatementNetworkTotal(), zero(), { network: r.network }),
      ),
      a,
    );
    add(s, a);
    // A day past "now" (clock skew between the rollups' writer and this process) is still counted.
    const day = entry(days, r.day, () => dayTally(r.day));
    add(day.amounts, a);
    // The daily quota counts app-key traffic only (dedicated-node endpoints have their own limits).
    if (appId !== null) {
      day.quotaRequests += a.servedRequests;
      day.quotaComputeUnits += a.servedComputeUnits;
    }
  }
  s.plans = input.plans.map((p) => {
    const period = new StatementPlanPeriod();
    period.planId = p.plan_id;
    period.name = p.name;
    period.from = new Date(Math.max(m.fromMs, new Date(p.started_at).getTime()));
    const end = p.ended_at === null ? nowMs : new Date(p.ended_at).getTime();
    period.to = new Date(Math.max(period.from.getTime(), Math.min(m.toMs, end)));
    period.dailyRequestLimit = Number(p.daily);
    period.monthlyRequestLimit = p.monthly === null ? null : Number(p.monthly);
    period.requestsPerSecond = Number(p.rps);
    period.dailyComputeUnitLimit = p.daily_cu === null ? null : Number(p.daily_cu);
    period.monthlyComputeUnitLimit = p.monthly_cu === null ? null : Number(p.monthly_cu);
    return period;
  });
  const out: StatementDay[] = [];
  for (const t of [...days.values()].sort((x, y) => x.date.localeCompare(y.date))) {
    const start = Date.parse(`${t.date}T00:00:00Z`);
    // The strictest limit of each unit among the plans in force at any moment of the day.
    let requests: number | null = null;
    let computeUnits: number | null = null;
    for (const p of input.plans) {
      const from = new Date(p.started_at).getTime();
      const to = p.ended_at === null ? Number.POSITIVE_INFINITY : new Date(p.ended_at).getTime();
      if (from >= start + DAY || to <= start) continue;
      requests = lowest(requests, Number(p.daily));
      if (p.daily_cu !== null) computeUnits = lowest(computeUnits, Number(p.daily_cu));
    }
    const day = Object.assign(new StatementDay(), t.amounts, {
      date: t.date,
      dailyRequestLimit: requests,
      dailyComputeUnitLimit: computeUnits,
      overLimit:
        (requests !== null && t.quotaRequests >= requests) ||
        (computeUnits !== null && t.quotaComputeUnits >= computeUnits),
    });
    out.push(day);
  }
  s.days = out;
  s.daysOverLimit = out.filter((d) => d.overLimit).map((d) => d.date);
  s.lines = [...lines.values()].sort(
    (a, b) =>
      byAmount(a, b) ||
      (a.appName ?? "").localeCompare(b.appName ?? "") ||
      a.network.localeCompare(b.network) ||
      a.method.localeCompare(b.method),
  );
  s.byApp = [...apps.values()].sort(
    (a, b) => byAmount(a, b) || (a.appName ?? "").localeCompare(b.appName ?? ""),
  );
  s.byNetwork = [...networks.values()].sort((a, b) => byAmount(a, b) || a.network.localeCompare(b.network));
  return s;
}
