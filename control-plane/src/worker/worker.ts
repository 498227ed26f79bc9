import "reflect-metadata";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { createLogger, Logger } from "../../../shared/src/log/logger";
import { JobName, JobPayloads, QueueName } from "../../../shared/src/queue/names";
import { RedisNames } from "../../../shared/src/redis/keys";
import { ControlPlaneConfig } from "../config";
import { createDataSource, migrate } from "../db/data-source";
import { ensureDatabase } from "../db/ensure-database";
import { PublicationService } from "../publication/publication.service";
import { createPublicationProcessor } from "./publication.processor";

/** Id of the repeatable full re-publish (upsertJobScheduler is idempotent on it). */
export const REPUBLISH_SCHEDULER_ID = "republish-all-every";

export interface ControlPlaneWorker {
  queue: Queue;
  worker: Worker;
  close(): Promise<void>;
}

/** BullMQ worker for QueueName.Publication with a repeatable JobName.RepublishAll. */
export async function startWorker(config: ControlPlaneConfig, log?: Logger): Promise<ControlPlaneWorker> {
  const logger = log ?? createLogger("control-plane-worker", config.logLevel);
  const names = new RedisNames(config.redisKeyPrefix);
  await ensureDatabase(config.databaseUrl);
  const ds = createDataSource(config.databaseUrl, 4);
  await ds.initialize();
  await migrate(ds);
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2 });
  const bullConnection = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
  const publication = new PublicationService(ds, redis, names, logger);
  const prefix = names.bullPrefix();
  const queue = new Queue<JobPayloads[JobName.RepublishAll]>(QueueName.Publication, {
    connection: bullConnection,
    prefix,
  });
  await queue.upsertJobScheduler(
    REPUBLISH_SCHEDULER_ID,
    { every: config.republishIntervalSeconds * 1000 },
    {
      name: JobName.RepublishAll,
      data: { reason: "periodic" },
      opts: { removeOnComplete: 100, removeOnFail: 100 },
    },
  );
  const worker = new Worker(QueueName.Publication, createPublicationProcessor(publication, logger), {
    connection: bullConnection,
    prefix,
    concurrency: 1,
  });
  worker.on("failed", (job, err) => logger.error({ err, job: job?.name }, "publication job failed"));
  await worker.waitUntilReady();
  logger.info({ everySeconds: config.republishIntervalSeconds }, "publication worker started");
  return {
    queue,
    worker,
    async close() {
      await worker.close();
      await queue.close();
      bullConnection.disconnect();
      await redis.quit().catch(() => redis.disconnect());
      await ds.destroy();
    },
  };
}
