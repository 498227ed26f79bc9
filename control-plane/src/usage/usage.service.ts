import { DataSource } from "typeorm";
import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { quantileFromBuckets } from "../../../shared/src/usage/contract";
import { RequestContext } from "../auth/context";
import { badInput, notFound } from "../common/errors";
import { Permission } from "../workspaces/roles";
import { WorkspaceService } from "../workspaces/workspace.service";
import { todayUsage, usageHistory } from "./usage.days";
import { BUCKET_COLUMNS } from "./usage.sql";
import {
  ErrorBreakdown,
  MethodSort,
  MethodUsage,
  RequestsSummary,
  ResponseTime,
  SortOrder,
  TodayUsage,
  UsageDay,
  UsageFilter,
  UsageReport,
  UsageSeriesPoint,
} from "./usage.types";

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** Ranges up to this long are served from usage_hour with an hourly series; longer ones from usage_day. */
const MAX_HOURLY_RANGE_MS = 7 * DAY;
const NETWORK_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;

const SUM_BUCKETS = BUCKET_COLUMNS.map((c) => `sum(${c})::float8 AS ${c}`).join(", ");

// biome-ignore lint/suspicious/noExplicitAny: raw pg rows
type Row = Record<string, any>;

function bucketsOf(r: Row): number[] {
  return BUCKET_COLUMNS.map((c) => Number(r[c] ?? 0));
}

function round(v: number | null): number | null {
  return v === null ? null : Math.round(v * 1000) / 1000;
}

function latencyStats(count: number, latencySum: number, buckets: number[]) {
  return {
    p50: round(quantileFromBuckets(buckets, 0.5)),
    p95: round(quantileFromBuckets(buckets, 0.95)),
    avg: count > 0 ? round(latencySum / count) : null,
  };
}

/** The ErrorBreakdown / UsageSeriesPoint field of a stored category (null: Success). */
function categoryKey(category: ErrorCategory): keyof ErrorBreakdown | null {
  switch (category) {
    case ErrorCategory.Success:
      return null;
    case ErrorCategory.ServiceError:
      return "serviceError";
    case ErrorCategory.NodeError:
      return "nodeError";
    case ErrorCategory.ClientError:
      return "clientError";
    case ErrorCategory.TooManyRequests:
      return "tooManyRequests";
    default:
      return "unknownError";
  }
}

function emptyBreakdown(): ErrorBreakdown {
  return { serviceError: 0, nodeError: 0, clientError: 0, tooManyRequests: 0, unknownError: 0 };
}

function emptyPoint(at: number): UsageSeriesPoint {
  return { at: new Date(at), success: 0, errors: 0, computeUnits: 0, ...emptyBreakdown() };
}

/** Caps on what one usage query may ask for (USAGE_MAX_RANGE_DAYS, USAGE_MAX_SERIES_POINTS). */
export interface UsageQueryLimits {
  /** Longest `from`..`to` range, and most `history(days:)`. */
  maxRangeDays: number;
  /** Most points in one series (`requests24h.series`, `history`). */
  maxSeriesPoints: number;
}

export const DEFAULT_USAGE_QUERY_LIMITS: UsageQueryLimits = { maxRangeDays: 400, maxSeriesPoints: 500 };

/** Points of the series of [from, to): hourly up to 7 days, else per UTC day (as `where` reads them). */
function seriesPoints(from: number, to: number): number {
  const step = to - from <= MAX_HOURLY_RANGE_MS ? HOUR : DAY;
  return Math.ceil((to - Math.floor(from / step) * step) / step);
}

/**
 * Usage queries for the dashboard (GraphQL resolvers stay thin). Every query is scoped to one workspace
 * the caller may see (WorkspaceService checks), optionally narrowed to one app of it and one network.
 * Ranges up to 7 days read usage_hour (hour granularity, current hour included: rollups are maintained at
 * ingestion time); longer ranges read usage_day.
 */
