import { DelayedError, type Job, UnrecoverableError, Worker } from "bullmq";
import type { DataSource } from "typeorm";
import { z } from "zod";
import type { Logger } from "../../../shared/src/log/logger";
import {
  JobName,
  type JobPayloads,
  QueueName,
  type WebhookEventPayload,
} from "../../../shared/src/queue/names";
import { isCluster, type RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import { tracedProcessor } from "../../../shared/src/telemetry/jobs";
import { type UsageDailyResult, usageDailyPass } from "../billing/usage-daily";
import { poisonedJobs, webhookAttempts, webhookDeliveries } from "../common/metrics";
import type { WebhookSettings } from "../config";
import { checkQuotaThresholds } from "./quota-threshold";
import { webhookHeaders } from "./signature";
import { QueueWebhookEmitter, type WebhookEmitter } from "./webhook.emitter";
import { nextAttemptDelayMs, recordDeliveries, WebhookQueue } from "./webhook.queue";
import { WEBHOOK_TEST_EVENT, WebhookDeliveryStatus } from "./webhook.types";
import { openWebhookSecret } from "./webhook-secret";
import { type AttemptOutcome, WebhookSender } from "./webhook-sender";
import { WorkspaceDeliverySlots } from "./webhook-throttles";

export const WEBHOOK_QUOTA_SCHEDULER_ID = "webhook-quota-check-every";
export const WEBHOOK_RETENTION_SCHEDULER_ID = "webhook-retention-every";
export const USAGE_DAILY_SCHEDULER_ID = "usage-daily-every";
/** Period of the delivery retention job. */
const RETENTION_INTERVAL_MS = 3_600_000;
/** Pending deliveries re-queued per pass of `requeuePending`. */
const REQUEUE_BATCH = 1000;

interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  payload: string;
  endpoint_id: string;
  url: string;
  enabled: boolean;
  secret_ciphertext: string;
}

/**
 * Worker side of webhooks (QueueName.Webhooks): fan-out of events into delivery rows, one signed POST
 * per WebhookDeliver job run (every attempt recorded), the quota-threshold check and retention.
 */
export class WebhookOperations {
  constructor(
    private readonly ds: DataSource,
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly queue: WebhookQueue,
    readonly emitter: WebhookEmitter,
    private readonly sender: WebhookSender,
    private readonly encryptionKey: Buffer,
    private readonly cfg: WebhookSettings,
    private readonly log: Logger,
    /** Per-workspace delivery slots (none: no per-workspace cap). */
    private readonly slots?: WorkspaceDeliverySlots,
  ) {}

  /** Deliveries put back because their workspace was at WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE. */
  deferred = 0;

  /** Creates the event's deliveries: one per enabled endpoint of the workspace subscribed to its type. */
  async fanout(event: WebhookEventPayload): Promise<number> {
    const rows: { id: string }[] = await this.ds.query(
      `SELECT id FROM webhook_endpoints WHERE workspace_id = $1 AND enabled AND $2 = ANY(event_types)`,
      [event.workspaceId, event.type],
    );
    const ids = await recordDeliveries(
      this.ds,
      event,
      rows.map((r) => r.id),
    );
    for (const id of ids) await this.queue.addDelivery(id);
    return ids.length;
  }

