import "reflect-metadata";
import { Queue, Worker } from "bullmq";
import type { Registry } from "prom-client";
import { deriveEncryptionKey } from "../../../shared/src/crypto/api-key";
import { createLogger, Logger } from "../../../shared/src/log/logger";
import { JobName, JobPayloads, QueueName } from "../../../shared/src/queue/names";
import { createRedis, isCluster, type RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { REQUEST_LOG_CONSUMER_GROUP } from "../../../shared/src/requestlog/contract";
import { tracedProcessor } from "../../../shared/src/telemetry/jobs";
import { USAGE_CONSUMER_GROUP } from "../../../shared/src/usage/contract";
import { ControlPlaneConfig, redisTarget } from "../config";
import { createDataSource, migrate } from "../db/data-source";
import { ensureDatabase } from "../db/ensure-database";
import { createNodeProvider, loadNodeConfig, NodeConfig } from "../nodes/node.config";
import { NodeWorker, startNodeWorker } from "../nodes/node.processor";
import type { NodeProvider } from "../nodes/providers/provider";
import { PublicationService } from "../publication/publication.service";
import { RequestLogIngestor } from "../requestlog/requestlog.ingestor";
import { maintainPartitions } from "../requestlog/requestlog.partitions";
import { loadUsageWorkerConfig, UsageWorkerConfig } from "../usage/usage.config";
import { UsageIngestor } from "../usage/usage.ingestor";
import { startWebhookWorker, WebhookWorker } from "../webhooks/webhook.processor";
import { createPublicationProcessor } from "./publication.processor";
import { RedisRecoveryService } from "./recovery.service";
import { createUsageProcessor } from "./usage.processor";
import { countFailures, workerMetricsRegistry } from "./worker.metrics";

/** Id of the repeatable full re-publish (upsertJobScheduler is idempotent on it). */
export const REPUBLISH_SCHEDULER_ID = "republish-all-every";
/** Id of the repeatable usage retention job. */
export const USAGE_RETENTION_SCHEDULER_ID = "usage-retention-every";
/** Id of the repeatable request-log partition job (create ahead, drop past the retention). */
export const REQUEST_LOG_PARTITIONS_SCHEDULER_ID = "request-log-partitions-every";

export interface ControlPlaneWorker {
  queue: Queue;
  worker: Worker;
  /** Usage stream consumer (undefined when USAGE_INGEST_ENABLED=false). */
  usageIngestor?: UsageIngestor;
  /** Request-log stream consumer (undefined when REQUEST_LOG_INGEST_ENABLED=false). */
  requestLogIngestor?: RequestLogIngestor;
  /** Dedicated nodes (QueueName.Nodes). */
  nodes: NodeWorker;
  /** Webhook fan-out, deliveries, quota-threshold check (QueueName.Webhooks). */
  webhooks: WebhookWorker;
  /** Watches the publication marker and repairs Redis when it lost its data. */
  recovery: RedisRecoveryService;
  /**
   * This worker's series (worker.metrics.ts): queue depth and failures, stream lag, dead letters, webhook
   * outcomes; worker/main.ts serves them on WORKER_METRICS_PORT with the runtime series.
   */
  metrics: Registry;
  close(): Promise<void>;
}

export interface WorkerOptions {
  /** Overrides of the usage settings read from the environment (USAGE_*). */
  usage?: Partial<UsageWorkerConfig>;
  /** Overrides of the dedicated-node settings read from the environment (NODE_*), and the provider. */
  nodes?: Partial<NodeConfig>;
  nodeProvider?: NodeProvider;
}

/**
 * The worker process: BullMQ workers for QueueName.Publication (repeatable JobName.RepublishAll) and
 * QueueName.Usage (repeatable JobName.UsageRetention), plus the usage stream consumer (UsageIngestor).
 */
export async function startWorker(
  config: ControlPlaneConfig,
  log?: Logger,
  opts: WorkerOptions = {},
): Promise<ControlPlaneWorker> {
  const logger = log ?? createLogger("control-plane-worker", config.logLevel);
  const usageCfg = { ...loadUsageWorkerConfig(), ...opts.usage };
  const names = new RedisNames(config.redisKeyPrefix);
  await ensureDatabase(config.databaseUrl);
  const ds = createDataSource(config.databaseUrl, 4);
  await ds.initialize();
  await migrate(ds);
  const target = redisTarget(config);
  const redis = createRedis(target, "cp-commands");
  const bullConnection = createRedis(target, "blocking");
  // Redis down is an expected state (the connections reconnect, RedisRecoveryService repairs what it
  // lost): log at most one line per connection per 10 s instead of an unhandled 'error' per attempt.
  const quiet = (what: string) => {
    let last = 0;
    return (err: Error) => {
      if (Date.now() - last < 10_000) return;
      last = Date.now();
      logger.warn({ err: err.message, connection: what }, "redis connection error");
    };
  };
  redis.on("error", quiet("commands"));
  bullConnection.on("error", quiet("bullmq"));
  const publication = new PublicationService(ds, redis, names, logger, {
    minMs: config.publicationRetryMinMs,
    maxMs: config.publicationRetryMaxMs,
  });
  const prefix = names.bullPrefix(isCluster(bullConnection));
  const queue = new Queue<JobPayloads[JobName.RepublishAll]>(QueueName.Publication, {
    connection: bullConnection,
    prefix,
  });
  const ensurePublicationScheduler = () =>
    queue.upsertJobScheduler(
      REPUBLISH_SCHEDULER_ID,
      { every: config.republishIntervalSeconds * 1000 },
      {
        name: JobName.RepublishAll,
        data: { reason: "periodic" },
        opts: { removeOnComplete: 100, removeOnFail: 100 },
      },
    );
  await ensurePublicationScheduler();
  const worker = new Worker(
    QueueName.Publication,
    tracedProcessor(createPublicationProcessor(publication, logger)),
    {
      connection: bullConnection,
      prefix,
      concurrency: 1,
    },
  );
  worker.on("failed", (job, err) => logger.error({ err, job: job?.name }, "publication job failed"));
  countFailures(QueueName.Publication, worker);
  worker.on("error", quiet("publication worker"));
  queue.on("error", quiet("publication queue"));
  await worker.waitUntilReady();

  // Usage: stream ingestion (own blocking connection) and the repeatable retention job.
  const usageQueue = new Queue<JobPayloads[JobName.UsageRetention | JobName.RequestLogPartitions]>(
    QueueName.Usage,
    {
      connection: bullConnection,
      prefix,
    },
  );
  const ensureUsageScheduler = () =>
    usageQueue.upsertJobScheduler(
      USAGE_RETENTION_SCHEDULER_ID,
      { every: usageCfg.retentionIntervalSeconds * 1000 },
      { name: JobName.UsageRetention, data: {}, opts: { removeOnComplete: 100, removeOnFail: 100 } },
    );
  // Request log: partitions exist before the first record arrives; the job keeps them ahead of the clock.
  await maintainPartitions(ds, usageCfg.requestLogRetentionDays);
  const ensureRequestLogScheduler = () =>
    usageQueue.upsertJobScheduler(
      REQUEST_LOG_PARTITIONS_SCHEDULER_ID,
      { every: usageCfg.retentionIntervalSeconds * 1000 },
      { name: JobName.RequestLogPartitions, data: {}, opts: { removeOnComplete: 100, removeOnFail: 100 } },
    );
  const ensureUsageSchedulers = async () => {
    await ensureUsageScheduler();
    await ensureRequestLogScheduler();
  };
  await ensureUsageSchedulers();
  const usageWorker = new Worker(
    QueueName.Usage,
    tracedProcessor(createUsageProcessor(ds, usageCfg, logger)),
    {
      connection: bullConnection,
      prefix,
      concurrency: 1,
    },
  );
  usageWorker.on("failed", (job, err) => logger.error({ err, job: job?.name }, "usage job failed"));
  countFailures(QueueName.Usage, usageWorker);
  usageWorker.on("error", quiet("usage worker"));
  usageQueue.on("error", quiet("usage queue"));
  await usageWorker.waitUntilReady();
  let usageRedis: RedisClient | undefined;
  let usageIngestor: UsageIngestor | undefined;
  if (usageCfg.enabled) {
    usageRedis = createRedis(target, "blocking");
    usageRedis.on("error", quiet("usage stream"));
    usageIngestor = new UsageIngestor(ds, usageRedis, names, logger, {
      consumerName: usageCfg.consumerName,
      blockMs: usageCfg.blockMs,
      batch: usageCfg.batch,
      claimIdleMs: usageCfg.claimIdleMs,
      maxAttempts: usageCfg.maxAttempts,
      retryBaseMs: usageCfg.retryBaseMs,
    });
    await usageIngestor.consumer.start();
    logger.info({ consumer: usageCfg.consumerName }, "usage ingestion started");
  }
  let requestLogRedis: RedisClient | undefined;
  let requestLogIngestor: RequestLogIngestor | undefined;
  if (usageCfg.requestLogIngestEnabled) {
    requestLogRedis = createRedis(target, "blocking");
    requestLogRedis.on("error", quiet("request-log stream"));
    requestLogIngestor = new RequestLogIngestor(ds, requestLogRedis, names, logger, {
      consumerName: usageCfg.consumerName,
      blockMs: usageCfg.blockMs,
      batch: usageCfg.batch,
      claimIdleMs: usageCfg.claimIdleMs,
      retentionDays: usageCfg.requestLogRetentionDays,
      maxAttempts: usageCfg.maxAttempts,
      retryBaseMs: usageCfg.retryBaseMs,
    });
    await requestLogIngestor.consumer.start();
  }
  // Last: this line is the readiness signal (process tests and operators wait for it).
  logger.info({ everySeconds: config.republishIntervalSeconds }, "publication worker started");
  // Webhooks first: the node worker announces status changes through its emitter.
  const webhooks = await startWebhookWorker({
    ds,
    redis,
    bullConnection,
    names,
    cfg: config.webhooks,
    encryptionKey: deriveEncryptionKey(config.keyEncryptionSecret),
    log: logger,
  });
  // Dedicated nodes: provisioning / roll / stop / delete jobs and the sync + validator sweeps.
  const nodeCfg = { ...loadNodeConfig(), ...opts.nodes };
  const nodes = await startNodeWorker({
    ds,
    redis,
    bullConnection,
    names,
    publication,
    provider: opts.nodeProvider ?? createNodeProvider(nodeCfg, logger),
    cfg: nodeCfg,
    log: logger,
    webhooks: webhooks.emitter,
  });
  const recovery = new RedisRecoveryService({
    redis,
    names,
    log: logger,
    intervalMs: config.redisMarkerCheckIntervalMs,
    republish: () => publication.republishAllSerial(),
    async recreate() {
      // On the command connection: the ingestor's own one may be blocked in XREADGROUP (blockMs).
      await usageIngestor?.consumer.ensureGroup(redis);
      await requestLogIngestor?.consumer.ensureGroup(redis);
      await ensurePublicationScheduler();
      await ensureUsageSchedulers();
      await nodes.ensureSchedulers();
      await webhooks.ensureSchedulers();
    },
  });
  recovery.start();
  nodes.queue.on("error", quiet("nodes queue"));
  countFailures(QueueName.Nodes, nodes.worker);
  countFailures(QueueName.Webhooks, webhooks.worker);
  const consumed = (label: string, stream: string, group: string) => ({
    label,
    stream,
    group,
    dead: names.deadLetterStream(stream),
  });
  const metrics = workerMetricsRegistry({
    redis,
    queues: [queue, usageQueue, nodes.queue, webhooks.queue.queue],
    // Both streams whether or not this worker consumes them: the lag is the stream's, whoever reads it.
    streams: [
      consumed("usage", names.usageStream(), USAGE_CONSUMER_GROUP),
      consumed("request-log", names.requestLogStream(), REQUEST_LOG_CONSUMER_GROUP),
    ],
  });
  return {
    queue,
    worker,
    usageIngestor,
    requestLogIngestor,
    nodes,
    webhooks,
    recovery,
    metrics,
    async close() {
      await recovery.stop();
      publication.stop();
      await nodes.close();
      await webhooks.close();
      await usageIngestor?.consumer.stop();
      usageRedis?.disconnect();
      await requestLogIngestor?.consumer.stop();
      requestLogRedis?.disconnect();
      await usageWorker.close();
      await usageQueue.close();
      await worker.close();
      await queue.close();
      bullConnection.disconnect();
      await redis.quit().catch(() => redis.disconnect());
      await ds.destroy();
    },
  };
}
