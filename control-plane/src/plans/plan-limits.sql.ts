import type { DataSource } from "typeorm";
import { notFound } from "../common/errors";

/**
 * SQL expressions over a `plans` row aliased `p`: the plan's daily request limit and its daily / monthly
 * compute-unit limits (PlanLimits.dailyComputeUnitLimit / monthlyComputeUnitLimit; null = the plan does not
 * limit compute units). The compute-unit limits are read through `to_jsonb(p)` so a query stays valid on
 * a schema where the plans table has no such column yet (the limit then reads as null: requests only).
 */
export const PLAN_DAILY_REQUEST_LIMIT_SQL = "p.daily_request_limit::float8";
export const PLAN_DAILY_CU_LIMIT_SQL = "(to_jsonb(p) ->> 'daily_compute_unit_limit')::float8";
export const PLAN_MONTHLY_CU_LIMIT_SQL = "(to_jsonb(p) ->> 'monthly_compute_unit_limit')::float8";

/** A workspace's daily limits in both units. */
export interface DailyLimits {
  requests: number;
  /** Null: the plan does not limit compute units per day. */
  computeUnits: number | null;
}

/** The daily limits of the workspace's current plan; NOT_FOUND when the workspace does not exist. */
export async function workspaceDailyLimits(ds: DataSource, workspaceId: string): Promise<DailyLimits> {
  const rows: { req: number; cu: number | null }[] = await ds.query(
    `SELECT ${PLAN_DAILY_REQUEST_LIMIT_SQL} AS req, ${PLAN_DAILY_CU_LIMIT_SQL} AS cu
     FROM workspaces w JOIN plans p ON p.id = w.plan_id WHERE w.id = $1`,
    [workspaceId],
  );
  const row = rows[0];
  if (!row) throw notFound("Workspace");
  return { requests: Number(row.req), computeUnits: row.cu === null ? null : Number(row.cu) };
}
