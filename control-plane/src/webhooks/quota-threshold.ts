import type { DataSource } from "typeorm";
import { nextUtcMidnightMs, utcDayKey } from "../../../shared/src/quota/day";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import type { WebhookEmitter } from "./webhook.emitter";
import { QUOTA_THRESHOLDS_PERCENT, WebhookEventType } from "./webhook.types";

/** A marker outlives its UTC day, so a check late in the day still finds it; then it expires. */
const MARKER_TTL_SECONDS = 2 * 86_400;
/** Counters read per MGET. */
const MGET_BATCH = 500;

/**
 * One pass of the quota-threshold check (JobName.WebhookQuotaCheck). For every workspace with an
 * enabled endpoint subscribed to `quota.threshold`, compares today's counter (the data plane's
 * `RedisNames.quotaDay`, what its daily limiter enforces) with 80% and 100% of the plan's daily limit.
 * A threshold reached is emitted only by whoever sets its marker first (SET NX, per workspace, UTC day and
 * threshold), so it fires once per day across worker restarts and several workers; a marker whose event
 * could not be queued is removed, and the next pass tries again. Returns the events emitted.
 */
export async function checkQuotaThresholds(
  deps: { ds: DataSource; redis: RedisClient; names: RedisNames; emitter: WebhookEmitter },
  nowMs: number = Date.now(),
): Promise<number> {
  const rows: { workspace_id: string; lim: number }[] = await deps.ds.query(
    `SELECT DISTINCT e.workspace_id, p.daily_request_limit::float8 AS lim
     FROM webhook_endpoints e JOIN workspaces w ON w.id = e.workspace_id JOIN plans p ON p.id = w.plan_id
     WHERE e.enabled AND $1 = ANY(e.event_types)`,
    [WebhookEventType.QUOTA_THRESHOLD],
  );
  const day = utcDayKey(nowMs);
  const resetsAt = new Date(nextUtcMidnightMs(nowMs)).toISOString();
  let emitted = 0;
  for (let i = 0; i < rows.length; i += MGET_BATCH) {
    const batch = rows.slice(i, i + MGET_BATCH);
    const counts = await deps.redis.mget(...batch.map((r) => deps.names.quotaDay(r.workspace_id, day)));
    for (const [j, row] of batch.entries()) {
      const used = Number(counts[j] ?? 0);
      for (const pct of QUOTA_THRESHOLDS_PERCENT) {
        // Integers: used / limit >= pct / 100 without rounding.
        if (used * 100 < row.lim * pct) continue;
        const marker = deps.names.webhookQuotaMarker(row.workspace_id, day, pct);
        if ((await deps.redis.set(marker, String(nowMs), "EX", MARKER_TTL_SECONDS, "NX")) !== "OK") continue;
        const queued = await deps.emitter.emit(row.workspace_id, WebhookEventType.QUOTA_THRESHOLD, {
          thresholdPercent: pct,
          day,
          used,
          limit: row.lim,
          resetsAt,
        });
        if (queued) emitted++;
        else await deps.redis.del(marker);
      }
    }
  }
  return emitted;
}
