import { UnrecoverableError } from "bullmq";
import type { DataSource } from "typeorm";
import type { WebhookEventPayload } from "../../../shared/src/queue/names";
import { utcDayKey, utcDayStartMs } from "../../../shared/src/quota/day";
import { NIL_UUID } from "../usage/usage.sql";
import { newWebhookEventId, recordDeliveries, type WebhookQueue } from "../webhooks/webhook.queue";
import { type UsageDailyAmounts, type UsageDailyData, WebhookEventType } from "../webhooks/webhook.types";
import { add, amountsOf, BILLING_SUMS, type BillingAmounts, entry, zero } from "./rollup-sums";

const DAY = 86_400_000;
const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;
/** Workspaces whose events one pass records per batch of queries. */
const BATCH = 200;

// biome-ignore lint/suspicious/noExplicitAny: raw pg rows
type Row = Record<string, any>;

/** Outcome of one pass. */
export interface UsageDailyResult {
  /** The day reported, or null when none was due yet. */
  day: string | null;
  /** Events recorded by this pass (a workspace already done by another pass or worker is not counted). */
  emitted: number;
}

/**
 * The day a pass run at `nowMs` reports: the previous UTC day, once `delayMs` has passed since 00:00 UTC
 * (until then that day's last usage batches may still be on their way into the rollups); null before.
 */
export function dueDay(nowMs: number, delayMs: number): string | null {
  const today = utcDayStartMs(nowMs);
  if (nowMs < today + delayMs) return null;
  return utcDayKey(today - DAY);
}

/** A `day` payload as the job accepts it: `YYYY-MM-DD`, a real date, before today (UTC). */
export function validPastDay(day: string, nowMs: number): boolean {
  if (!DAY_RE.test(day)) return false;
  const t = Date.parse(`${day}T00:00:00Z`);
  return Number.isFinite(t) && utcDayKey(t) === day && t < utcDayStartMs(nowMs);
}

function pick(a: BillingAmounts): UsageDailyAmounts {
  return {
    requests: a.requests,
    computeUnits: a.computeUnits,
    refusedRequests: a.refusedRequests,
    refusedComputeUnits: a.refusedComputeUnits,
  };
}

const larger = (a: UsageDailyAmounts, b: UsageDailyAmounts) =>
  b.requests - a.requests || b.computeUnits - a.computeUnits;

/** `data` of one workspace's event from its usage_day rows of the day (grouped by app and network). */
export function usageDailyData(day: string, rows: Row[], appNames: Map<string, string>): UsageDailyData {
  const total = zero();
  const apps = new Map<string, { amounts: BillingAmounts; networks: Map<string, BillingAmounts> }>();
  const networks = new Map<string, BillingAmounts>();
  for (const r of rows) {
    const a = amountsOf(r);
    add(total, a);
    const app = entry(apps, r.app_id as string, () => ({
      amounts: zero(),
      networks: new Map<string, BillingAmounts>(),
    }));
    add(app.amounts, a);
    add(entry(app.networks, r.network as string, zero), a);
    add(entry(networks, r.network as string, zero), a);
  }
  const from = Date.parse(`${day}T00:00:00Z`);
  return {
    day,
    from: new Date(from).toISOString(),
    to: new Date(from + DAY).toISOString(),
    ...pick(total),
    apps: [...apps.entries()]
      .map(([id, app]) => ({
        appId: id === NIL_UUID ? null : id,
        appName: id === NIL_UUID ? null : (appNames.get(id) ?? "(deleted app)"),
        ...pick(app.amounts),
        networks: [...app.networks.entries()]
          .map(([network, a]) => ({ network, ...pick(a) }))
          .sort((x, y) => larger(x, y) || x.network.localeCompare(y.network)),
      }))
      .sort((x, y) => larger(x, y) || (x.appName ?? "").localeCompare(y.appName ?? "")),
    networks: [...networks.entries()]
      .map(([network, a]) => ({ network, ...pick(a) }))
      .sort((x, y) => larger(x, y) || x.network.localeCompare(y.network)),
  };
}

