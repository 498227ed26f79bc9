import type { RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";

/** Response units a workspace used on one UTC day (and so in that day's month). */
export interface QuotaDelta {
  readonly dayKey: string;
  readonly monthKey: string;
  readonly units: number;
}

/** Global counts of the period a flush asked about. */
export interface QuotaTotals {
  readonly dayCount: number;
  readonly monthCount: number;
}

/** Where quota counts are shared between instances. */
export interface QuotaStore {
  /**
   * Adds `deltas` to the workspace's day and month counters and returns the totals of `dayKey` /
   * `monthKey`. Idempotent per (`instanceId`, workspace, `seq`): a batch re-sent after an ambiguous
   * failure is counted once. `seq` 0 with no deltas only reads. Rejects when the store is unreachable.
   */
  apply(
    workspaceId: string,
    instanceId: string,
    seq: number,
    deltas: readonly QuotaDelta[],
    dayKey: string,
    monthKey: string,
  ): Promise<QuotaTotals>;
}

const DAY_MS = 86_400_000;

// KEYS: seq, current day, current month, then (day, month) per delta. ARGV: seq, seqTtlMs, dayTtlMs,
// monthTtlMs, then units per delta. All keys share the {workspaceId} tag: one slot.
const APPLY_SCRIPT = `
local seq = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if seq > last then
  for i = 4, #KEYS, 2 do
    local u = tonumber(ARGV[5 + (i - 4) / 2])
    if u > 0 then
      redis.call('INCRBY', KEYS[i], u)
      redis.call('PEXPIRE', KEYS[i], ARGV[3])
      redis.call('INCRBY', KEYS[i + 1], u)
      redis.call('PEXPIRE', KEYS[i + 1], ARGV[4])
    end
  end
  redis.call('SET', KEYS[1], seq, 'PX', ARGV[2])
end
return {tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(redis.call('GET', KEYS[3]) or '0')}
`;

type ApplyCommand = (numKeys: number, ...args: Array<string | number>) => Promise<[number, number]>;

/** Where one counted subject's counters live (a workspace's by default; an app's for app caps). */
export interface QuotaKeys {
  seq(id: string, instanceId: string): string;
  day(id: string, dayKey: string): string;
  month(id: string, monthKey: string): string;
}

/** The workspace quota's keys: `quota:{workspaceId}:...`. */
export function workspaceQuotaKeys(names: RedisNames): QuotaKeys {
  return {
    seq: (id, instanceId) => names.quotaFlushSeq(id, instanceId),
    day: (id, dayKey) => names.quotaDay(id, dayKey),
    month: (id, monthKey) => names.quotaMonth(id, monthKey),
  };
}

/** The app daily caps' keys: `quota:{app:appId}:...` (the tracker's ids are app ids). */
export function appQuotaKeys(names: RedisNames): QuotaKeys {
  return {
    seq: (id, instanceId) => names.appQuotaFlushSeq(id, instanceId),
    day: (id, dayKey) => names.appQuotaDay(id, dayKey),
    month: (id, monthKey) => names.appQuotaMonth(id, monthKey),
  };
}

/** The workspace compute-unit quota's keys: `cu:{workspaceId}:...` (the tracker's ids are workspace ids). */
export function computeUnitQuotaKeys(names: RedisNames): QuotaKeys {
  return {
    seq: (id, instanceId) => names.computeUnitQuotaFlushSeq(id, instanceId),
    day: (id, dayKey) => names.computeUnitQuotaDay(id, dayKey),
    month: (id, monthKey) => names.computeUnitQuotaMonth(id, monthKey),
  };
}

export interface RedisQuotaStoreOptions {
  redis: RedisClient;
  names: RedisNames;
  /** Key layout (default: the workspace quota's). */
  keys?: QuotaKeys;
  /** Day counters outlive their day so the console and usage jobs can still read yesterday. */
  dayTtlMs?: number;
  /** Month counters outlive their month by ~10 days. */
  monthTtlMs?: number;
  /** How long an applied sequence number is remembered (the window for a safe retry). */
  seqTtlMs?: number;
}

/**
 * Redis counters: `INCRBY` on `quotaDay` / `quotaMonth` keys (or an app's, with `appQuotaKeys`), in one
 * script per workspace (app) flush.
 */
export class RedisQuotaStore implements QuotaStore {
  private readonly keys: QuotaKeys;
  private readonly dayTtlMs: number;
  private readonly monthTtlMs: number;
  private readonly seqTtlMs: number;
  private readonly command: ApplyCommand;

  constructor(opts: RedisQuotaStoreOptions) {
    this.keys = opts.keys ?? workspaceQuotaKeys(opts.names);
    this.dayTtlMs = opts.dayTtlMs ?? 3 * DAY_MS;
    this.monthTtlMs = opts.monthTtlMs ?? 40 * DAY_MS;
    this.seqTtlMs = opts.seqTtlMs ?? 2 * DAY_MS;
    const r = opts.redis as unknown as Record<string, ApplyCommand>;
    if (typeof r.rgQuotaApply !== "function") opts.redis.defineCommand("rgQuotaApply", { lua: APPLY_SCRIPT });
    this.command = (r.rgQuotaApply as ApplyCommand).bind(opts.redis);
  }

  async apply(
    workspaceId: string,
    instanceId: string,
    seq: number,
    deltas: readonly QuotaDelta[],
    dayKey: string,
    monthKey: string,
  ): Promise<QuotaTotals> {
    const n = this.keys;
    const keys: string[] = [
      n.seq(workspaceId, instanceId),
      n.day(workspaceId, dayKey),
      n.month(workspaceId, monthKey),
    ];
    const units: number[] = [];
    for (const d of deltas) {
      keys.push(n.day(workspaceId, d.dayKey), n.month(workspaceId, d.monthKey));
      units.push(d.units);
    }
    const [dayCount, monthCount] = await this.command(
      keys.length,
      ...keys,
      seq,
      this.seqTtlMs,
      this.dayTtlMs,
      this.monthTtlMs,
      ...units,
    );
    return { dayCount, monthCount };
  }
}
