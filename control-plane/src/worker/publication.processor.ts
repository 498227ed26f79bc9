import { Job } from "bullmq";
import { Logger } from "../../../shared/src/log/logger";
import { JobName, JobPayloads } from "../../../shared/src/queue/names";
import { PublicationService, RepublishResult } from "../publication/publication.service";

/** Processes QueueName.Publication jobs. */
export function createPublicationProcessor(publication: PublicationService, log: Logger) {
  return async (job: Job<JobPayloads[JobName.RepublishAll]>): Promise<RepublishResult> => {
    if (job.name !== JobName.RepublishAll) throw new Error(`unknown job ${job.name}`);
    const res = await publication.republishAllSerial();
    log.info({ ...res, reason: job.data?.reason }, "re-published all records");
    return res;
  };
}
