import assert from "node:assert/strict";
import { Queue } from "bullmq";
import { RequestLogIngestor } from "../../../control-plane/src/requestlog/requestlog.ingestor";
import {
  dayStart,
  ensurePartitions,
  listPartitions,
  maintainPartitions,
  partitionName,
} from "../../../control-plane/src/requestlog/requestlog.partitions";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import type { DataPlane } from "../../../data-plane/src/data-plane";
import { createLogger } from "../../../shared/src/log/logger";
import { JobName, QueueName } from "../../../shared/src/queue/names";
import {
  REQUEST_LOG_CONSUMER_GROUP,
  REQUEST_LOG_STREAM_FIELD,
} from "../../../shared/src/requestlog/contract";
import { eventually, nextSecond } from "../../helpers/eventually";
import {
  createApp,
  createStubNetwork,
  type Harness,
  type Json,
  startHarness,
  startHarnessDataPlane,
} from "../control-plane/harness";
import { post, sleep } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";
import { TestWsClient } from "../data-plane/ws/ws-client";

const DAY = 86_400_000;
const FIELDS = `time requestId item workspaceId appId network transport method httpStatus category reason latencyMs clientIp`;
const LOG = `query($f: RequestLogFilter!, $first: Int, $after: String) {
  requestLog(filter: $f, first: $first, after: $after) {
    edges { cursor node { ${FIELDS} } } pageInfo { hasNextPage endCursor } } }`;

