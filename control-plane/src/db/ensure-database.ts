import { Client } from "pg";

/**
 * Creates the database named in `databaseUrl` when it does not exist yet (so the defaults work on a fresh
 * Postgres), connecting to the server's `postgres` database to do it. Returns true when it created it.
 * Two processes racing here are fine: the loser's duplicate error is ignored.
 */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const probe = new Client({ connectionString: databaseUrl });
  try {
    await probe.connect();
    return false;
  } catch (err) {
    if ((err as { code?: string }).code !== "3D000") throw err; // invalid_catalog_name
  } finally {
    await probe.end().catch(() => undefined);
  }
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ""));
  url.pathname = "/postgres";
  const admin = new Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    // CREATE DATABASE copies template1 and fails with 55006 while another CREATE DATABASE is copying it
    // at the same moment; that is transient, so retry for up to ~5 s.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`);
        return true;
      } catch (err) {
        // duplicate_database, or a unique violation on pg_database when both CREATEs ran at once.
        const code = (err as { code?: string }).code;
        if (code === "42P04" || code === "23505") return false;
        if (code !== "55006" || attempt >= 50) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await admin.end();
  }
}
