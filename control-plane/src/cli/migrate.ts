import "reflect-metadata";
import { z } from "zod";
import { commonEnvShape, parseEnv } from "../../../shared/src/config/env";
import { createDataSource, migrate } from "../db/data-source";
import { ensureDatabase } from "../db/ensure-database";

/**
 * Only DATABASE_URL: the migration Job (deploy/kubernetes) gets the database secret and nothing else, so
 * unlike the other CLIs this one does not load the control plane's config (which, with NODE_ENV=production,
 * would demand ADMIN_TOKEN and KEY_ENCRYPTION_SECRET).
 */
const MigrateEnvSchema = z.object({ DATABASE_URL: commonEnvShape.DATABASE_URL });

export interface MigrateResult {
  createdDatabase: boolean;
  /** Names of the migrations this run applied (empty: the schema was already current). */
  applied: string[];
}

/**
 * Creates the database if missing and applies pending migrations under the advisory lock, so a Job and a
 * control plane or worker starting at the same moment apply each migration once.
 */
export async function runMigrations(source: NodeJS.ProcessEnv = process.env): Promise<MigrateResult> {
  const { DATABASE_URL } = parseEnv(MigrateEnvSchema, source);
  const createdDatabase = await ensureDatabase(DATABASE_URL);
  const ds = createDataSource(DATABASE_URL, 2);
  await ds.initialize();
  try {
    return { createdDatabase, applied: await migrate(ds) };
  } finally {
    await ds.destroy();
  }
}

/** `node dist/control-plane/src/cli/migrate.js`: prints the result as JSON on stdout; a failure exits 1. */
if (require.main === module) {
  runMigrations().then(
    (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
    (err: unknown) => {
      process.stderr.write(`migrate failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
