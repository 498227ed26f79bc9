/**
 * `node dist/bench/usage-queries.js`: dashboard usage queries on a month of data. Not a timed test.
 *
 * Seeds a fresh database (dropped afterwards) with one workspace of 100 apps, as the ingestion would have
 * left it: usage_day and usage_hour for 30 days (5 methods x 2 categories per app), usage_minute for the last
 * 2 days (2 method/category pairs per app), plus a second workspace of the same size as noise. Then times
 * `history(days: 30)` and the 24-hour `methods` table through UsageService and through GraphQL.
 * Environment: BENCH_USAGE_RUNS (20), BENCH_USAGE_APPS (100), REDIS_URL.
 */
import "reflect-metadata";
import { loadConfig } from "../control-plane/src/config";
import { createControlPlane } from "../control-plane/src/server";
import { BUCKET_COLUMNS } from "../control-plane/src/usage/usage.sql";
import { MethodSort, SortOrder } from "../control-plane/src/usage/usage.types";
import { createTestDatabase } from "../test/helpers/postgres";
import { createTestRedisNamespace, TEST_REDIS_URL } from "../test/helpers/redis";

const RUNS = Number(process.env.BENCH_USAGE_RUNS ?? 20);
const APPS = Number(process.env.BENCH_USAGE_APPS ?? 100);
const ADMIN = "bench-admin-token-0123456789abcdef";

function stats(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!;
  return { median: +q(0.5).toFixed(2), p95: +q(0.95).toFixed(2), max: +s[s.length - 1]!.toFixed(2) };
}

