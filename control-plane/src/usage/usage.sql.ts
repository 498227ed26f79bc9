import { EntityManager } from "typeorm";
import { BUCKET_COUNT, UsageRow } from "../../../shared/src/usage/contract";

/** Stored instead of NULL workspace / app ids (unknown-key and public-endpoint traffic). */
export const NIL_UUID = "00000000-0000-0000-0000-000000000000";

/** `b00`..`b23`: one bigint column per latency histogram bucket. */
export const BUCKET_COLUMNS: readonly string[] = Array.from(
  { length: BUCKET_COUNT },
  (_, i) => `b${String(i).padStart(2, "0")}`,
);

export type Grain = "minute" | "hour" | "day";
export const GRAIN_TABLE: Record<Grain, string> = {
  minute: "usage_minute",
  hour: "usage_hour",
  day: "usage_day",
};

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

function truncate(ms: number, grain: Grain): number {
  const step = grain === "minute" ? MINUTE : grain === "hour" ? HOUR : DAY;
  return ms - (((ms % step) + step) % step);
}

interface Merged {
  at: number;
  ws: string;
  app: string;
  network: string;
  method: string;
  category: string;
  count: number;
  computeUnits: number;
  latencySumMs: number;
  buckets: number[];
}

/** Rows merged on the grain's natural key (one INSERT ... ON CONFLICT may not touch a row twice). */
export function mergeRows(rows: readonly UsageRow[], grain: Grain): Merged[] {
  const out = new Map<string, Merged>();
  for (const r of rows) {
    const at = truncate(r.minute, grain);
    const ws = r.workspaceId ?? NIL_UUID;
    const app = r.appId ?? NIL_UUID;
    const key = `${at}|${ws}|${app}|${r.network}|${r.method}|${r.category}`;
    let m = out.get(key);
    if (!m) {
      m = {
        at,
        ws,
        app,
        network: r.network,
        method: r.method,
        category: r.category,
        count: 0,
        computeUnits: 0,
        latencySumMs: 0,
        buckets: new Array<number>(BUCKET_COUNT).fill(0),
      };
      out.set(key, m);
    }
    m.count += r.count;
    // A row from a data plane older than compute units charged every request object a weight of 1.
    m.computeUnits += r.computeUnits ?? r.count;
    m.latencySumMs += r.latencySumMs;
    for (let i = 0; i < BUCKET_COUNT; i++) m.buckets[i]! += r.buckets[i]!;
  }
  // A fixed order (the natural key) makes concurrent ingestors lock rows in the same order: no deadlocks.
  return [...out.entries()].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)).map((e) => e[1]);
}

const CHUNK = 5_000;

/** Adds `rows` into one rollup table (insert, or add to the existing counters). */
export async function upsertAdd(m: EntityManager, grain: Grain, rows: readonly UsageRow[]): Promise<void> {
  const merged = mergeRows(rows, grain);
  const table = GRAIN_TABLE[grain];
  const atType = grain === "day" ? "date" : "timestamptz";
  const cols = ["count", "compute_units", "latency_sum_ms", ...BUCKET_COLUMNS];
  const atExpr =
    grain === "day"
      ? "(to_timestamp(u.at / 1000.0) AT TIME ZONE 'UTC')::date"
      : "to_timestamp(u.at / 1000.0)";
  const unnestArgs = [
    "$1::float8[]",
    "$2::uuid[]",
    "$3::uuid[]",
    "$4::text[]",
    "$5::text[]",
    "$6::text[]",
    "$7::int8[]",
    "$8::int8[]",
    "$9::float8[]",
    ...BUCKET_COLUMNS.map((_, i) => `$${10 + i}::int8[]`),
  ];
  const sql = `
    INSERT INTO ${table} (${grain}, workspace_id, app_id, network, method, category, ${cols.join(", ")})
    SELECT ${atExpr}::${atType}, u.ws, u.app, u.network, u.method, u.category, ${cols.map((c) => `u.${c}`).join(", ")}
    FROM unnest(${unnestArgs.join(", ")}) AS u(at, ws, app, network, method, category, ${cols.join(", ")})
    ON CONFLICT (${grain}, workspace_id, app_id, network, method, category) DO UPDATE SET
      ${cols.map((c) => `${c} = ${table}.${c} + EXCLUDED.${c}`).join(",\n      ")}`;
  for (let i = 0; i < merged.length; i += CHUNK) {
    const part = merged.slice(i, i + CHUNK);
    const params: unknown[] = [
      part.map((r) => r.at),
      part.map((r) => r.ws),
      part.map((r) => r.app),
      part.map((r) => r.network),
      part.map((r) => r.method),
      part.map((r) => r.category),
      part.map((r) => r.count),
      part.map((r) => r.computeUnits),
      part.map((r) => r.latencySumMs),
      ...BUCKET_COLUMNS.map((_, b) => part.map((r) => r.buckets[b])),
    ];
    await m.query(sql, params);
  }
}

/**
 * Applies one stream batch exactly once: records `batchId` in usage_ingested_batches (if it was already
 * there the batch was applied before - a redelivery after a crash between COMMIT and XACK, or a duplicate
 * XADD - and nothing is added) and adds the rows into the minute, hour and day rollups, all in one
 * transaction. Returns false when the batch had already been applied.
 *
 * Hour and day rollups are maintained here, at ingestion time, rather than by a periodic rebuild job: they
 * inherit the batch's exactly-once guarantee for free, the current hour/day is always up to date (the
 * dashboard's 24 h view and today's history row need no minute scan), and no job has to decide when an
 * hour is "closed" (late batches from a data plane that was cut off from Redis just add to old hours).
 * The price, three upserts per merged row, is small: batches are pre-aggregated per minute.
 */
export async function applyBatch(
  m: EntityManager,
  batchId: string,
  streamEntryId: string,
  rows: readonly UsageRow[],
): Promise<boolean> {
  return m.transaction(async (tx) => {
    const ins: unknown[] = await tx.query(
      `INSERT INTO usage_ingested_batches (batch_id, stream_entry_id) VALUES ($1, $2)
       ON CONFLICT (batch_id) DO NOTHING RETURNING batch_id`,
      [batchId, streamEntryId],
    );
    if (ins.length === 0) return false;
    if (rows.length > 0) {
      await upsertAdd(tx, "minute", rows);
      await upsertAdd(tx, "hour", rows);
      await upsertAdd(tx, "day", rows);
    }
    return true;
  });
}
