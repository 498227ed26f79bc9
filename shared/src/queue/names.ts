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

export interface JobPayloads {
  [JobName.RepublishAll]: { reason: string };
  [JobName.UsageRetention]: Record<string, never>;
  [JobName.ProvisionNode]: NodeOpPayload;
  [JobName.RollNode]: NodeOpPayload;
  [JobName.StopNode]: NodeOpPayload;
  [JobName.DeleteNode]: NodeOpPayload;
  [JobName.NodeSyncStatus]: Record<string, never>;
  [JobName.NodeValidatorStatus]: Record<string, never>;
}