async function time(fn: () => Promise<unknown>): Promise<ReturnType<typeof stats>> {
  for (let i = 0; i < 3; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = process.hrtime.bigint();
    await fn();
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return stats(out);
}

async function main(): Promise<void> {
  const db = await createTestDatabase();
  const ns = createTestRedisNamespace();
  const config = loadConfig({
    DATABASE_URL: db.url,
    REDIS_URL: process.env.REDIS_URL ?? TEST_REDIS_URL,
    REDIS_KEY_PREFIX: ns.prefix,
    LOG_LEVEL: "silent",
    CONTROL_PLANE_PORT: "0",
    ADMIN_TOKEN: ADMIN,
  });
  const cp = await createControlPlane(config, { host: "127.0.0.1", publishOnStart: false });
  try {
    const gql = async (query: string, token: string) => {
      const res = await fetch(cp.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify({ query }),
      });
      const body = (await res.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
      if (body.errors) throw new Error(JSON.stringify(body.errors));
      return body.data!;
    };
    const signUp = async (email: string) => {
      const d = (await gql(
        `mutation { signUp(input: { email: "${email}", password: "correct horse battery", workspaceName: "bench" }) { token } }`,
        "",
      )) as { signUp: { token: string } };
      const w = (await gql("{ workspace { id } }", d.signUp.token)) as { workspace: { id: string } };
      return { token: d.signUp.token, workspaceId: w.workspace.id };
    };
    const main = await signUp("bench@example.com");
    const noise = await signUp("noise@example.com");
    const ds = cp.dataSource;

    const t0 = Date.now();
    for (const ws of [main.workspaceId, noise.workspaceId]) {
      await ds.query(
        `INSERT INTO apps (workspace_id, name, environment)
         SELECT $1, 'app-' || g, 'PRODUCTION' FROM generate_series(1, $2) g`,
        [ws, APPS],
      );
    }
    const bucketsInsert = BUCKET_COLUMNS.join(", ");
    // Latency histogram of ~count requests, mostly in buckets 5..12 (7-100 ms), seeded by a hash.
    const bucketsSelect = BUCKET_COLUMNS.map((_, i) =>
      i >= 5 && i <= 12 ? `(c / 8 + (abs(hashtext(a.id::text || ${i})) % 3))` : "0",
    ).join(", ");
    const methods = `(VALUES ('eth_call'), ('eth_getLogs'), ('eth_blockNumber'), ('eth_getBalance'), ('eth_chainId')) m(method)`;
    const cats = `(VALUES ('Success', 1.0), ('Node Error', 0.02)) k(category, share)`;
    const seed = async (
      table: string,
      col: string,
      series: string,
      perRow: number,
      mset: string,
      cset: string,
    ) => {
      await ds.query(
        `INSERT INTO ${table} (${col}, workspace_id, app_id, network, method, category, count, latency_sum_ms, ${bucketsInsert})
         SELECT s.t, a.workspace_id, a.id, 'eth', m.method, k.category, c, c * 25.0, ${bucketsSelect}
         FROM ${series} AS s(t)
         CROSS JOIN apps a CROSS JOIN ${mset} CROSS JOIN ${cset}
         CROSS JOIN LATERAL (SELECT greatest(1, (${perRow} * k.share)::bigint + abs(hashtext(a.id::text || s.t::text)) % 7) AS c) cc`,
      );
    };
    await seed(
      "usage_day",
      "day",
      "(SELECT d::date FROM generate_series((now() AT TIME ZONE 'UTC')::date - 29, (now() AT TIME ZONE 'UTC')::date, interval '1 day') d)",
      2000,
      methods,
      cats,
    );
    await seed(
      "usage_hour",
      "hour",
      "generate_series(date_trunc('hour', now()) - interval '30 days', date_trunc('hour', now()), interval '1 hour')",
      80,
      methods,
      cats,
    );
    await seed(
      "usage_minute",
      "minute",
      "generate_series(date_trunc('minute', now()) - interval '2 days', date_trunc('minute', now()), interval '1 minute')",
      2,
      "(VALUES ('eth_call')) m(method)",
      cats,
    );
    await ds.query("ANALYZE usage_day; ANALYZE usage_hour; ANALYZE usage_minute");
    const counts = (await ds.query(
      `SELECT (SELECT count(*) FROM usage_minute)::int AS minute, (SELECT count(*) FROM usage_hour)::int AS hour,
              (SELECT count(*) FROM usage_day)::int AS day`,
    )) as { minute: number; hour: number; day: number }[];
    const seedSeconds = (Date.now() - t0) / 1000;

    const ctx = { principal: { kind: "operator" as const }, ip: "127.0.0.1" };
    const usage = cp.services.usage;
    const results = {
      rows: counts[0],
      seedSeconds: +seedSeconds.toFixed(1),
      apps: APPS,
      runs: RUNS,
      "service history(days: 30)": await time(async () => {
        const r = await usage.report(ctx, { workspaceId: main.workspaceId });
        const h = await usage.history(r, 30);
        if (h.length !== 30 || h[29]!.byApp.length !== APPS) throw new Error("unexpected history");
      }),
      "service methods (24 h)": await time(async () => {
        const r = await usage.report(ctx, { workspaceId: main.workspaceId });
        const m = await usage.methods(r, MethodSort.REQUESTS, SortOrder.DESC);
        if (m.length !== 5) throw new Error("unexpected methods");
      }),
      "service requests24h + responseTime (24 h)": await time(async () => {
        const r = await usage.report(ctx, { workspaceId: main.workspaceId });
        await Promise.all([usage.requests(r), usage.responseTime(r)]);
      }),
      "graphql history(days: 30)": await time(() =>
        gql(
          "{ usage(filter: {}) { history(days: 30) { date total byApp { app { id name } count } limitReached } } }",
          main.token,
        ),
      ),
      "graphql methods (24 h)": await time(() =>
        gql("{ usage(filter: {}) { methods { method requests errors p50 p95 avg } } }", main.token),
      ),
      "graphql dashboard (all fields)": await time(() =>
        gql(
          `{ usage(filter: {}) { requests24h { total success errors { nodeError } series { at success errors } }
             responseTime { p50 p95 avg } methods(sortBy: P95) { method requests p95 }
             history(days: 30) { date total limitReached } today { count limit resetsAt } } }`,
          main.token,
        ),
      ),
    };
    process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  } finally {
    await cp.close();
    await ns.cleanup();
    await db.drop();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
