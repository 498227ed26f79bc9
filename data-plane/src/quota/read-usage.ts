import { nextUtcMidnightMs, utcDayKey, utcMonthKey } from "../../../shared/src/quota/day";
import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";

export interface WorkspaceUsage {
  /** Response units counted today (UTC) across every data-plane instance (up to one flush behind). */
  count: number;
  /** Epoch ms of the next 00:00 UTC. */
  resetsAtMs: number;
  dayKey: string;
  monthCount: number;
}

/**
 * Today's (and this month's) count for one workspace, straight from Redis. The control plane builds the
 * same key names from `RedisNames.quotaDay` + `utcDayKey`; this is the data plane's (and tests') reader.
 */
export async function readWorkspaceUsage(
  redis: RedisClient,
  names: RedisNames,
  workspaceId: string,
  nowMs: number = Date.now(),
): Promise<WorkspaceUsage> {
  const dayKey = utcDayKey(nowMs);
  // One MGET: both keys carry the {workspaceId} tag (one Redis Cluster slot).
  const [day, month] = await redis.mget(
    names.quotaDay(workspaceId, dayKey),
    names.quotaMonth(workspaceId, utcMonthKey(nowMs)),
  );
  return {
    count: Number(day ?? 0),
    resetsAtMs: nextUtcMidnightMs(nowMs),
    dayKey,
    monthCount: Number(month ?? 0),
  };
}
