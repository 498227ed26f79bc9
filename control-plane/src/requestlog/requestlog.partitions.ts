import type { DataSource, EntityManager } from "typeorm";

const DAY_MS = 86_400_000;
/** `request_log_p20261124`: the partition holding that UTC day. */
const PARTITION_RE = /^request_log_p(\d{4})(\d{2})(\d{2})$/;

/** Start (epoch ms) of the UTC day holding `ms`. */
export function dayStart(ms: number): number {
  return ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
}

export function partitionName(dayStartMs: number): string {
  return `request_log_p${new Date(dayStartMs).toISOString().slice(0, 10).replaceAll("-", "")}`;
}

/**
 * Creates the day partitions holding `days` (epoch ms, any time in the day) unless they exist. Two
 * workers may race on one: the loser's "already exists" (42P07) is the outcome it wanted.
 */
export async function ensurePartitions(
  db: DataSource | EntityManager,
  days: Iterable<number>,
): Promise<string[]> {
  const created: string[] = [];
  for (const d of new Set([...days].map(dayStart))) {
    const name = partitionName(d);
    const from = new Date(d).toISOString();
    const to = new Date(d + DAY_MS).toISOString();
    try {
      const exists = (await db.query(`SELECT to_regclass($1) AS t`, [name])) as { t: string | null }[];
      if (exists[0]?.t !== null) continue;
      await db.query(
        `CREATE TABLE IF NOT EXISTS ${name} PARTITION OF request_log FOR VALUES FROM ('${from}') TO ('${to}')`,
      );
      created.push(name);
    } catch (err) {
      if ((err as { code?: string }).code !== "42P07") throw err;
    }
  }
  return created;
}

/** Day partitions that exist, oldest first, with their day start (epoch ms). */
export async function listPartitions(
  db: DataSource | EntityManager,
): Promise<{ name: string; day: number }[]> {
  const rows = (await db.query(
    `SELECT c.relname AS name FROM pg_inherits i
       JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
      WHERE p.relname = 'request_log' AND p.relnamespace = c.relnamespace
        AND p.relnamespace = current_schema()::regnamespace`,
  )) as { name: string }[];
  const out: { name: string; day: number }[] = [];
  for (const r of rows) {
    const m = PARTITION_RE.exec(r.name);
    if (m) out.push({ name: r.name, day: Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) });
  }
  return out.sort((a, b) => a.day - b.day);
}

export interface PartitionMaintenance {
  created: string[];
  dropped: string[];
}

/**
 * The repeatable job: partitions for today and the next `aheadDays` days exist (so ingestion never waits
 * on DDL at midnight), and every partition whose whole day ended more than `retentionDays` ago is dropped
 * (DROP TABLE: instant, no vacuum debt, unlike DELETE).
 */
export async function maintainPartitions(
  ds: DataSource,
  retentionDays: number,
  now = Date.now(),
  aheadDays = 2,
): Promise<PartitionMaintenance> {
  const today = dayStart(now);
  const days: number[] = [];
  for (let i = 0; i <= aheadDays; i++) days.push(today + i * DAY_MS);
  const created = await ensurePartitions(ds, days);
  const cutoff = retentionCutoff(now, retentionDays);
  const dropped: string[] = [];
  for (const p of await listPartitions(ds)) {
    if (p.day + DAY_MS > cutoff) continue;
    await ds.query(`DROP TABLE IF EXISTS ${p.name}`);
    dropped.push(p.name);
  }
  return { created, dropped };
}

/** Records older than this (epoch ms) are past the retention: neither kept nor given a partition. */
export function retentionCutoff(now: number, retentionDays: number): number {
  return now - retentionDays * DAY_MS;
}
