import { DataSource } from "typeorm";
import { UsageWorkerConfig } from "./usage.config";

export interface RetentionResult {
  minute: number;
  hour: number;
  day: number;
  batches: number;
}

/**
 * Deletes rollups past their retention. Ingestion markers (usage_ingested_batches) are kept as long as the
 * minute rollups: a batch redelivered later than that would be counted again, but the stream is trimmed
 * long before and data planes do not retry for days.
 */
export async function applyRetention(
  ds: DataSource,
  cfg: Pick<UsageWorkerConfig, "minuteRetentionDays" | "hourRetentionDays" | "dayRetentionDays">,
  nowMs = Date.now(),
): Promise<RetentionResult> {
  const day = 86_400_000;
  const del = async (sql: string, cutoff: Date | string): Promise<number> => {
    const res = (await ds.query(sql, [cutoff])) as [unknown[], number];
    return res[1] ?? 0;
  };
  const minute = await del(
    "DELETE FROM usage_minute WHERE minute < $1",
    new Date(nowMs - cfg.minuteRetentionDays * day),
  );
  const hour = await del(
    "DELETE FROM usage_hour WHERE hour < $1",
    new Date(nowMs - cfg.hourRetentionDays * day),
  );
  const dayCount =
    cfg.dayRetentionDays > 0
      ? await del(
          "DELETE FROM usage_day WHERE day < $1::date",
          new Date(nowMs - cfg.dayRetentionDays * day).toISOString().slice(0, 10),
        )
      : 0;
  const batches = await del(
    "DELETE FROM usage_ingested_batches WHERE ingested_at < $1",
    new Date(nowMs - cfg.minuteRetentionDays * day),
  );
  return { minute, hour, day: dayCount, batches };
}
