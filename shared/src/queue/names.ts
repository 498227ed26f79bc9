/**
 * BullMQ queue and job names with their payload types; every producer and processor imports them from
 * here. Queue names are prefixed by BullMQ with the configured Redis key prefix.
 */
export enum QueueName {
  /** Keeps Redis in step with Postgres (repair after a Redis flush or a missed publication). */
  Publication = "publication",
}

export enum JobName {
  /** Rebuilds every record the data plane reads from Postgres. */
  RepublishAll = "republish-all",
}

export interface JobPayloads {
  [JobName.RepublishAll]: { reason: string };
}
