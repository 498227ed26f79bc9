import { UsageIngestor, UsageIngestorOptions } from "../../../../control-plane/src/usage/usage.ingestor";
import { RedisUsageRecorder } from "../../../../data-plane/src/usage";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import { createLogger } from "../../../../shared/src/log/logger";
import { BUCKET_COUNT, bucketIndex, USAGE_STREAM_FIELD } from "../../../../shared/src/usage/contract";
import { Harness } from "../harness";

/** A data-plane recorder writing to the harness's Redis namespace (single or cluster), with a settable clock. */
export function recorderFor(h: Harness, instanceId = "dp-test") {
  const redis = h.ns.redis.client("dp-commands");
  const clock = { now: Date.now() };
  const rec = new RedisUsageRecorder({
    redis,
    names: h.names,
    instanceId,
    now: () => clock.now,
    config: { maxRowsPerEntry: 50 },
  });
  return {
    rec,
    clock,
    redis,
    async close() {
      await rec.close();
      redis.disconnect();
    },
  };
}

const silent = createLogger("usage-test", "silent");

/** An ingestor on the harness's database with its own Redis connection. */
export function ingestorFor(h: Harness, opts: Partial<UsageIngestorOptions> = {}) {
  const redis = h.ns.redis.client("blocking");
  const ing = new UsageIngestor(h.cp.dataSource, redis, h.names, silent, {
    consumerName: "c1",
    blockMs: 0,
    batch: 10,
    claimIdleMs: 60_000,
    ...opts,
  });
  return {
    ing,
    redis,
    /** Polls until a round handles nothing. */
    async drain(): Promise<number> {
      await ing.consumer.ensureGroup();
      let total = 0;
      for (;;) {
        const n = await ing.consumer.pollOnce(0);
        total += n;
        if (n === 0) return total;
      }
    },
    close() {
      redis.disconnect();
    },
  };
}

/** A usage row as a data plane writes it (`computeUnits` left out: an older data plane's row). */
export function usageRow(r: {
  minute: number;
  workspaceId: string | null;
  appId: string | null;
  method: string;
  count: number;
  computeUnits?: number;
  category?: string;
  network?: string;
  latencyMs?: number;
}): Record<string, unknown> {
  const buckets = new Array<number>(BUCKET_COUNT).fill(0);
  buckets[bucketIndex(r.latencyMs ?? 10)] = r.count;
  const row: Record<string, unknown> = {
    minute: Math.floor(r.minute / 60_000) * 60_000,
    workspaceId: r.workspaceId,
    appId: r.appId,
    network: r.network ?? "eth",
    method: r.method,
    category: r.category ?? ErrorCategory.Success,
    count: r.count,
    latencySumMs: (r.latencyMs ?? 10) * r.count,
    buckets,
  };
  if (r.computeUnits !== undefined) row.computeUnits = r.computeUnits;
  return row;
}

let batchSeq = 0;

/** XADDs one usage batch (the stream entry a data plane's flush writes) and returns its entry id. */
export async function xaddUsage(h: Harness, rows: unknown[], batchId?: string): Promise<string> {
  const id = batchId ?? `test-${process.pid}:${++batchSeq}`;
  const batch = { v: 1, batchId: id, instanceId: "test-dp", createdAt: Date.now(), rows };
  return (await h.redis.xadd(
    h.names.usageStream(),
    "*",
    USAGE_STREAM_FIELD,
    JSON.stringify(batch),
  )) as string;
}

/**
 * Gives plan `name` a daily compute-unit limit (PlanLimits.dailyComputeUnitLimit). The plans table gets
 * its `daily_compute_unit_limit` column from the plan-limits migration of the compute-unit enforcement;
 * where that migration is not in yet, the column is added here as it will (a no-op once it exists).
 */
export async function setPlanDailyComputeUnitLimit(h: Harness, name: string, limit: number | null) {
  await h.cp.dataSource.query(
    "ALTER TABLE plans ADD COLUMN IF NOT EXISTS daily_compute_unit_limit bigint NULL",
  );
  await h.cp.dataSource.query("UPDATE plans SET daily_compute_unit_limit = $2 WHERE name = $1", [
    name,
    limit,
  ]);
}
