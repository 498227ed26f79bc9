import { Job } from "bullmq";
import { DataSource } from "typeorm";
import { Logger } from "../../../shared/src/log/logger";
import { JobName, JobPayloads } from "../../../shared/src/queue/names";
import { maintainPartitions, PartitionMaintenance } from "../requestlog/requestlog.partitions";
import { UsageWorkerConfig } from "../usage/usage.config";
import { applyRetention, RetentionResult } from "../usage/usage.retention";

/** Processes QueueName.Usage jobs (retention of the usage rollups; request-log partitions). */
export function createUsageProcessor(ds: DataSource, cfg: UsageWorkerConfig, log: Logger) {
  return async (
    job: Job<JobPayloads[JobName.UsageRetention | JobName.RequestLogPartitions]>,
  ): Promise<RetentionResult | PartitionMaintenance> => {
    if (job.name === JobName.RequestLogPartitions) {
      const res = await maintainPartitions(ds, cfg.requestLogRetentionDays);
      if (res.created.length > 0 || res.dropped.length > 0)
        log.info(res, "request-log partitions maintained");
      return res;
    }
    if (job.name !== JobName.UsageRetention) throw new Error(`unknown job ${job.name}`);
    const res = await applyRetention(ds, cfg);
    log.info(res, "usage retention applied");
    return res;
  };
}
