import "reflect-metadata";
import { Redis } from "ioredis";
import pino from "pino";
import { REDACT_PATHS } from "../../../shared/src/log/logger";
import { RedisNames } from "../../../shared/src/redis/keys";
import { loadConfig } from "../config";
import { createDataSource, migrate } from "../db/data-source";
import { ensureDatabase } from "../db/ensure-database";
import { PublicationService } from "../publication/publication.service";

/** `npm run republish`: rebuild every Redis record from Postgres once, print the counts as JSON. */
async function main(): Promise<void> {
  const config = loadConfig();
  // Logs go to stderr: stdout carries only the JSON result.
  const log = pino(
    { name: "republish", level: config.logLevel, redact: { paths: REDACT_PATHS, censor: "[redacted]" } },
    pino.destination(2),
  );
  await ensureDatabase(config.databaseUrl);
  const ds = createDataSource(config.databaseUrl, 2);
  await ds.initialize();
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2 });
  try {
    await migrate(ds);
    const res = await new PublicationService(
      ds,
      redis,
      new RedisNames(config.redisKeyPrefix),
      log,
    ).republishAll();
    process.stdout.write(`${JSON.stringify(res)}\n`);
  } finally {
    await redis.quit().catch(() => redis.disconnect());
    await ds.destroy();
  }
}

main().catch((err) => {
  process.stderr.write(`republish failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