/**
 * One `usage.daily` pass for `day`: for every workspace that existed that day and has an enabled endpoint
 * subscribed to `usage.daily`, records the event (the day's totals from usage_day, the rollups the
 * statement reads) with its deliveries, then queues every pending delivery of the day's events.
 *
 * Once per workspace and day, whatever runs it: the event's marker row (usage_daily_events, primary key
 * workspace + day) is inserted in the same transaction as its delivery rows, so of two passes (a job run
 * twice, two workers) exactly one records the event, and an event is never half recorded. Queueing comes
 * after the commit and is idempotent per delivery; deliveries whose queueing failed (Redis down) are
 * queued by the next pass, or at worker start (requeuePending).
 */
export async function emitUsageDaily(
  deps: { ds: DataSource; queue: WebhookQueue },
  day: string,
  nowMs: number = Date.now(),
): Promise<UsageDailyResult> {
  const type = WebhookEventType.USAGE_DAILY;
  const dayEnd = new Date(Date.parse(`${day}T00:00:00Z`) + DAY);
  const due: Row[] = await deps.ds.query(
    `SELECT w.id FROM workspaces w
     WHERE w.created_at < $2
       AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.workspace_id = w.id AND e.enabled AND $1 = ANY(e.event_types))
       AND NOT EXISTS (SELECT 1 FROM usage_daily_events u WHERE u.workspace_id = w.id AND u.day = $3::date)
     ORDER BY w.id`,
    [type, dayEnd, day],
  );
  let emitted = 0;
  for (let i = 0; i < due.length; i += BATCH) {
    const ids = due.slice(i, i + BATCH).map((r) => r.id as string);
    const rows: Row[] = await deps.ds.query(
      `SELECT workspace_id, app_id, network, ${BILLING_SUMS}
       FROM usage_day WHERE workspace_id = ANY($1::uuid[]) AND day = $2::date GROUP BY 1, 2, 3`,
      [ids, day],
    );
    const appIds = [...new Set(rows.map((r) => r.app_id as string).filter((id) => id !== NIL_UUID))];
    const names = new Map<string, string>();
    if (appIds.length > 0) {
      const apps: Row[] = await deps.ds.query(`SELECT id, name FROM apps WHERE id = ANY($1::uuid[])`, [
        appIds,
      ]);
      for (const a of apps) names.set(a.id, a.name);
    }
    for (const workspaceId of ids) {
      const event: WebhookEventPayload = {
        id: newWebhookEventId(),
        type,
        workspaceId,
        occurredAt: new Date(nowMs).toISOString(),
        data: usageDailyData(
          day,
          rows.filter((r) => r.workspace_id === workspaceId),
          names,
        ) as unknown as Record<string, unknown>,
      };
      const recorded = await deps.ds.transaction(async (m) => {
        const won: unknown[] = await m.query(
          `INSERT INTO usage_daily_events (workspace_id, day, event_id) VALUES ($1, $2::date, $3)
           ON CONFLICT (workspace_id, day) DO NOTHING RETURNING event_id`,
          [workspaceId, day, event.id],
        );
        if (won.length === 0) return false;
        const endpoints: Row[] = await m.query(
          `SELECT id FROM webhook_endpoints WHERE workspace_id = $1 AND enabled AND $2 = ANY(event_types)`,
          [workspaceId, type],
        );
        await recordDeliveries(
          m,
          event,
          endpoints.map((e) => e.id as string),
        );
        return true;
      });
      if (recorded) emitted++;
    }
  }
  const pending: Row[] = await deps.ds.query(
    `SELECT d.id FROM usage_daily_events u JOIN webhook_deliveries d ON d.event_id = u.event_id
     WHERE u.day = $1::date AND d.status = 'PENDING'`,
    [day],
  );
  for (const p of pending) await deps.queue.addDelivery(p.id);
  return { day, emitted };
}

/**
 * One run of the `usage-daily` job: `day` given, that finished UTC day (anything else fails the job for
 * good, no retries); else the previous day once `delayMs` has passed since 00:00 UTC (nothing before).
 */
export async function usageDailyPass(
  deps: { ds: DataSource; queue: WebhookQueue },
  delayMs: number,
  day: string | undefined,
  nowMs: number,
): Promise<UsageDailyResult> {
  if (day !== undefined && !validPastDay(day, nowMs)) {
    throw new UnrecoverableError(`usage-daily: day must be a UTC day before today as YYYY-MM-DD, got ${day}`);
  }
  const target = day ?? dueDay(nowMs, delayMs);
  if (target === null) return { day: null, emitted: 0 };
  return emitUsageDaily(deps, target, nowMs);
}
