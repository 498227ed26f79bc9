import assert from "node:assert/strict";
import { loadConfig } from "../../../../control-plane/src/config";
import { applyRetention } from "../../../../control-plane/src/usage/usage.retention";
import { startWorker } from "../../../../control-plane/src/worker/worker";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import { USAGE_CONSUMER_GROUP, UsageBatch } from "../../../../shared/src/usage/contract";
import { eventually } from "../../../helpers/eventually";
import { describeOverRedis } from "../../../helpers/redis";
import { Harness, startHarness } from "../harness";
import { ingestorFor, recorderFor } from "./helpers";

const WS = "11111111-1111-4111-8111-111111111111";
const APP = "22222222-2222-4222-8222-222222222222";

describeOverRedis("control-plane: usage ingestion (stream -> Postgres)", (redis) => {
  let h: Harness;

  before(async () => {
    h = await startHarness({}, { redis: redis() });
  });
  after(async () => {
    await h?.close();
  });
  beforeEach(async () => {
    await h.cp.dataSource.query("TRUNCATE usage_minute, usage_hour, usage_day, usage_ingested_batches");
    await h.redis.del(h.names.usageStream());
  });

  async function totals() {
    const [m] = await h.cp.dataSource.query("SELECT coalesce(sum(count),0)::int AS c FROM usage_minute");
    const [hr] = await h.cp.dataSource.query("SELECT coalesce(sum(count),0)::int AS c FROM usage_hour");
    const [d] = await h.cp.dataSource.query("SELECT coalesce(sum(count),0)::int AS c FROM usage_day");
    return { minute: m.c as number, hour: hr.c as number, day: d.c as number };
  }

  /** `n` flushes, each of `perFlush` requests over a few methods; returns the request total. */
  async function produce(n: number, perFlush: number, instanceId = "dp-a"): Promise<number> {
    const r = recorderFor(h, instanceId);
    const methods = ["eth_call", "eth_getLogs", "eth_blockNumber"];
    let total = 0;
    for (let f = 0; f < n; f++) {
      for (let i = 0; i < perFlush; i++) {
        r.rec.record({
          workspaceId: WS,
          appId: APP,
          network: "eth",
          method: methods[i % 3]!,
          category: i % 5 === 0 ? ErrorCategory.NodeError : ErrorCategory.Success,
          latencyMs: 5 + i,
        });
        total++;
      }
      await r.rec.flush();
    }
    await r.close();
    return total;
  }

  it("applies each entry once, in minute, hour and day rollups, and acknowledges it", async () => {
    const total = await produce(3, 10);
    const c = ingestorFor(h);
    assert.equal(await c.drain(), 3);
    assert.deepEqual(await totals(), { minute: total, hour: total, day: total });
    const pending = (await h.redis.xpending(h.names.usageStream(), USAGE_CONSUMER_GROUP)) as [number];
    assert.equal(pending[0], 0, "all acknowledged");
    assert.equal(c.ing.stats.applied, 3);
    c.close();
  });

  it("a crash after COMMIT and before XACK: the redelivered entries are not counted twice", async () => {
    const total = await produce(4, 7);
    // First consumer commits every entry but its acknowledgements never reach Redis (crash after COMMIT).
    const a = ingestorFor(h, { consumerName: "crashy", beforeAck: () => false });
    await a.drain();
    a.close();
    assert.deepEqual(await totals(), { minute: total, hour: total, day: total });
    const pending = (await h.redis.xpending(h.names.usageStream(), USAGE_CONSUMER_GROUP)) as [number];
    assert.equal(pending[0], 4, "committed but not acknowledged");
    // The same consumer restarting re-reads its own pending entries first.
    const again = ingestorFor(h, { consumerName: "crashy" });
    assert.equal(await again.drain(), 4);
    assert.equal(again.ing.stats.duplicates, 4);
    assert.equal(again.ing.stats.applied, 0);
    assert.deepEqual(await totals(), { minute: total, hour: total, day: total });
    const after = (await h.redis.xpending(h.names.usageStream(), USAGE_CONSUMER_GROUP)) as [number];
    assert.equal(after[0], 0);
    again.close();
  });

  it("a worker dying mid-stream: another consumer claims its pending entries; no loss, no double count", async () => {
    const total = await produce(9, 5);
    let n = 0;
    const a = ingestorFor(h, {
      consumerName: "dies",
      batch: 4,
      beforeAck: () => {
        if (++n === 3) throw new Error("killed (simulated)");
      },
    });
    await a.ing.consumer.ensureGroup();
    await a.ing.consumer.pollOnce(0).catch(() => undefined); // 2 acked, 3rd committed unacked, 4th read but never applied
    a.close();
    const mid = await totals();
    assert.equal(mid.minute, 15, "3 entries of 5 committed");
    const b = ingestorFor(h, { consumerName: "survivor", claimIdleMs: 1, batch: 3 });
    // Claimable once idle for more than claimIdleMs, by Redis's count.
    await eventually(async () => {
      const pending = (await h.redis.xpending(
        h.names.usageStream(),
        USAGE_CONSUMER_GROUP,
        "-",
        "+",
        10,
        "dies",
      )) as [string, string, number, number][];
      return pending.length === 2 && pending.every(([, , idleMs]) => idleMs > 1);
    }, "the dead consumer's entries idle");
    assert.equal(await b.drain(), 7, "2 claimed from the dead consumer + 5 new");
    assert.equal(b.ing.stats.duplicates, 1);
    assert.equal(b.ing.stats.applied, 6);
    assert.deepEqual(await totals(), { minute: total, hour: total, day: total });
    b.close();
  });

  it("two ingestors draining concurrently (same rollup rows) count everything exactly once", async () => {
    const total = (await produce(12, 9, "dp-1")) + (await produce(12, 9, "dp-2"));
    const x = ingestorFor(h, { consumerName: "x", batch: 2 });
    const y = ingestorFor(h, { consumerName: "y", batch: 3 });
    const [nx, ny] = await Promise.all([x.drain(), y.drain()]);
    assert.equal(nx + ny, 24);
    assert.deepEqual(await totals(), { minute: total, hour: total, day: total });
    x.close();
    y.close();
  });

  it("prunes idle consumers that have nothing pending", async () => {
    const a = ingestorFor(h, { consumerName: "old-a" });
    await a.drain();
    const b = ingestorFor(h, { consumerName: "live-b" });
    await b.drain();
    // Pruned once idle for more than 10 ms, by Redis's count.
    await eventually(async () => {
      const consumers = (await h.redis.xinfo(
        "CONSUMERS",
        h.names.usageStream(),
        USAGE_CONSUMER_GROUP,
      )) as unknown[][];
      const old = consumers.find((c) => c[1] === "old-a");
      return old !== undefined && Number(old[old.indexOf("idle") + 1]) > 10;
    }, "old-a idle");
    assert.deepEqual(await b.ing.consumer.pruneIdleConsumers(10), ["old-a"]);
    const left = (await h.redis.xinfo(
      "CONSUMERS",
      h.names.usageStream(),
      USAGE_CONSUMER_GROUP,
    )) as unknown[][];
    assert.deepEqual(
      left.map((c) => c[1]),
      ["live-b"],
    );
    a.close();
    b.close();
  });

  it("the same batch XADDed twice (a retried flush whose first reply was lost) counts once; bad rows and entries are skipped", async () => {
    const batch: UsageBatch = {
      v: 1,
      batchId: "dp-x:1",
      instanceId: "dp-x",
      createdAt: Date.now(),
      rows: [
        {
          minute: Math.floor(Date.now() / 60_000) * 60_000,
          workspaceId: null,
          appId: null,
          network: "eth",
          method: "eth_chainId",
          category: ErrorCategory.Success,
          count: 4,
          latencySumMs: 8,
          buckets: [0, 4, ...new Array(22).fill(0)],
        },
      ],
    };
    const withBad = {
      ...batch,
      rows: [
        ...batch.rows,
        { ...batch.rows[0]!, workspaceId: "ws-test", appId: "app-test" },
        { ...batch.rows[0]!, category: "Nope" },
      ],
    };
    await h.redis.xadd(h.names.usageStream(), "*", "batch", JSON.stringify(withBad));
    await h.redis.xadd(h.names.usageStream(), "*", "batch", JSON.stringify(batch));
    await h.redis.xadd(h.names.usageStream(), "*", "batch", "{not json");
    await h.redis.xadd(h.names.usageStream(), "*", "other", "x");
    const c = ingestorFor(h);
    assert.equal(await c.drain(), 4);
    assert.deepEqual(c.ing.stats, { applied: 1, duplicates: 1, invalid: 2, invalidRows: 2 });
    assert.deepEqual(await totals(), { minute: 4, hour: 4, day: 4 });
    const [row] = await h.cp.dataSource.query(
      "SELECT workspace_id, app_id, b01::int AS b01 FROM usage_minute",
    );
    assert.equal(
      row.workspace_id,
      "00000000-0000-0000-0000-000000000000",
      "null workspace stored as nil uuid",
    );
    assert.equal(row.b01, 4);
    c.close();
  });

  it("the worker process ingests in the background and stops cleanly", async () => {
    const config = loadConfig({
      DATABASE_URL: h.db.url,
      ...h.ns.redis.env(),
      REDIS_KEY_PREFIX: h.ns.prefix,
      LOG_LEVEL: "silent",
    });
    const w = await startWorker(config, undefined, { usage: { blockMs: 200 } });
    try {
      const total = await produce(2, 6, "dp-w");
      await eventually(async () => (await totals()).minute >= total, "the worker to ingest");
      assert.deepEqual(await totals(), { minute: total, hour: total, day: total });
    } finally {
      // A close that hung on the blocking read would fail by the test's timeout.
      await w.close();
    }
  });

  it("retention deletes minute / hour rows past their windows and keeps days", async () => {
    const ds = h.cp.dataSource;
    const now = Date.UTC(2026, 5, 1);
    const old = new Date(now - 10 * 86_400_000);
    const older = new Date(now - 100 * 86_400_000);
    const ins = (table: string, col: string, at: Date | string) =>
      ds.query(
        `INSERT INTO ${table} (${col}, workspace_id, app_id, network, method, category, count, latency_sum_ms)
         VALUES ($1, $2, $2, 'eth', 'eth_call', 'Success', 1, 1)`,
        [at, WS],
      );
    await ins("usage_minute", "minute", old);
    await ins("usage_minute", "minute", new Date(now - 3_600_000));
    await ins("usage_hour", "hour", older);
    await ins("usage_hour", "hour", old);
    await ins("usage_day", "day", "2020-01-01");
    const res = await applyRetention(
      ds,
      { minuteRetentionDays: 7, hourRetentionDays: 90, dayRetentionDays: 0 },
      now,
    );
    assert.equal(res.minute, 1);
    assert.equal(res.hour, 1);
    assert.equal(res.day, 0);
    assert.deepEqual(await totals(), { minute: 1, hour: 1, day: 1 });
    const res2 = await applyRetention(
      ds,
      { minuteRetentionDays: 7, hourRetentionDays: 90, dayRetentionDays: 365 },
      now,
    );
    assert.equal(res2.day, 1);
  });
});
