import type { Logger } from "../../../shared/src/log/logger";
import type { WebhookQueue } from "./webhook.queue";
import { newWebhookEventId } from "./webhook.queue";
import { isAnnouncedNodeTransition, type WebhookEventData, WebhookEventType } from "./webhook.types";

/**
 * What other services call to announce an event to a workspace's webhook endpoints. Emitting only queues
 * the event (QueueName.Webhooks, JobName.WebhookFanout); the worker finds the subscribed endpoints and
 * delivers. Never rejects: a caller's operation does not fail because its event could not be queued.
 * While Redis is unreachable the promise waits for the reconnect (BullMQ waits for its connection), so
 * request paths do not await it.
 */
export interface WebhookEmitter {
  /** True when the event was queued; false (and logged) when Redis refused it. */
  emit<T extends WebhookEventType>(workspaceId: string, type: T, data: WebhookEventData[T]): Promise<boolean>;
}

export class QueueWebhookEmitter implements WebhookEmitter {
  constructor(
    private readonly queue: WebhookQueue,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  async emit<T extends WebhookEventType>(
    workspaceId: string,
    type: T,
    data: WebhookEventData[T],
  ): Promise<boolean> {
    const event = {
      id: newWebhookEventId(),
      type,
      workspaceId,
      occurredAt: new Date(this.now()).toISOString(),
      data: data as Record<string, unknown>,
    };
    try {
      await this.queue.addFanout(event);
      return true;
    } catch (err) {
      this.log.error({ err, workspaceId, type }, "could not queue webhook event");
      return false;
    }
  }
}

/** For processes and tests without webhooks. */
export class NoopWebhookEmitter implements WebhookEmitter {
  async emit(): Promise<boolean> {
    return true;
  }
}

export const NOOP_WEBHOOK_EMITTER: WebhookEmitter = new NoopWebhookEmitter();

/** Emits `node.status` when the change is one that is announced (`isAnnouncedNodeTransition`). */
export async function emitNodeStatus(
  emitter: WebhookEmitter,
  node: { id: string; workspaceId: string; displayName: string; network?: { slug: string } | null },
  previousStatus: string,
  status: string,
  reason: string | null,
): Promise<void> {
  if (!isAnnouncedNodeTransition(previousStatus, status)) return;
  await emitter.emit(node.workspaceId, WebhookEventType.NODE_STATUS, {
    nodeId: node.id,
    displayName: node.displayName,
    network: node.network?.slug ?? "",
    previousStatus,
    status,
    reason,
  });
}