describe("request log: gateway -> Redis stream -> worker -> partitioned Postgres -> GraphQL requestLog", function () {
  this.timeout(180_000);
  let h: Harness;
  let stub: StubUpstream;
  let worker: ControlPlaneWorker | undefined;
  let dp: DataPlane | undefined;
  let a: { token: string; workspaceId: string };
  let b: { token: string; workspaceId: string };
  let appA: { id: string; apiKey: string };
  let appB: { id: string; apiKey: string };
  let base = "";
  const startDp = async (samplePercent: string) => {
    await dp?.close();
    dp = await startHarnessDataPlane(h, {
      HEALTH_CHECK_INTERVAL_MS: "200",
      USAGE_FLUSH_INTERVAL_MS: "200",
      REQUEST_LOG_FLUSH_INTERVAL_MS: "100",
      REQUEST_LOG_SAMPLE_PERCENT: samplePercent,
      RATE_LIMIT_MODE: "local",
      QUOTA_MODE: "off",
      SHARED_NODE_EXTRA_NAMESPACES: "stub",
    });
    base = `http://127.0.0.1:${dp.port}`;
  };
  const startLogWorker = () =>
    startWorker(h.config, undefined, { usage: { blockMs: 100, consumerName: "reqlog-test" } });
  const rpc = (key = appA.apiKey) => `${base}/evm-stub/rpc?apikey=${key}`;
  const list = async (token: string, filter: Json, first?: number, after?: string) =>
    (await h.ok(LOG, { f: filter, first, after }, token)).requestLog as {
      edges: { cursor: string; node: Json }[];
      pageInfo: { hasNextPage: boolean; endCursor: string | null };
    };
  /** Polls until `filter` lists `n` records (fails past 30 s or on more). */
  const waitFor = async (token: string, filter: Json, n: number): Promise<Json[]> => {
    const t0 = Date.now();
    let got: Json[] = [];
    while (Date.now() - t0 < 30_000) {
      got = (await list(token, filter, 500)).edges.map((e) => e.node);
      if (got.length >= n) {
        assert.equal(got.length, n, "more records than expected");
        return got;
      }
      await sleep(50);
    }
    throw new Error(`request log listed ${got.length} records, expected ${n}`);
  };
  /** A JSON-RPC error the stub answers (Node Error); its requestId travels in X-Request-Id. */
  const nodeError = async (key = appA.apiKey) => {
    const r = await post(rpc(key), { jsonrpc: "2.0", id: 1, method: "stub_error" });
    assert.equal(r.json.error.code, -32000);
    return r.headers.get("x-request-id")!;
  };

  before(async () => {
    h = await startHarness();
    stub = await new StubUpstream().start();
    await createStubNetwork(h, stub.url);
    a = await h.signUp();
    b = await h.signUp();
    appA = await createApp(h, a.token, "a-app");
    appB = await createApp(h, b.token, "b-app");
    worker = await startLogWorker();
    await startDp("100");
  });

  after(async () => {
    await dp?.close();
    await worker?.close();
    await stub?.stop();
    await h?.close();
  });

  it("an error request appears, found by its requestId, with every field and the client IP truncated", async () => {
    const r = await post(rpc(), "{not json");
    assert.equal(r.status, 400);
    const requestId = r.json.error.data.requestId as string;
    assert.equal(r.headers.get("x-request-id"), requestId);
    const [rec] = await waitFor(a.token, { requestId }, 1);
    assert.equal(rec.requestId, requestId);
    assert.equal(rec.item, 0);
    assert.equal(rec.workspaceId, a.workspaceId);
    assert.equal(rec.appId, appA.id);
    assert.equal(rec.network, "evm-stub");
    assert.equal(rec.transport, "http");
    assert.equal(rec.method, "other");
    assert.equal(rec.httpStatus, 400);
    assert.equal(rec.category, "Client Error");
    assert.equal(rec.reason, "parse_error");
    assert.ok(rec.latencyMs >= 0 && rec.latencyMs < 30_000, `latency ${rec.latencyMs}`);
    assert.equal(rec.clientIp, "127.0.0.0/24");
    assert.ok(Math.abs(Date.parse(rec.time) - Date.now()) < 60_000);

    // A node's JSON-RPC error (200, Node Error) and a batch: one record per element, `item` its position.
    const nodeReq = await nodeError();
    const [n] = await waitFor(a.token, { requestId: nodeReq }, 1);
    assert.equal(n.method, "stub_error");
    assert.equal(n.httpStatus, 200);
    assert.equal(n.category, "Node Error");
    const br = await post(rpc(), [
      { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
      { jsonrpc: "2.0", id: 2, method: "stub_error" },
    ]);
    const batchId = br.headers.get("x-request-id")!;
    const items = await waitFor(a.token, { requestId: batchId }, 2);
    assert.deepEqual(
      items.map((i) => [i.item, i.method, i.category]),
      [
        [1, "stub_error", "Node Error"],
        [0, "eth_chainId", "Success"],
      ],
    );
  });

  it("logs WebSocket request objects (transport ws, status 0) and their refusals", async () => {
    const ws = await TestWsClient.open(`ws://127.0.0.1:${dp!.port}/evm-stub/rpc?apikey=${appA.apiKey}`);
    try {
      assert.equal((await ws.call("stub_invalidParams")).error.code, -32602);
      ws.sendRaw("{bad");
      await ws.until(() => ws.messages.some((m) => m?.error?.code === -32700), 5000, "parse error");
    } finally {
      ws.close();
    }
    const [rec] = await waitFor(a.token, { method: "stub_invalidParams" }, 1);
    assert.equal(rec.transport, "ws");
    assert.equal(rec.httpStatus, 0);
    assert.equal(rec.category, "Client Error");
    assert.equal(rec.appId, appA.id);
    assert.equal(rec.clientIp, "127.0.0.0/24");
    const parseErr = ws.messages.find((m) => m?.error?.code === -32700);
    const [p] = await waitFor(a.token, { requestId: parseErr.error.data.requestId }, 1);
    assert.equal(p.reason, "parse_error");
    assert.equal(p.transport, "ws");
  });

  it("is tenant-isolated: another workspace neither lists nor finds the record", async () => {
    const requestId = await nodeError();
    await waitFor(a.token, { requestId }, 1);
    assert.equal((await list(b.token, { requestId })).edges.length, 0);
    for (const e of (await list(b.token, {}, 500)).edges) assert.equal(e.node.workspaceId, b.workspaceId);
    const denied = await h.gql(LOG, { f: { workspaceId: a.workspaceId } }, b.token);
    assert.ok(denied.errors?.length, "B read A's workspace");
    const app = await h.gql(LOG, { f: { appId: appA.id } }, b.token);
    assert.ok(app.errors?.length, "B read A's app");
    // The owner's filters: app, network, method, category, time range.
    const mine = await list(a.token, { appId: appA.id, method: "stub_error", category: "Node Error" }, 500);
    assert.ok(mine.edges.length >= 3);
    assert.equal((await list(a.token, { network: "evm-other" })).edges.length, 0);
    assert.equal((await list(a.token, { to: new Date(Date.now() - DAY).toISOString() })).edges.length, 0);
  });

  it("pages newest first with cursors: every record once, in order", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await nodeError(appB.apiKey));
    await waitFor(b.token, { method: "stub_error" }, 7);
    const seen: Json[] = [];
    let after: string | undefined;
    for (let page = 0; page < 10; page++) {
      const p = await list(b.token, { method: "stub_error" }, 3, after);
      seen.push(...p.edges.map((e) => e.node));
      assert.equal(p.edges.length, p.pageInfo.hasNextPage ? 3 : 1);
      if (!p.pageInfo.hasNextPage) break;
      after = p.pageInfo.endCursor!;
    }
    assert.deepEqual(
      seen.map((n) => n.requestId),
      [...ids].reverse(),
    );
    const bad = await h.gql(LOG, { f: {}, after: "garbage" }, b.token);
    assert.equal(bad.errors?.[0]?.extensions?.code, "BAD_USER_INPUT");
  });

  it("samples successes: all at 100%, none at 0%, errors always", async () => {
    for (let i = 0; i < 5; i++) await post(rpc(), { jsonrpc: "2.0", id: i, method: "eth_blockNumber" });
    await waitFor(a.token, { method: "eth_blockNumber" }, 5);
    await startDp("0");
    for (let i = 0; i < 20; i++) await post(rpc(), { jsonrpc: "2.0", id: i, method: "eth_blockNumber" });
    const last = await nodeError();
    // Written after the successes (same or a later flush, in order): once it is listed they would be too.
    await waitFor(a.token, { requestId: last }, 1);
    assert.equal((await list(a.token, { method: "eth_blockNumber" }, 500)).edges.length, 5);
    await startDp("100");
  });

  it("samples a request's successes together: at 50%, each batch logs all of its successes or none", async () => {
    await startDp("50");
    const ids: string[] = [];
    for (let n = 0; n < 30; n++) {
      const batch = [
        ...Array.from({ length: 8 }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "eth_blockNumber" })),
        { jsonrpc: "2.0", id: 8, method: "stub_error" },
      ];
      // The plan's per-second limit counts every element: wait out a refusal (it logs no success).
      let r = await post(rpc(), batch);
      while (r.status === 429) {
        await nextSecond();
        r = await post(rpc(), batch);
      }
      assert.equal(r.status, 200);
      ids.push(r.headers.get("x-request-id")!);
    }
    const last = await nodeError();
    // Written after the batches (same or a later flush, in order): once it is listed they would be too.
    await waitFor(a.token, { requestId: last }, 1);
    // The error element is always logged; the 8 successes of one request all, or none.
    const counts = await Promise.all(
      ids.map(async (requestId) => (await list(a.token, { requestId }, 50)).edges.length),
    );
    for (const c of counts) assert.ok(c === 1 || c === 9, String(counts));
    const sampled = counts.filter((c) => c === 9).length;
    // Binomial(30, 0.5): outside 3..27 with probability about 1e-6.
    assert.ok(sampled >= 3 && sampled <= 27, String(sampled));
    await startDp("100");
  });

  it("survives a worker restart: records sent while it is down arrive once", async () => {
    await worker!.close();
    worker = undefined;
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await nodeError());
    // Flushed into the stream while nobody reads it.
    await eventually(async () => {
      const groups = (await h.redis.xinfo("GROUPS", h.names.requestLogStream())) as unknown[][];
      return groups.some((g) => Number(g[g.indexOf("lag") + 1]) > 0);
    }, "the records waiting in the stream");
    worker = await startLogWorker();
    for (const requestId of ids) await waitFor(a.token, { requestId }, 1);
  });

  it("ingests idempotently: a crash between INSERT and XACK, and an entry sent twice, store each record once", async () => {
    const stream = h.names.requestLogStream();
    const requestId = `dup-${Date.now()}`;
    const rec = {
      time: Date.now(),
      workspaceId: a.workspaceId,
      appId: appA.id,
      network: "evm-stub",
      transport: "ws",
      method: "eth_call",
      httpStatus: 0,
      category: "Node Error",
      reason: "",
      latencyMs: 1.5,
      requestId,
      item: 0,
      clientIp: "2001:db8:1::/48",
    };
    const old = { ...rec, requestId: `${requestId}-old`, time: Date.now() - 30 * DAY };
    const payload = JSON.stringify({ batchId: "t:1", records: [rec, old] });
    // The worker's ingestor is stopped; a private one with a crash hook reads a group of its own.
    await worker!.close();
    worker = undefined;
    const conn = h.ns.redis.client("blocking");
    let crash = true;
    const ing = new RequestLogIngestor(h.cp.dataSource, conn, h.names, createLogger("t", "silent"), {
      consumerName: "crashy",
      blockMs: 0,
      batch: 10,
      claimIdleMs: 60_000,
      retentionDays: 7,
      beforeAck: () => {
        if (crash) {
          crash = false;
          throw new Error("crash before XACK");
        }
      },
    });
    try {
      await ing.consumer.ensureGroup();
      await h.redis.xadd(stream, "*", REQUEST_LOG_STREAM_FIELD, payload);
      await h.redis.xadd(stream, "*", REQUEST_LOG_STREAM_FIELD, payload);
      await assert.rejects(ing.consumer.pollOnce(0), /crash before XACK/);
      while ((await ing.consumer.pollOnce(0)) > 0) {}
      assert.equal(ing.stats.inserted, 1);
      assert.ok(ing.stats.duplicates >= 2, `duplicates ${ing.stats.duplicates}`);
      assert.ok(ing.stats.expired >= 2, "the record past the retention is skipped");
    } finally {
      conn.disconnect();
      worker = await startLogWorker();
    }
    const [got] = await waitFor(a.token, { requestId }, 1);
    assert.equal(got.transport, "ws");
    assert.equal(got.clientIp, "2001:db8:1::/48");
    assert.equal((await list(a.token, { requestId: `${requestId}-old` })).edges.length, 0);
  });

  it("removes the consumer a restarted worker left behind once it has been idle (nothing pending)", async () => {
    const opts = { blockMs: 0, batch: 10, claimIdleMs: 60_000, retentionDays: 7 };
    const conns = [h.ns.redis.client("blocking"), h.ns.redis.client("blocking")];
    const log = createLogger("t", "silent");
    try {
      const old = new RequestLogIngestor(h.cp.dataSource, conns[0]!, h.names, log, {
        ...opts,
        consumerName: "worker-before-restart",
      });
      await old.consumer.pollOnce(0);
      const next = new RequestLogIngestor(h.cp.dataSource, conns[1]!, h.names, log, {
        ...opts,
        consumerName: "worker-after-restart",
        pruneIntervalMs: 0,
        pruneIdleMs: 50,
      });
      const names = async () =>
        (
          (await h.redis.xinfo(
            "CONSUMERS",
            h.names.requestLogStream(),
            REQUEST_LOG_CONSUMER_GROUP,
          )) as unknown[][]
        ).map((c) => String(c[1]));
      await next.consumer.pollOnce(0);
      // Idle for less than the threshold (a minute here, so a slow machine cannot cross it): kept.
      // (Another consumer of this file's earlier tests may be past a minute idle on a slow run: not this one.)
      const pruned = await next.consumer.pruneIdleConsumers(60_000);
      assert.ok(!pruned.includes("worker-before-restart"), pruned.join(", "));
      assert.ok((await names()).includes("worker-before-restart"), "idle for less than a minute: kept");
      // Past 50 ms idle, a poll (pruneIntervalMs 0: every poll prunes) removes it.
      await eventually(async () => {
        await next.consumer.pollOnce(0);
        return !(await names()).includes("worker-before-restart");
      }, "the idle consumer pruned");
      const left = await names();
      assert.ok(!left.includes("worker-before-restart"), left.join(", "));
      assert.ok(left.includes("worker-after-restart"), left.join(", "));
    } finally {
      for (const c of conns) c.disconnect();
    }
  });

  it("keeps day partitions ahead and drops those past the retention", async () => {
    const ds = h.cp.dataSource;
    const now = Date.now();
    // The worker created today's and the next two days' partitions at start.
    const names = new Set((await listPartitions(ds)).map((p) => p.name));
    for (let i = 0; i <= 2; i++) assert.ok(names.has(partitionName(dayStart(now + i * DAY))), `day +${i}`);
    const oldDays = [now - 10 * DAY, now - 8 * DAY, now - 6 * DAY];
    await ensurePartitions(ds, oldDays);
    const oldRow = dayStart(now - 10 * DAY) + 1000;
    await ds.query(
      `INSERT INTO request_log (time, request_id, item, workspace_id, network, transport, method, http_status,
         category, reason, latency_ms) VALUES (to_timestamp($1::double precision / 1000), 'ancient', 0, $2,
         'evm-stub', 'http', 'eth_call', 200, 'Success', '', 1)`,
      [oldRow, a.workspaceId],
    );
    const res = await maintainPartitions(ds, 7, now);
    assert.deepEqual(res.dropped.sort(), [
      partitionName(dayStart(now - 10 * DAY)),
      partitionName(dayStart(now - 8 * DAY)),
    ]);
    const left = new Set((await listPartitions(ds)).map((p) => p.name));
    assert.ok(left.has(partitionName(dayStart(now - 6 * DAY))), "inside the retention: kept");
    assert.ok(left.has(partitionName(dayStart(now))), "today: kept");
    const [{ n }] = await ds.query(`SELECT count(*)::int AS n FROM request_log WHERE request_id = 'ancient'`);
    assert.equal(n, 0);
    // The same through the worker's repeatable job (queue `usage`, job `request-log-partitions`): queued
    // by hand here rather than waiting for the hourly schedule.
    await ensurePartitions(ds, [now - 9 * DAY]);
    const conn = h.ns.redis.client("blocking");
    const q = new Queue(QueueName.Usage, { connection: conn, prefix: h.names.bullPrefix() });
    try {
      await q.add(JobName.RequestLogPartitions, {});
      const gone = partitionName(dayStart(now - 9 * DAY));
      await eventually(
        async () => !(await listPartitions(ds)).some((p) => p.name === gone),
        "the job drops the partition",
        30_000,
      );
    } finally {
      await q.close();
      conn.disconnect();
    }
    // Ingestion still works after the maintenance (today's partition untouched).
    const requestId = await nodeError();
    await waitFor(a.token, { requestId }, 1);
  });
});
