/**
 * UTC calendar helpers for daily and monthly quotas (docs/contracts.md#how-requests-count: the day is the
 * UTC day). Both planes use these so the data plane counts into, and the control plane reads from, the same
 * Redis key (`RedisNames.quotaDay` / `quotaMonth`). Pure functions of epoch milliseconds.
 */

const DAY_MS = 86_400_000;

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/** `YYYY-MM-DD` of the UTC day containing `nowMs`. */
export function utcDayKey(nowMs: number): string {
  const d = new Date(nowMs);
  return `${d.getUTCFullYear()}-${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())}`;
}

/** `YYYY-MM` of the UTC month containing `nowMs`. */
export function utcMonthKey(nowMs: number): string {
  const d = new Date(nowMs);
  return `${d.getUTCFullYear()}-${pad2(d.getUTCMonth() + 1)}`;
}

/** Epoch ms of 00:00 UTC of the UTC day containing `nowMs`. */
export function utcDayStartMs(nowMs: number): number {
  return Math.floor(nowMs / DAY_MS) * DAY_MS;
}

/** Epoch ms of the next 00:00 UTC after `nowMs` (when today's count resets). */
export function nextUtcMidnightMs(nowMs: number): number {
  return utcDayStartMs(nowMs) + DAY_MS;
}

/** Epoch ms of 00:00 UTC on the first day of the next UTC month (when the monthly count resets). */
export function nextUtcMonthStartMs(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}
