import { MigrationInterface, QueryRunner } from "typeorm";

const BUCKETS = 24; // shared/src/usage/contract.ts BUCKET_COUNT (fixed by this migration)

function bucketColumns(): string {
  return Array.from(
    { length: BUCKETS },
    (_, i) => `b${String(i).padStart(2, "0")} bigint NOT NULL DEFAULT 0`,
  ).join(",\n        ");
}

/**
 * Usage rollups (minute / hour / day) and the ingestion dedup table. Null workspace / app (unknown-key and
 * public-endpoint traffic) is stored as the nil UUID so the natural key can be the primary key.
 * One bigint column per latency histogram bucket: summing columns is much cheaper than unnesting arrays.
 */
export class Usage1700000001000 implements MigrationInterface {
  name = "Usage1700000001000";

  async up(q: QueryRunner): Promise<void> {
    for (const [table, col, type] of [
      ["usage_minute", "minute", "timestamptz"],
      ["usage_hour", "hour", "timestamptz"],
      ["usage_day", "day", "date"],
    ] as const) {
      await q.query(`
      CREATE TABLE ${table} (
        ${col} ${type} NOT NULL,
        workspace_id uuid NOT NULL,
        app_id uuid NOT NULL,
        network text NOT NULL,
        method text NOT NULL,
        category text NOT NULL,
        count bigint NOT NULL,
        latency_sum_ms double precision NOT NULL,
        ${bucketColumns()},
        PRIMARY KEY (${col}, workspace_id, app_id, network, method, category)
      )`);
      // Dashboard queries: one workspace (optionally one app / network) over a time range.
      await q.query(`CREATE INDEX ix_${table}_workspace ON ${table} (workspace_id, ${col})`);
    }
    await q.query(`
      CREATE TABLE usage_ingested_batches (
        batch_id text PRIMARY KEY,
        stream_entry_id text NOT NULL,
        ingested_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX ix_usage_ingested_batches_at ON usage_ingested_batches (ingested_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE usage_ingested_batches`);
    await q.query(`DROP TABLE usage_day`);
    await q.query(`DROP TABLE usage_hour`);
    await q.query(`DROP TABLE usage_minute`);
  }
}
