import type { Queue, Worker } from "bullmq";
import { Gauge, Registry } from "prom-client";
import type { RedisClient } from "../../../shared/src/redis/connect";
import { queueJobFailures, workerRegistry } from "../common/metrics";

/** BullMQ job states reported as queue depth (completed ones are trimmed by removeOnComplete: not depth). */
const JOB_STATES = ["waiting", "active", "delayed", "prioritized", "waiting-children", "failed"] as const;

/** A Redis stream the worker consumes as one consumer group. */
export interface ConsumedStream {
  /** Label value (`usage`, `request-log`), as the dead-letter counter uses. */
  label: string;
  stream: string;
  group: string;
  /** Its dead-letter stream (`<stream>:dead`). */
  dead: string;
}

/** Counts every failed attempt of the worker's jobs under its queue's name. */
export function countFailures(queue: string, worker: Worker): void {
  queueJobFailures.labels(queue).inc(0);
  worker.on("failed", () => queueJobFailures.labels(queue).inc());
}

/** Milliseconds part of a stream entry id (`<ms>-<seq>`). */
function idMs(id: string): number {
  return Number(id.slice(0, id.indexOf("-")));
}

/** XINFO GROUPS' reply for one group, as a field -> value record. */
async function groupInfo(
  redis: RedisClient,
  s: ConsumedStream,
): Promise<Record<string, unknown> | undefined> {
  const groups = (await redis.xinfo("GROUPS", s.stream)) as unknown[][];
  for (const g of groups) {
    const rec: Record<string, unknown> = {};
    for (let i = 0; i + 1 < g.length; i += 2) rec[String(g[i])] = g[i + 1];
    if (rec.name === s.group) return rec;
  }
  return undefined;
}

/**
 * Entries of the stream the group has not acknowledged (delivered and pending, or not read yet), and the
 * age of the oldest of them (0 when there is none): how far ingestion is behind the data planes.
 */
async function streamLag(
  redis: RedisClient,
  s: ConsumedStream,
): Promise<{ entries: number; seconds: number }> {
  const info = await groupInfo(redis, s);
  if (info === undefined) return { entries: 0, seconds: 0 };
  const pending = Number(info.pending ?? 0);
  // `lag` is null when Redis cannot tell (entries deleted in the range): count from the last delivered id.
  let unread = info.lag === null || info.lag === undefined ? Number.NaN : Number(info.lag);
  const lastDelivered = String(info["last-delivered-id"] ?? "0-0");
  const next = (await redis.xrange(s.stream, `(${lastDelivered}`, "+", "COUNT", 1)) as [string, string[]][];
  if (Number.isNaN(unread)) unread = next.length;
  let oldest = next[0] === undefined ? Number.POSITIVE_INFINITY : idMs(next[0][0]);
  if (pending > 0) {
    const summary = (await redis.xpending(s.stream, s.group)) as [number, string | null, ...unknown[]];
    if (summary[1]) oldest = Math.min(oldest, idMs(summary[1]));
  }
  const seconds = Number.isFinite(oldest) ? Math.max(0, (Date.now() - oldest) / 1000) : 0;
  return { entries: pending + unread, seconds };
}

/**
 * The worker process's /metrics registry: the counters of common/metrics.ts, and gauges read from Redis at
 * scrape time: BullMQ queue depth per queue and state, the consumed streams' lag (entries and seconds)
 * and their dead-letter streams' length. A gauge whose read fails (Redis away) has no series in that
 * scrape rather than a stale value. The process entry (worker/main.ts) adds the runtime series.
 */
export function workerMetricsRegistry(opts: {
  redis: RedisClient;
  queues: readonly Queue[];
  streams: readonly ConsumedStream[];
}): Registry {
  const own = new Registry();
  const queueJobs: Gauge<"queue" | "state"> = new Gauge({
    name: "rpcgw_worker_queue_jobs",
    help: "BullMQ jobs per queue and state (waiting, active, delayed, prioritized, waiting-children, failed kept)",
    labelNames: ["queue", "state"],
    registers: [own],
    async collect() {
      queueJobs.reset();
      await Promise.all(
        opts.queues.map(async (q) => {
          const counts = await q.getJobCounts(...JOB_STATES).catch(() => undefined);
          if (counts === undefined) return;
          for (const state of JOB_STATES) queueJobs.labels(q.name, state).set(counts[state] ?? 0);
        }),
      );
    },
  });
  // One read of every stream per scrape, shared by the two lag gauges (their collects run together).
  type Lags = Map<string, { entries: number; seconds: number } | undefined>;
  let lagRead: Promise<Lags> | undefined;
  const readLags = (): Promise<Lags> => {
    lagRead ??= Promise.all(
      opts.streams.map(
        async (s) => [s.label, await streamLag(opts.redis, s).catch(() => undefined)] as const,
      ),
    )
      .then((pairs) => new Map(pairs))
      .finally(() => {
        lagRead = undefined;
      });
    return lagRead;
  };
  const lagGauge = (
    name: string,
    help: string,
    pick: (l: { entries: number; seconds: number }) => number,
  ) => {
    const g: Gauge<"stream"> = new Gauge({
      name,
      help,
      labelNames: ["stream"],
      registers: [own],
      async collect() {
        const lags = await readLags();
        g.reset();
        for (const [label, lag] of lags) if (lag !== undefined) g.labels(label).set(pick(lag));
      },
    });
    return g;
  };
  lagGauge(
    "rpcgw_worker_stream_lag_entries",
    "Stream entries the worker's consumer group has not acknowledged yet (pending or unread), by stream",
    (l) => l.entries,
  );
  lagGauge(
    "rpcgw_worker_stream_lag_seconds",
    "Age of the oldest stream entry the worker's consumer group has not acknowledged (0: none), by stream",
    (l) => l.seconds,
  );
  const deadEntries: Gauge<"stream"> = new Gauge({
    name: "rpcgw_worker_dead_letter_entries",
    help: "Entries in the dead-letter stream (<stream>:dead) waiting for an operator, by stream",
    labelNames: ["stream"],
    registers: [own],
    async collect() {
      deadEntries.reset();
      await Promise.all(
        opts.streams.map(async (s) => {
          const n = await opts.redis.xlen(s.dead).catch(() => undefined);
          if (n !== undefined) deadEntries.labels(s.label).set(n);
        }),
      );
    },
  });
  return Registry.merge([workerRegistry, own]);
}
