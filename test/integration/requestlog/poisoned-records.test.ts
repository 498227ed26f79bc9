import assert from "node:assert/strict";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import type { DataPlane } from "../../../data-plane/src/data-plane";
import {
  REQUEST_LOG_CONSUMER_GROUP,
  REQUEST_LOG_STREAM_FIELD,
} from "../../../shared/src/requestlog/contract";
import { BUCKET_COUNT, USAGE_CONSUMER_GROUP, USAGE_STREAM_FIELD } from "../../../shared/src/usage/contract";
import { eventually } from "../../helpers/eventually";
import {
  createApp,
  createStubNetwork,
  type Harness,
  startHarness,
  startHarnessDataPlane,
} from "../control-plane/harness";
import { post } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";

/** XINFO GROUPS of `stream` as group name -> { pending, lag } (Redis 7 reports the lag). */
async function groups(h: Harness, stream: string): Promise<Record<string, { pending: number; lag: number }>> {
  const out: Record<string, { pending: number; lag: number }> = {};
  for (const flat of (await h.redis.xinfo("GROUPS", stream)) as unknown[][]) {
    const g: Record<string, unknown> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) g[String(flat[i])] = flat[i + 1];
    out[String(g.name)] = { pending: Number(g.pending), lag: Number(g.lag) };
  }
  return out;
}

/** Waits for `probe` to find what it looks for (test/helpers/eventually.ts). */
function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  return eventually(probe, what, timeoutMs);
}

/**
 * Issue 24 §2: one keyed request whose method Postgres refuses (`"\u0000\uffff"`) used to stop request-log
 * ingestion for every tenant (the worker retried the same entry forever). Here the hostile methods go
 * through the real data plane, Redis stream and worker into Postgres, while another tenant keeps logging;
 * then entries Postgres refuses whatever the worker does are injected straight into the streams.
 */
