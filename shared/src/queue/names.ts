/**
 * BullMQ queue and job names with their payload types; every producer and processor imports them from
 * here. Queue names are prefixed by BullMQ with the configured Redis key prefix.
 */
export enum QueueName {
  /** Keeps Redis in step with Postgres (repair after a Redis flush or a missed publication). */
  Publication = "publication",
  /** Usage housekeeping (retention of the minute / hour / day rollups). */
  Usage = "usage",
  /** Dedicated nodes: provisioning, roll / stop / delete, sync-status and validator-status sweeps. */
  Nodes = "nodes",
  /** Webhooks: fan-out of events to endpoints, signed deliveries with retries, quota-threshold checks. */
  Webhooks = "webhooks",
}

export enum JobName {
  /** Rebuilds every record the data plane reads from Postgres. */
  RepublishAll = "republish-all",
  /** Deletes usage rollups older than their retention and old ingestion markers. */
  UsageRetention = "usage-retention",
  /** Dedicated node: create (or adopt) the node's process / workload and wait for its RPC; -> SYNCING. */
  ProvisionNode = "provision-node",
  /** Dedicated node: restart with the current launch args (launch-arg change or restartDedicatedNode). */
  RollNode = "roll-node",
  /** Dedicated node: stop the process / scale to zero; -> STOPPED. */
  StopNode = "stop-node",
  /** Dedicated node: tear down process / workload and data; revoke the key; -> DELETED. */
  DeleteNode = "delete-node",
  /** Repeatable sweep: sync status of every running node (SYNCING <-> SYNCED), liveness. */
  NodeSyncStatus = "node-sync-status",
  /** Repeatable sweep: validator status (NOT_REGISTERED / WAITING / ELECTED) and checklist facts. */
  NodeValidatorStatus = "node-validator-status",
  /** One event: a delivery row per matching endpoint of its workspace, each then queued as WebhookDeliver. */
  WebhookFanout = "webhook-fanout",
  /** One attempt at POSTing a delivery; a failed attempt is retried with exponential backoff. */
  WebhookDeliver = "webhook-deliver",
  /** Repeatable: emits quota.threshold for workspaces past 80% / 100% of today's limit (once per day each). */
  WebhookQuotaCheck = "webhook-quota-check",
  /** Repeatable: deletes deliveries (and their attempts) older than the retention. */
  WebhookRetention = "webhook-retention",
  /**
   * Repeatable: emits usage.daily (the previous UTC day's totals) once per workspace and day, for workspaces
   * with an endpoint subscribed to it; a payload `day` names another finished day (backfill, tests).
   */
  UsageDaily = "usage-daily",
  /** Repeatable (usage queue): creates request-log day partitions ahead, drops those past the retention. */
  RequestLogPartitions = "request-log-partitions",
}

/** Payload of a per-node operation; `generation` = the node row's generation when the job was enqueued. */
export interface NodeOpPayload {
  nodeId: string;
  generation: number;
}

/**
 * Job id of a per-node operation: one job per (operation, node, generation), so re-enqueueing the same
 * operation is a no-op. (BullMQ refuses `:` in custom ids, hence `-`.)
 */
export function nodeJobId(op: JobName, nodeId: string, generation: number): string {
  return `${op}-${nodeId}-${generation}`;
}

/** An event on its way to the workspace's webhook endpoints subscribed to its type. */
export interface WebhookEventPayload {
  /** `evt_` + 32 hex: the `webhook-id` header, the same on every attempt and every endpoint. */
  id: string;
  /** Wire name (`quota.threshold`, `node.status`, `validator.status`, `key.regenerated`, `webhook.test`). */
  type: string;
  workspaceId: string;
  /** ISO time the event happened. */
  occurredAt: string;
  data: Record<string, unknown>;
}

/** Payload of JobName.UsageDaily: no `day` = the previous UTC day once it is settled. */
export interface UsageDailyPayload {
  /** `YYYY-MM-DD`, a UTC day before today. */
  day?: string;
}

/** Job id of an event's fan-out: one per event, so re-queueing it is a no-op. */
export function webhookFanoutJobId(eventId: string): string {
  return `fanout-${eventId}`;
}

/** Job id of a delivery: one per delivery row (its retries are the job's attempts). */
export function webhookDeliverJobId(deliveryId: string): string {
  return `deliver-${deliveryId}`;
}

export interface JobPayloads {
  [JobName.RepublishAll]: { reason: string };
  [JobName.UsageRetention]: Record<string, never>;
  [JobName.ProvisionNode]: NodeOpPayload;
  [JobName.RollNode]: NodeOpPayload;
  [JobName.StopNode]: NodeOpPayload;
  [JobName.DeleteNode]: NodeOpPayload;
  [JobName.NodeSyncStatus]: Record<string, never>;
  [JobName.NodeValidatorStatus]: Record<string, never>;
  [JobName.WebhookFanout]: WebhookEventPayload;
  [JobName.WebhookDeliver]: { deliveryId: string };
  [JobName.WebhookQuotaCheck]: Record<string, never>;
  [JobName.WebhookRetention]: Record<string, never>;
  [JobName.UsageDaily]: UsageDailyPayload;
  [JobName.RequestLogPartitions]: Record<string, never>;
}
