import { randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import type { DataSource, EntityManager } from "typeorm";
import type { Logger } from "../../../shared/src/log/logger";
import {
  JobName,
  QueueName,
  type WebhookEventPayload,
  webhookDeliverJobId,
  webhookFanoutJobId,
} from "../../../shared/src/queue/names";
import { isCluster, type RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";

/** Attempts of a fan-out job (it only writes rows and queues jobs; failures are Postgres or Redis hiccups). */
const FANOUT_ATTEMPTS = 5;
const FANOUT_BACKOFF_MS = 1000;
/** Finished jobs BullMQ keeps (the history is in Postgres). */
const KEEP_JOBS = 1000;
/** At most one logged queue connection error per this period (Redis down is an expected state). */
const ERROR_LOG_EVERY_MS = 10_000;

/** `evt_` + 32 hex digits. */
export function newWebhookEventId(): string {
  return `evt_${randomUUID().replace(/-/g, "")}`;
}

/** The JSON body of an event, as POSTed and signed (the same bytes for every endpoint and attempt). */
export function webhookBody(event: WebhookEventPayload): string {
  return JSON.stringify({
    id: event.id,
    type: event.type,
    timestamp: event.occurredAt,
    workspaceId: event.workspaceId,
    data: event.data,
  });
}

/**
 * Producer side of QueueName.Webhooks, for the control plane and the worker. The BullMQ queue is opened
 * on first use on the given connection.
 */
export class WebhookQueue {
  private opened: Queue | undefined;
  private lastErrorLogMs = 0;

  constructor(
    private readonly connection: RedisClient,
    private readonly names: RedisNames,
    private readonly cfg: { maxAttempts: number; retryBaseMs: number },
    private readonly log: Logger,
  ) {}

  get queue(): Queue {
    if (!this.opened) {
      const q = new Queue(QueueName.Webhooks, {
        connection: this.connection,
        prefix: this.names.bullPrefix(isCluster(this.connection)),
      });
      // A queue re-emits its connection's errors; unheard, an 'error' event would throw.
      q.on("error", (err: Error) => {
        if (Date.now() - this.lastErrorLogMs < ERROR_LOG_EVERY_MS) return;
        this.lastErrorLogMs = Date.now();
        this.log.warn({ err: err.message }, "webhooks queue connection error");
      });
      this.opened = q;
    }
    return this.opened;
  }

  /** Idempotent per event id. */
  async addFanout(event: WebhookEventPayload): Promise<void> {
    await this.queue.add(JobName.WebhookFanout, event, {
      jobId: webhookFanoutJobId(event.id),
      attempts: FANOUT_ATTEMPTS,
      backoff: { type: "exponential", delay: FANOUT_BACKOFF_MS },
      removeOnComplete: KEEP_JOBS,
      removeOnFail: KEEP_JOBS,
    });
  }

  /**
   * Idempotent per delivery. BullMQ's exponential backoff waits retryBaseMs * 2^(n-1) after the n-th
   * failed attempt (`nextAttemptDelayMs`).
   */
  async addDelivery(deliveryId: string): Promise<void> {
    await this.queue.add(
      JobName.WebhookDeliver,
      { deliveryId },
      {
        jobId: webhookDeliverJobId(deliveryId),
        attempts: this.cfg.maxAttempts,
        backoff: { type: "exponential", delay: this.cfg.retryBaseMs },
        removeOnComplete: KEEP_JOBS,
        removeOnFail: KEEP_JOBS,
      },
    );
  }

  async close(): Promise<void> {
    await this.opened?.close();
  }
}

/** The wait BullMQ applies after failed attempt `n` (1-based) with exponential backoff. */
export function nextAttemptDelayMs(retryBaseMs: number, n: number): number {
  return retryBaseMs * 2 ** (n - 1);
}

/**
 * One PENDING delivery row per endpoint for the event; an (endpoint, event) pair that already has one is
 * left alone, so a fan-out retried after a partial failure creates no duplicates. Returns the ids of the
 * event's still-pending deliveries to those endpoints (to be queued; queueing is idempotent per id).
 */
export async function recordDeliveries(
  db: DataSource | EntityManager,
  event: WebhookEventPayload,
  endpointIds: string[],
): Promise<string[]> {
  if (endpointIds.length === 0) return [];
  const body = webhookBody(event);
  await db.query(
    `INSERT INTO webhook_deliveries (endpoint_id, workspace_id, event_id, event_type, payload, status)
     SELECT e, $2, $3, $4, $5, 'PENDING' FROM unnest($1::uuid[]) AS e
     ON CONFLICT (endpoint_id, event_id) DO NOTHING`,
    [endpointIds, event.workspaceId, event.id, event.type, body],
  );
  const rows: { id: string }[] = await db.query(
    `SELECT id FROM webhook_deliveries WHERE event_id = $1 AND endpoint_id = ANY($2::uuid[]) AND status = 'PENDING'`,
    [event.id, endpointIds],
  );
  return rows.map((r) => r.id);
}
