import type { DataSource } from "typeorm";
import { nextUtcMidnightMs, utcDayKey } from "../../../shared/src/quota/day";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import { PLAN_DAILY_CU_LIMIT_SQL, PLAN_DAILY_REQUEST_LIMIT_SQL } from "../plans/plan-limits.sql";
import type { WebhookEmitter } from "./webhook.emitter";
import { QUOTA_THRESHOLDS_PERCENT, type QuotaUnit, WebhookEventType } from "./webhook.types";

/** A marker outlives its UTC day, so a check late in the day still finds it; then it expires. */
const MARKER_TTL_SECONDS = 2 * 86_400;
/** Counters read per MGET. */
const MGET_BATCH = 500;

type Deps = { ds: DataSource; redis: RedisClient; names: RedisNames; emitter: WebhookEmitter };

/** One workspace's daily counter in one unit, against that unit's daily limit. */
interface Check {
  workspaceId: string;
  unit: QuotaUnit;
  limit: number;
  counterKey: string;
}

/**
 * One pass of the quota-threshold check (JobName.WebhookQuotaCheck). For every workspace with an
 * enabled endpoint subscribed to `quota.threshold`, compares today's counters (what the data plane's
 * daily limiter enforces) with 80% and 100% of the plan's daily limits: requests (`RedisNames.quotaDay`)
 * always, and compute units (`RedisNames.computeUnitQuotaDay`) when the plan has a daily compute-unit
 * limit. Each event says its `unit`. A threshold reached is emitted only by whoever sets its marker first
 * (SET NX, per workspace, UTC day, threshold and unit), so it fires once per day across worker restarts and
 * several workers; a marker whose event could not be queued is removed, and the next pass tries again.
 * Returns the events emitted.
 */
export async function checkQuotaThresholds(deps: Deps, nowMs: number = Date.now()): Promise<number> {
  const rows: { workspace_id: string; lim: number; cu_lim: number | null }[] = await deps.ds.query(
    `SELECT DISTINCT e.workspace_id, ${PLAN_DAILY_REQUEST_LIMIT_SQL} AS lim, ${PLAN_DAILY_CU_LIMIT_SQL} AS cu_lim
     FROM webhook_endpoints e JOIN workspaces w ON w.id = e.workspace_id JOIN plans p ON p.id = w.plan_id
     WHERE e.enabled AND $1 = ANY(e.event_types)`,
    [WebhookEventType.QUOTA_THRESHOLD],
  );
  const day = utcDayKey(nowMs);
  const checks: Check[] = [];
  for (const r of rows) {
    checks.push({
      workspaceId: r.workspace_id,
      unit: "requests",
      limit: Number(r.lim),
      counterKey: deps.names.quotaDay(r.workspace_id, day),
    });
    if (r.cu_lim !== null) {
      checks.push({
        workspaceId: r.workspace_id,
        unit: "computeUnits",
        limit: Number(r.cu_lim),
        counterKey: deps.names.computeUnitQuotaDay(r.workspace_id, day),
      });
    }
  }
  const resetsAt = new Date(nextUtcMidnightMs(nowMs)).toISOString();
  let emitted = 0;
  for (let i = 0; i < checks.length; i += MGET_BATCH) {
    const batch = checks.slice(i, i + MGET_BATCH);
    const counts = await deps.redis.mget(...batch.map((c) => c.counterKey));
    for (const [j, c] of batch.entries()) {
      const used = Number(counts[j] ?? 0);
      for (const pct of QUOTA_THRESHOLDS_PERCENT) {
        // Integers: used / limit >= pct / 100 without rounding.
        if (used * 100 < c.limit * pct) continue;
        const marker = deps.names.webhookQuotaMarker(c.workspaceId, day, pct, c.unit);
        if ((await deps.redis.set(marker, String(nowMs), "EX", MARKER_TTL_SECONDS, "NX")) !== "OK") continue;
        const queued = await deps.emitter.emit(c.workspaceId, WebhookEventType.QUOTA_THRESHOLD, {
          thresholdPercent: pct,
          unit: c.unit,
          day,
          used,
          limit: c.limit,
          resetsAt,
        });
        if (queued) emitted++;
        else await deps.redis.del(marker);
      }
    }
  }
  return emitted;
}
