import pino, { type Logger } from "pino";
import type { DataSource } from "typeorm";
import { REDACT_PATHS } from "../../../shared/src/log/logger";
import { createRedis, type RedisClient } from "../../../shared/src/redis/connect";
import { type ControlPlaneConfig, loadConfig, redisTarget } from "../config";
import { createDataSource, migrate } from "../db/data-source";
import { ensureDatabase } from "../db/ensure-database";

export interface CliContext {
  config: ControlPlaneConfig;
  log: Logger;
  ds: DataSource;
  redis: RedisClient;
}

/**
 * Runs a one-shot command against a migrated database and Redis, then closes both. Its JSON result goes
 * to stdout and nothing else does (logs go to stderr), so scripts can parse it; a failure exits 1.
 */
export function runCli(name: string, fn: (cli: CliContext) => Promise<unknown>): void {
  const run = async () => {
    const config = loadConfig();
    const log = pino(
      { name, level: config.logLevel, redact: { paths: REDACT_PATHS, censor: "[redacted]" } },
      pino.destination(2),
    );
    await ensureDatabase(config.databaseUrl);
    const ds = createDataSource(config.databaseUrl, 2);
    await ds.initialize();
    const redis = createRedis(redisTarget(config), "cp-commands");
    try {
      await migrate(ds);
      return await fn({ config, log, ds, redis });
    } finally {
      await redis.quit().catch(() => redis.disconnect());
      await ds.destroy();
    }
  };
  run().then(
    (result) => process.stdout.write(`${JSON.stringify(result, null, 2)}\n`),
    (err: unknown) => {
      process.stderr.write(`${name} failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
