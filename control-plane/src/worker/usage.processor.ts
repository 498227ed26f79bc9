import { Job } from "bullmq";
import { DataSource } from "typeorm";
import { Logger } from "../../../shared/src/log/logger";
import { JobName, JobPayloads } from "../../../shared/src/queue/names";
import { UsageWorkerConfig } from "../usage/usage.config";
import { applyRetention, RetentionResult } from "../usage/usage.retention";

/** Processes QueueName.Usage jobs (retention of the usage rollups). */
export function createUsageProcessor(ds: DataSource, cfg: UsageWorkerConfig, log: Logger) {
  return async (job: Job<JobPayloads[JobName.UsageRetention]>): Promise<RetentionResult> => {
    if (job.name !== JobName.UsageRetention) throw new Error(`unknown job ${job.name}`);
    const res = await applyRetention(ds, cfg);
    log.info(res, "usage retention applied");
    return res;
  };
}
