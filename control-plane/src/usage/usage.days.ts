import type { DataSource } from "typeorm";
import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import { nextUtcMidnightMs, utcDayKey } from "../../../shared/src/quota/day";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import { badInput } from "../common/errors";
import { workspaceDailyLimits } from "../plans/plan-limits.sql";
import type { UsageQueryLimits } from "./usage.service";
import type { TodayUsage, UsageDay, UsageReport } from "./usage.types";

const DAY = 86_400_000;

// biome-ignore lint/suspicious/noExplicitAny: raw pg rows
type Row = Record<string, any>;

/**
 * Per UTC day (oldest first, today last) with a per-app breakdown, in requests and compute units.
 * `limitReached`: the workspace's served requests that day (every category but Too Many Requests, i.e.
 * what the daily limiter admitted) reached the plan's daily request limit, or their compute units reached
 * its daily compute-unit limit when it has one. The current plan's limits are used (plan history is not
 * kept).
 */
export async function usageHistory(
  ds: DataSource,
  r: UsageReport,
  days: number,
  limits: UsageQueryLimits,
  nowMs: number,
): Promise<UsageDay[]> {
  const maxDays = Math.min(limits.maxRangeDays, limits.maxSeriesPoints);
  if (!Number.isInteger(days) || days < 1 || days > maxDays) {
    throw badInput("days", `days must be 1..${maxDays} (the usage range is limited to ${maxDays} days)`);
  }
  const today = Math.floor(nowMs / DAY) * DAY;
  const first = today - (days - 1) * DAY;
  const firstKey = new Date(first).toISOString().slice(0, 10);
  const params: unknown[] = [r.workspaceId, firstKey, ErrorCategory.TooManyRequests];
  let match = "true";
  if (r.appId) {
    params.push(r.appId);
    match = `app_id = $${params.length}`;
  }
  if (r.network) {
    params.push(r.network);
    match += ` AND network = $${params.length}`;
  }
  // One scan of the workspace's day rows: the filtered breakdown, and the unfiltered served counts.
  const rows: Row[] = await ds.query(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day, app_id,
            (coalesce(sum(count) FILTER (WHERE ${match}), 0))::float8 AS total,
            (coalesce(sum(compute_units) FILTER (WHERE ${match}), 0))::float8 AS total_cu,
            (coalesce(sum(count) FILTER (WHERE category <> $3), 0))::float8 AS served,
            (coalesce(sum(compute_units) FILTER (WHERE category <> $3), 0))::float8 AS served_cu
     FROM usage_day WHERE workspace_id = $1 AND day >= $2::date
     GROUP BY day, app_id`,
    params,
  );
  const limit = await workspaceDailyLimits(ds, r.workspaceId);
  const appIds = [...new Set(rows.map((x) => x.app_id as string))];
  const names = new Map<string, string>();
  if (appIds.length > 0) {
    const apps: Row[] = await ds.query("SELECT id, name FROM apps WHERE id = ANY($1::uuid[])", [appIds]);
    for (const a of apps) names.set(a.id, a.name);
  }
  type Day = UsageDay & { served: number; servedCu: number };
  const byDay = new Map<string, Day>();
  for (let t = first; t <= today; t += DAY) {
    const date = new Date(t).toISOString().slice(0, 10);
    byDay.set(date, {
      date,
      total: 0,
      computeUnits: 0,
      byApp: [],
      limitReached: false,
      served: 0,
      servedCu: 0,
    });
  }
  for (const row of rows) {
    const d = byDay.get(row.day);
    if (!d) continue;
    const total = Number(row.total);
    const totalCu = Number(row.total_cu);
    d.served += Number(row.served);
    d.servedCu += Number(row.served_cu);
    if (total > 0 || totalCu > 0) {
      d.total += total;
      d.computeUnits += totalCu;
      d.byApp.push({
        app: { id: row.app_id, name: names.get(row.app_id) ?? "(deleted app)" },
        count: total,
        computeUnits: totalCu,
      });
    }
  }
  return [...byDay.values()].map(({ served, servedCu, ...d }) => {
    d.byApp.sort((a, b) => b.count - a.count || a.app.name.localeCompare(b.app.name));
    const cuReached = limit.computeUnits !== null && servedCu >= limit.computeUnits;
    return { ...d, limitReached: served >= limit.requests || cuReached };
  });
}

/** A live counter's value; null when the key is absent, not a number, or Redis fails. */
function counter(v: string | null | undefined): number | null {
  return v !== null && v !== undefined && Number.isFinite(Number(v)) ? Number(v) : null;
}

/**
 * Today's usage against the daily limits, in both units. Reads the data plane's live daily counters in
 * Redis (RedisNames.quotaDay, and computeUnitQuotaDay which it keeps while the plan limits compute units:
 * what the limiter enforces); a counter that is absent, or Redis failing, falls back to today's served
 * requests / compute units in usage_day (lags by the flush + ingestion delay).
 */
export async function todayUsage(
  deps: { ds: DataSource; redis: RedisClient; names: RedisNames },
  workspaceId: string,
  nowMs: number,
): Promise<TodayUsage> {
  const limit = await workspaceDailyLimits(deps.ds, workspaceId);
  const day = utcDayKey(nowMs);
  let count: number | null = null;
  let computeUnits: number | null = null;
  try {
    // One slot ({workspaceId}): one MGET on a cluster too.
    const [req, cu] = await deps.redis.mget(
      deps.names.quotaDay(workspaceId, day),
      deps.names.computeUnitQuotaDay(workspaceId, day),
    );
    count = counter(req);
    computeUnits = counter(cu);
  } catch {
    // Redis away: both from Postgres below.
  }
  if (count === null || computeUnits === null) {
    const rows: Row[] = await deps.ds.query(
      `SELECT coalesce(sum(count), 0)::float8 AS c, coalesce(sum(compute_units), 0)::float8 AS cu
       FROM usage_day WHERE workspace_id = $1 AND day = $2::date AND category <> $3`,
      [workspaceId, day, ErrorCategory.TooManyRequests],
    );
    count ??= Number(rows[0]?.c ?? 0);
    computeUnits ??= Number(rows[0]?.cu ?? 0);
  }
  return {
    count,
    limit: limit.requests,
    computeUnits,
    computeUnitLimit: limit.computeUnits,
    resetsAt: new Date(nextUtcMidnightMs(nowMs)),
  };
}