describe("request log and usage ingestion: hostile records cannot stall what all tenants share", function () {
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
  const rpc = (key: string) => `${base}/evm-stub/rpc?apikey=${key}`;
  /** Request ids of `request_log` rows, by id: [method, method_length] of each, in item order. */
  const stored = async (ids: string[]) => {
    const rows = (await h.cp.dataSource.query(
      `SELECT request_id, item, method, method_length, workspace_id FROM request_log
        WHERE request_id = ANY($1) ORDER BY request_id, item`,
      [ids],
    )) as {
      request_id: string;
      item: number;
      method: string;
      method_length: number | null;
      workspace_id: string;
    }[];
    return rows;
  };

  before(async () => {
    h = await startHarness();
    stub = await new StubUpstream().start();
    await createStubNetwork(h, stub.url);
    a = await h.signUp();
    b = await h.signUp();
    appA = await createApp(h, a.token, "attacker");
    appB = await createApp(h, b.token, "bystander");
    worker = await startWorker(h.config, undefined, {
      usage: { blockMs: 100, consumerName: "poison-test", maxAttempts: 3, retryBaseMs: 50 },
    });
    dp = await startHarnessDataPlane(h, {
      HEALTH_CHECK_INTERVAL_MS: "200",
      USAGE_FLUSH_INTERVAL_MS: "200",
      REQUEST_LOG_FLUSH_INTERVAL_MS: "100",
      REQUEST_LOG_SAMPLE_PERCENT: "100",
      RATE_LIMIT_MODE: "local",
      QUOTA_MODE: "off",
      SHARED_NODE_EXTRA_NAMESPACES: "stub",
    });
    base = `http://127.0.0.1:${dp.port}`;
  });

  after(async () => {
    await dp?.close();
    await worker?.close();
    await stub?.stop();
    await h?.close();
  });

  it("hostile method names are stored made safe, with their length; another tenant's records keep arriving; lag returns to 0", async () => {
    const bystander = async () => {
      const r = await post(rpc(appB.apiKey), { jsonrpc: "2.0", id: 1, method: "stub_error" });
      assert.equal(r.json.error.code, -32000);
      return r.headers.get("x-request-id")!;
    };
    const before = await bystander();
    // [sent, stored, method_length]
    const hostile: [string, string, number | null][] = [
      ["\u0000\uffff", "\ufffd\uffff", 2],
      ["\ud800", "\ufffd", 1],
      ["a\udc00\u0000b", "a\ufffd\ufffdb", 4],
      ["m".repeat(100_000), "m".repeat(100), 100_000],
      ["\u001b]0;pwn\u0007", "\ufffd]0;pwn\ufffd", 8],
    ];
    const singles: string[] = [];
    for (const [method] of hostile) {
      const r = await post(rpc(appA.apiKey), { jsonrpc: "2.0", id: 7, method });
      assert.equal(r.status, 200, "a per-element refusal (method_blocked)");
      assert.equal(r.json.error.data.reason, "method_blocked");
      singles.push(r.headers.get("x-request-id")!);
    }
    const batch = await post(
      rpc(appA.apiKey),
      hostile.map(([method], i) => ({ jsonrpc: "2.0", id: i, method })),
    );
    assert.equal(batch.status, 200);
    assert.equal(batch.json.length, hostile.length);
    const batchId = batch.headers.get("x-request-id")!;
    const after = await bystander();

    // The bystander's records, written before and after the hostile ones, are stored.
    await until("the bystander's records", async () =>
      (await stored([before, after])).length === 2 ? true : undefined,
    );
    // The hostile ones too, made safe, the original length kept; none lost, none set aside.
    const rows = await until("the hostile records", async () => {
      const got = await stored([...singles, batchId]);
      return got.length === hostile.length * 2 ? got : undefined;
    });
    for (let i = 0; i < hostile.length; i++) {
      const single = rows.find((r) => r.request_id === singles[i])!;
      const item = rows.find((r) => r.request_id === batchId && r.item === i)!;
      for (const r of [single, item]) {
        assert.equal(r.method, hostile[i]![1], `method ${i}`);
        assert.equal(r.method_length, hostile[i]![2], `method_length ${i}`);
        assert.equal(r.workspace_id, a.workspaceId);
      }
    }
    // Listed through GraphQL to its tenant as well.
    const listed = (await h.ok(
      `query($f: RequestLogFilter!) { requestLog(filter: $f) { edges { node { method methodLength } } } }`,
      { f: { requestId: singles[0] } },
      a.token,
    )) as { requestLog: { edges: { node: { method: string; methodLength: number } }[] } };
    assert.deepEqual(listed.requestLog.edges[0]!.node, { method: "\ufffd\uffff", methodLength: 2 });

    // Every entry read and acknowledged: nothing pending, no lag, nothing set aside.
    for (const [stream, group] of [
      [h.names.requestLogStream(), REQUEST_LOG_CONSUMER_GROUP],
      [h.names.usageStream(), USAGE_CONSUMER_GROUP],
    ] as const) {
      await until(`${group} caught up`, async () => {
        const g = (await groups(h, stream))[group];
        return g !== undefined && g.pending === 0 && g.lag === 0 ? true : undefined;
      });
      assert.equal(await h.redis.xlen(h.names.deadLetterStream(stream)), 0, `${group}: nothing set aside`);
    }
    assert.equal(worker!.requestLogIngestor!.consumer.deadLettered, 0);
    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200, "the data plane is still up");
  });

  it("an entry Postgres refuses is set aside to the dead-letter stream after 3 tries; the entries after it are stored", async () => {
    const stream = h.names.requestLogStream();
    const now = Date.now();
    const rec = (requestId: string, workspaceId: string, latencyMs: number) => ({
      time: now,
      workspaceId,
      appId: null,
      network: "evm-stub",
      transport: "http",
      method: "eth_call",
      httpStatus: 200,
      category: "Node Error",
      reason: "",
      latencyMs,
      requestId,
      item: 0,
      clientIp: null,
    });
    // latency_ms is a `real`: 1e300 passes the schema and the worker's sanitiser, and Postgres refuses it
    // ("value out of range: overflow"), whoever wrote the entry.
    const poisonId = (await h.redis.xadd(
      stream,
      "*",
      REQUEST_LOG_STREAM_FIELD,
      JSON.stringify({ batchId: "injected-poison", records: [rec("poison-1", a.workspaceId, 1e300)] }),
    )) as string;
    await h.redis.xadd(
      stream,
      "*",
      REQUEST_LOG_STREAM_FIELD,
      JSON.stringify({ batchId: "injected-good", records: [rec("after-poison-1", b.workspaceId, 3)] }),
    );
    // Later traffic through the gateway is stored too.
    const r = await post(rpc(appB.apiKey), { jsonrpc: "2.0", id: 1, method: "stub_error" });
    const live = r.headers.get("x-request-id")!;
    await until("the entries after the poisoned one", async () =>
      (await stored(["after-poison-1", live])).length === 2 ? true : undefined,
    );
    const dead = await until("the dead-letter entry", async () => {
      const d = (await h.redis.xrange(h.names.deadLetterStream(stream), "-", "+")) as [string, string[]][];
      return d.length > 0 ? d : undefined;
    });
    assert.equal(dead.length, 1);
    const f = dead[0]![1];
    const get = (k: string) => f[f.indexOf(k) + 1];
    assert.equal(get("deadEntryId"), poisonId);
    assert.equal(get("deadAttempts"), "3");
    assert.match(get("deadError")!, /out of range/);
    assert.match(
      get(REQUEST_LOG_STREAM_FIELD)!,
      /poison-1/,
      "the entry as it was, for an operator to look at",
    );
    assert.equal((await stored(["poison-1"])).length, 0);
    assert.equal(worker!.requestLogIngestor!.consumer.deadLettered, 1);
    await until("request-log-ingest caught up", async () => {
      const g = (await groups(h, stream))[REQUEST_LOG_CONSUMER_GROUP];
      return g !== undefined && g.pending === 0 && g.lag === 0 ? true : undefined;
    });
  });

  it("the same for the usage stream: a batch Postgres refuses is set aside, the next one is counted", async () => {
    const stream = h.names.usageStream();
    const minute = Date.now() - (Date.now() % 60_000);
    const row = (count: number, at = minute) => ({
      minute: at,
      workspaceId: b.workspaceId,
      appId: appB.id,
      network: "evm-stub",
      method: "eth_poisontest",
      category: "Success",
      count,
      latencySumMs: 1,
      buckets: Array.from({ length: BUCKET_COUNT }, (_, i) => (i === 0 ? count : 0)),
    });
    const batch = (batchId: string, count: number, at?: number) =>
      JSON.stringify({
        v: 1,
        batchId,
        instanceId: "injected",
        createdAt: Date.now(),
        rows: [row(count, at)],
      });
    // A whole minute 285,000 years before 1970: valid JSON and schema (a safe integer, a multiple of
    // 60,000), refused by Postgres ("timestamp out of range").
    const poisonId = (await h.redis.xadd(
      stream,
      "*",
      USAGE_STREAM_FIELD,
      batch("usage-poison", 1, -9_000_000_000_000_000),
    )) as string;
    await h.redis.xadd(stream, "*", USAGE_STREAM_FIELD, batch("usage-good", 5));
    const counted = await until("the good batch's count", async () => {
      const rows = (await h.cp.dataSource.query(
        `SELECT sum(count)::int AS n FROM usage_minute WHERE method = 'eth_poisontest'`,
      )) as { n: number | null }[];
      return rows[0]!.n === null ? undefined : rows[0]!.n;
    });
    assert.equal(counted, 5);
    const dead = await until("the dead-letter entry", async () => {
      const d = (await h.redis.xrange(h.names.deadLetterStream(stream), "-", "+")) as [string, string[]][];
      return d.length > 0 ? d : undefined;
    });
    assert.equal(dead.length, 1);
    const f = dead[0]![1];
    assert.equal(f[f.indexOf("deadEntryId") + 1], poisonId);
    assert.match(f[f.indexOf("deadError") + 1]!, /out of range/);
    assert.equal(worker!.usageIngestor!.consumer.deadLettered, 1);
  });
});