export class UsageService {
  constructor(
    private readonly ds: DataSource,
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly workspaces: WorkspaceService,
    private readonly limits: UsageQueryLimits = DEFAULT_USAGE_QUERY_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Resolves and checks the scope: another workspace's workspaceId or appId answers NOT_FOUND. */
  async report(ctx: RequestContext, filter: UsageFilter): Promise<UsageReport> {
    // An app without a workspaceId scopes the report to the app's own workspace (the caller's default
    // workspace may be another one it belongs to).
    let appId: string | null = null;
    let workspaceId: string;
    if (filter.appId != null) {
      const app = await this.workspaces.appForCaller(ctx, filter.appId, Permission.Read);
      if (filter.workspaceId != null && app.workspaceId !== filter.workspaceId) throw notFound("App");
      appId = app.id;
      workspaceId = app.workspaceId;
    } else {
      ({ workspaceId } = await this.workspaces.authorize(ctx, filter.workspaceId ?? null, Permission.Read));
    }
    if (filter.network != null && !NETWORK_RE.test(filter.network))
      throw badInput("network", "Unknown network");
    const now = this.now();
    const to = filter.to ? filter.to.getTime() : now;
    const from = filter.from ? filter.from.getTime() : Math.floor(now / HOUR) * HOUR - 23 * HOUR;
    if (!Number.isFinite(from) || !Number.isFinite(to)) throw badInput("from", "Invalid range");
    if (from >= to) throw badInput("from", "`from` must be before `to`");
    // Caps checked before any query: an unbounded range would build (and send) a point per hour / day.
    const { maxRangeDays, maxSeriesPoints } = this.limits;
    if (to - from > maxRangeDays * DAY) {
      throw badInput(
        "from",
        `The usage range is limited to ${maxRangeDays} days; this one spans ${Math.ceil((to - from) / DAY)} days`,
      );
    }
    const points = seriesPoints(from, to);
    if (points > maxSeriesPoints) {
      throw badInput(
        "to",
        `A usage series is limited to ${maxSeriesPoints} points (hourly up to 7 days, daily beyond); this range needs ${points}`,
      );
    }
    const r = new UsageReport();
    r.workspaceId = workspaceId;
    r.appId = appId;
    r.network = filter.network ?? null;
    r.from = new Date(from);
    r.to = new Date(to);
    return r;
  }

  /** Table, time column and WHERE clause (+ params) of a report's range. */
  private where(r: UsageReport, extra: { method?: string | null } = {}) {
    const hourly = r.to.getTime() - r.from.getTime() <= MAX_HOURLY_RANGE_MS;
    const col = hourly ? "hour" : "day";
    const table = hourly ? "usage_hour" : "usage_day";
    const step = hourly ? HOUR : DAY;
    const start = Math.floor(r.from.getTime() / step) * step;
    const params: unknown[] = [r.workspaceId];
    const conds = ["workspace_id = $1"];
    if (hourly) {
      params.push(new Date(start), r.to);
      conds.push(`hour >= $2 AND hour < $3`);
    } else {
      // `to` is exclusive: the last day is the one holding the instant just before it.
      params.push(
        new Date(start).toISOString().slice(0, 10),
        new Date(r.to.getTime() - 1).toISOString().slice(0, 10),
      );
      conds.push(`day >= $2::date AND day <= $3::date`);
    }
    if (r.appId) {
      params.push(r.appId);
      conds.push(`app_id = $${params.length}`);
    }
    if (r.network) {
      params.push(r.network);
      conds.push(`network = $${params.length}`);
    }
    if (extra.method != null) {
      params.push(extra.method);
      conds.push(`method = $${params.length}`);
    }
    return { hourly, col, table, step, start, params, sql: conds.join(" AND ") };
  }

  async requests(r: UsageReport): Promise<RequestsSummary> {
    const w = this.where(r);
    const rows: Row[] = await this.ds.query(
      `SELECT extract(epoch FROM ${w.col}::timestamp AT TIME ZONE 'UTC')::float8 * 1000 AS at, category,
              sum(count)::float8 AS c, sum(compute_units)::float8 AS cu
       FROM ${w.table} WHERE ${w.sql} GROUP BY 1, 2`,
      w.params,
    );
    const errors: ErrorBreakdown = emptyBreakdown();
    const points = new Map<number, UsageSeriesPoint>();
    for (let t = w.start; t < r.to.getTime(); t += w.step) points.set(t, emptyPoint(t));
    let success = 0;
    let computeUnits = 0;
    for (const row of rows) {
      const c = Number(row.c);
      const at = Number(row.at);
      let p = points.get(at);
      if (!p) {
        p = emptyPoint(at);
        points.set(at, p);
      }
      const cu = Number(row.cu);
      computeUnits += cu;
      p.computeUnits += cu;
      const key = categoryKey(row.category as ErrorCategory);
      if (key === null) {
        success += c;
        p.success += c;
        continue;
      }
      errors[key] += c;
      p[key] += c;
      p.errors += c;
    }
    const errTotal =
      errors.serviceError +
      errors.nodeError +
      errors.clientError +
      errors.tooManyRequests +
      errors.unknownError;
    const series = [...points.values()].sort((a, b) => a.at.getTime() - b.at.getTime());
    return { total: success + errTotal, computeUnits, success, errors, series };
  }

  async responseTime(r: UsageReport, method?: string | null): Promise<ResponseTime> {
    const w = this.where(r, { method });
    const rows: Row[] = await this.ds.query(
      `SELECT coalesce(sum(count), 0)::float8 AS count, coalesce(sum(latency_sum_ms), 0)::float8 AS lat, ${SUM_BUCKETS}
       FROM ${w.table} WHERE ${w.sql}`,
      w.params,
    );
    const row = rows[0] ?? {};
    return latencyStats(Number(row.count ?? 0), Number(row.lat ?? 0), bucketsOf(row));
  }

  async methods(
    r: UsageReport,
    sortBy: MethodSort = MethodSort.REQUESTS,
    order: SortOrder = SortOrder.DESC,
  ): Promise<MethodUsage[]> {
    const w = this.where(r);
    const rows: Row[] = await this.ds.query(
      `SELECT method, sum(count)::float8 AS requests, sum(compute_units)::float8 AS cu,
              (coalesce(sum(count) FILTER (WHERE category <> $${w.params.length + 1}), 0))::float8 AS errors,
              sum(latency_sum_ms)::float8 AS lat, ${SUM_BUCKETS}
       FROM ${w.table} WHERE ${w.sql} GROUP BY method`,
      [...w.params, ErrorCategory.Success],
    );
    const out: MethodUsage[] = rows.map((row) => {
      const requests = Number(row.requests);
      return {
        method: row.method as string,
        requests,
        computeUnits: Number(row.cu),
        errors: Number(row.errors),
        ...latencyStats(requests, Number(row.lat), bucketsOf(row)),
      };
    });
    const key: (m: MethodUsage) => number = {
      [MethodSort.REQUESTS]: (m: MethodUsage) => m.requests,
      [MethodSort.COMPUTE_UNITS]: (m: MethodUsage) => m.computeUnits,
      [MethodSort.ERRORS]: (m: MethodUsage) => m.errors,
      [MethodSort.P50]: (m: MethodUsage) => m.p50 ?? -1,
      [MethodSort.P95]: (m: MethodUsage) => m.p95 ?? -1,
      [MethodSort.AVG]: (m: MethodUsage) => m.avg ?? -1,
    }[sortBy];
    const dir = order === SortOrder.ASC ? 1 : -1;
    out.sort((a, b) => dir * (key(a) - key(b)) || a.method.localeCompare(b.method));
    return out;
  }

  /** Per UTC day (oldest first, today last) with a per-app breakdown, in both units (usage.days.ts). */
  history(r: UsageReport, days = 30): Promise<UsageDay[]> {
    return usageHistory(this.ds, r, days, this.limits, this.now());
  }

  /** Today's usage against the daily limits, in both units (usage.days.ts). */
  today(workspaceId: string): Promise<TodayUsage> {
    return todayUsage({ ds: this.ds, redis: this.redis, names: this.names }, workspaceId, this.now());
  }
}