  private async recordAttempt(deliveryId: string, n: number, at: Date, o: AttemptOutcome): Promise<void> {
    // Attempt numbers come from the row's counter and never repeat; the conflict clause is only a guard.
    await this.ds.query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, status_code, error, duration_ms, response_excerpt, at)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (delivery_id, attempt) DO NOTHING`,
      [deliveryId, n, o.statusCode, o.error, o.durationMs, o.responseExcerpt, at],
    );
    webhookAttempts.labels(o.ok ? "ok" : "error").inc();
  }

  private async finish(deliveryId: string, status: WebhookDeliveryStatus): Promise<void> {
    await this.ds.query(
      `UPDATE webhook_deliveries SET status = $2, completed_at = now(), next_attempt_at = NULL WHERE id = $1`,
      [deliveryId, status],
    );
    webhookDeliveries.labels(status === WebhookDeliveryStatus.SUCCEEDED ? "succeeded" : "failed").inc();
  }

  /**
   * One attempt. The attempt number comes from the row (incremented before sending), so a re-run job
   * never reuses one. A 2xx answer: SUCCEEDED. A refused address, a disabled endpoint or an unreadable
   * secret, or the last attempt: FAILED. Otherwise the job throws and BullMQ retries after its backoff.
   */
  async deliver(job: Job<JobPayloads[JobName.WebhookDeliver]>, token?: string): Promise<string> {
    if (this.slots === undefined) return this.attempt(job);
    const { deliveryId } = job.data;
    const rows: { workspace_id: string }[] = await this.ds.query(
      `SELECT workspace_id FROM webhook_deliveries WHERE id = $1 AND status = 'PENDING'`,
      [deliveryId],
    );
    const workspaceId = rows[0]?.workspace_id;
    if (workspaceId === undefined) return "not pending";
    if (!(await this.slots.acquire(workspaceId, deliveryId))) {
      // The workspace has its share of deliveries in flight: back in the queue without using an attempt
      // (BullMQ does not count a DelayedError), and this worker slot goes to the next job.
      this.deferred++;
      await job.moveToDelayed(Date.now() + WorkspaceDeliverySlots.retryDelayMs(this.cfg.timeoutMs), token);
      throw new DelayedError();
    }
    try {
      return await this.attempt(job);
    } finally {
      await this.slots.release(workspaceId, deliveryId).catch((err: Error) => {
        // The slot lapses by itself after its lease.
        this.log.warn({ err: err.message, deliveryId }, "could not release a webhook delivery slot");
      });
    }
  }

  private async attempt(job: Job<JobPayloads[JobName.WebhookDeliver]>): Promise<string> {
    const { deliveryId } = job.data;
    // TypeORM answers an UPDATE with [rows, affected].
    const [claimed] = (await this.ds.query(
      `UPDATE webhook_deliveries SET attempt_count = attempt_count + 1
       WHERE id = $1 AND status = 'PENDING' RETURNING attempt_count`,
      [deliveryId],
    )) as [{ attempt_count: number }[], number];
    if (claimed.length === 0) return "not pending";
    const n = claimed[0]!.attempt_count;
    const rows: DeliveryRow[] = await this.ds.query(
      `SELECT d.id, d.event_id, d.event_type, d.payload, e.id AS endpoint_id, e.url, e.enabled, e.secret_ciphertext
       FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id = $1`,
      [deliveryId],
    );
    const row = rows[0];
    if (!row) return "endpoint deleted";
    const at = new Date();
    const refuse = async (error: string) => {
      await this.recordAttempt(deliveryId, n, at, {
        ok: false,
        statusCode: null,
        error,
        durationMs: 0,
        responseExcerpt: null,
        permanent: true,
      });
      await this.finish(deliveryId, WebhookDeliveryStatus.FAILED);
      return "failed";
    };
    if (!row.enabled && row.event_type !== WEBHOOK_TEST_EVENT) return refuse("endpoint disabled");
    let secret: string;
    try {
      secret = openWebhookSecret(
        { id: row.endpoint_id, secretCiphertext: row.secret_ciphertext },
        this.encryptionKey,
      );
    } catch {
      this.log.error({ endpointId: row.endpoint_id }, "webhook signing secret does not decrypt");
      return refuse(
        "signing secret unreadable (KEY_ENCRYPTION_SECRET changed?): rotate the endpoint's secret",
      );
    }
    const headers = webhookHeaders(secret, row.event_id, Math.floor(at.getTime() / 1000), row.payload);
    const outcome = await this.sender.send(row.url, headers, row.payload);
    await this.recordAttempt(deliveryId, n, at, outcome);
    if (outcome.ok) {
      await this.finish(deliveryId, WebhookDeliveryStatus.SUCCEEDED);
      return "delivered";
    }
    if (outcome.permanent || n >= this.cfg.maxAttempts) {
      await this.finish(deliveryId, WebhookDeliveryStatus.FAILED);
      return "failed";
    }
    await this.ds.query(`UPDATE webhook_deliveries SET next_attempt_at = $2 WHERE id = $1`, [
      deliveryId,
      new Date(Date.now() + nextAttemptDelayMs(this.cfg.retryBaseMs, n)),
    ]);
    throw new Error(`webhook attempt ${n} failed: ${outcome.error}`);
  }

  /** A delivery job BullMQ gave up on (attempts spent, e.g. after stalls) while its row is still PENDING. */
  async failed(job: Job | undefined): Promise<void> {
    if (!job || job.name !== JobName.WebhookDeliver) return;
    if (job.attemptsMade < (job.opts.attempts ?? 1)) return;
    const [, changed] = (await this.ds.query(
      `UPDATE webhook_deliveries SET status = 'FAILED', completed_at = now(), next_attempt_at = NULL
       WHERE id = $1 AND status = 'PENDING'`,
      [(job.data as { deliveryId: string }).deliveryId],
    )) as [unknown, number];
    if (changed > 0) webhookDeliveries.labels("failed").inc();
  }

  /**
   * Queues every PENDING delivery again (at worker start and after Redis lost its data, when their jobs
   * may be gone). Idempotent: a delivery whose job exists keeps it (same job id). Returns the rows seen.
   */
  async requeuePending(): Promise<number> {
    let seen = 0;
    let after = "00000000-0000-0000-0000-000000000000";
    for (;;) {
      const rows: { id: string }[] = await this.ds.query(
        `SELECT id FROM webhook_deliveries WHERE status = 'PENDING' AND id > $1 ORDER BY id LIMIT ${REQUEUE_BATCH}`,
        [after],
      );
      if (rows.length === 0) return seen;
      for (const r of rows) await this.queue.addDelivery(r.id);
      seen += rows.length;
      after = rows[rows.length - 1]!.id;
    }
  }

  checkQuotas(nowMs?: number): Promise<number> {
    return checkQuotaThresholds(
      { ds: this.ds, redis: this.redis, names: this.names, emitter: this.emitter },
      nowMs,
    );
  }

  /** One `usage.daily` pass (billing/usage-daily.ts `usageDailyPass`); `nowMs`: the clock (tests fake it). */
  usageDaily(day?: string, nowMs: number = Date.now()): Promise<UsageDailyResult> {
    return usageDailyPass({ ds: this.ds, queue: this.queue }, this.cfg.usageDailyDelayMs, day, nowMs);
  }

  /**
   * Deletes deliveries (attempts cascade) older than WEBHOOK_DELIVERY_RETENTION_DAYS, and `usage.daily`
   * markers as old (a pass only ever reports recent days, so an old marker guards nothing).
   */
  async retention(): Promise<number> {
    const [, deleted] = (await this.ds.query(
      `DELETE FROM webhook_deliveries WHERE created_at < now() - make_interval(days => $1)`,
      [this.cfg.deliveryRetentionDays],
    )) as [unknown, number];
    await this.ds.query(
      `DELETE FROM usage_daily_events WHERE created_at < now() - make_interval(days => $1)`,
      [Math.max(this.cfg.deliveryRetentionDays, 7)],
    );
    return deleted;
  }
}

export interface WebhookWorker {
  queue: WebhookQueue;
  worker: Worker;
  ops: WebhookOperations;
  /** Emitter for the worker's own services (dedicated-node status). */
  emitter: WebhookEmitter;
  /** (Re)creates the repeatable quota check and retention, and re-queues pending deliveries. */
  ensureSchedulers(): Promise<void>;
  close(): Promise<void>;
}

/** Starts the QueueName.Webhooks worker and its repeatable jobs (quota check, usage.daily, retention). */
export async function startWebhookWorker(deps: {
  ds: DataSource;
  redis: RedisClient;
  bullConnection: RedisClient;
  names: RedisNames;
  cfg: WebhookSettings;
  encryptionKey: Buffer;
  log: Logger;
}): Promise<WebhookWorker> {
  const { cfg, log } = deps;
  const queue = new WebhookQueue(deps.bullConnection, deps.names, cfg, log);
  const emitter = new QueueWebhookEmitter(queue, log);
  const sender = new WebhookSender({
    allowPrivateAddresses: cfg.allowPrivateAddresses,
    timeoutMs: cfg.timeoutMs,
  });
  const ops = new WebhookOperations(
    deps.ds,
    deps.redis,
    deps.names,
    queue,
    emitter,
    sender,
    deps.encryptionKey,
    cfg,
    log,
    // A slot outlives any one attempt (WEBHOOK_TIMEOUT_MS) and the Postgres writes around it.
    new WorkspaceDeliverySlots(
      deps.redis,
      deps.names,
      cfg.maxInFlightPerWorkspace,
      cfg.timeoutMs * 2 + 30_000,
    ),
  );
  const keep = { removeOnComplete: 20, removeOnFail: 50 };
  // Idempotent: also called again when Redis lost its data (worker/recovery.service.ts).
  const ensureSchedulers = async () => {
    await queue.queue.upsertJobScheduler(
      WEBHOOK_QUOTA_SCHEDULER_ID,
      { every: cfg.quotaCheckIntervalMs },
      { name: JobName.WebhookQuotaCheck, data: {}, opts: keep },
    );
    await queue.queue.upsertJobScheduler(
      USAGE_DAILY_SCHEDULER_ID,
      { every: cfg.usageDailyIntervalMs },
      { name: JobName.UsageDaily, data: {}, opts: keep },
    );
    await queue.queue.upsertJobScheduler(
      WEBHOOK_RETENTION_SCHEDULER_ID,
      { every: RETENTION_INTERVAL_MS },
      { name: JobName.WebhookRetention, data: {}, opts: keep },
    );
    await ops.requeuePending();
  };
  await ensureSchedulers();
  const worker = new Worker(
    QueueName.Webhooks,
    tracedProcessor(async (job: Job, token?: string) => {
      switch (job.name as JobName) {
        case JobName.WebhookFanout:
          return ops.fanout(
            checkedPayload(job, FanoutPayloadSchema, log) as JobPayloads[JobName.WebhookFanout],
          );
        case JobName.WebhookDeliver:
          checkedPayload(job, DeliverPayloadSchema, log);
          return ops.deliver(job as Job<JobPayloads[JobName.WebhookDeliver]>, token);
        case JobName.WebhookQuotaCheck:
          return ops.checkQuotas();
        case JobName.WebhookRetention:
          return ops.retention();
        case JobName.UsageDaily:
          return ops.usageDaily(
            (checkedPayload(job, UsageDailyPayloadSchema, log) as JobPayloads[JobName.UsageDaily]).day,
          );
        default:
          throw new UnrecoverableError(`unknown job ${job.name}`);
      }
    }),
    {
      connection: deps.bullConnection,
      prefix: deps.names.bullPrefix(isCluster(deps.bullConnection)),
      concurrency: cfg.concurrency,
      // An attempt may take WEBHOOK_TIMEOUT_MS: the lock must outlast it, or BullMQ runs the job twice.
      lockDuration: Math.max(30_000, cfg.timeoutMs * 2),
    },
  );
  worker.on("failed", (job, err) => {
    // A failed attempt with attempts left is routine (recorded in webhook_attempts): debug only.
    const final = !job || job.attemptsMade >= (job.opts.attempts ?? 1);
    if (final) log.warn({ err: err.message, job: job?.name, data: job?.data }, "webhook job failed");
    else log.debug({ err: err.message, job: job.name }, "webhook attempt failed; will retry");
    void ops.failed(job).catch((e) => log.error({ err: e }, "could not record webhook job failure"));
  });
  worker.on("error", (err) => log.error({ err }, "webhook worker error"));
  await worker.waitUntilReady();
  return {
    queue,
    worker,
    ops,
    emitter,
    ensureSchedulers,
    async close() {
      await worker.close();
      await queue.close();
      await sender.close();
    },
  };
}

/** What a delivery job carries; anything else can never run (Postgres refuses a non-UUID id, every time). */
const DeliverPayloadSchema = z.object({ deliveryId: z.uuid() });
/** What a usage-daily job carries (the scheduler's: nothing). */
const UsageDailyPayloadSchema = z.object({ day: z.string().max(10).optional() });
/** What a fan-out job carries (WebhookEventPayload). */
const FanoutPayloadSchema = z.object({
  id: z.string().min(1).max(100),
  type: z.string().min(1).max(100),
  workspaceId: z.uuid(),
  occurredAt: z.string().min(1).max(64),
  data: z.record(z.string(), z.unknown()),
});

/**
 * The job's payload when it has the shape its processor needs. A poisoned one (written by anything but
 * this code, or by an older version) fails for good at once, without its retries and their backoff:
 * BullMQ keeps it among the failed jobs (removeOnFail) for an operator to read, and it is counted
 * (rpcgw_worker_poisoned_jobs_total) and logged. Other jobs never waited on it: a failing job waits for
 * its retry in the delayed set, not in front of the others.
 */
function checkedPayload<T>(job: Job, schema: z.ZodType<T>, log: Logger): T {
  const parsed = schema.safeParse(job.data);
  if (parsed.success) return parsed.data;
  poisonedJobs.inc({ queue: QueueName.Webhooks });
  log.error({ job: job.name, jobId: job.id, error: parsed.error.message }, "poisoned webhook job set aside");
  throw new UnrecoverableError(`poisoned ${job.name} payload: ${parsed.error.message.slice(0, 500)}`);
}
