import assert from "node:assert/strict";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import { REQUEST_LOG_STREAM_FIELD } from "../../../shared/src/requestlog/contract";
import { usageSettled } from "../../helpers/usage-stream";
import {
  ADMIN_TOKEN,
  code,
  createApp,
  type Harness,
  type Json,
  startHarness,
} from "../control-plane/harness";
import { usageRow, xaddUsage } from "../control-plane/usage/helpers";

const C = ErrorCategory;

/**
 * Compute units through the real worker process: usage batches and request-log records, as data planes
 * write them to their Redis streams (with `computeUnits`, and without it as a data plane older than
 * compute units writes them), are read and stored by the worker's consumers; the GraphQL reports then show
 * both units, and they add up.
 */
describe("compute units end to end: Redis streams -> worker -> Postgres -> GraphQL usage and request log", function () {
  this.timeout(120_000);
  let h: Harness;
  let worker: ControlPlaneWorker | undefined;
  let a: { token: string; workspaceId: string };
  let b: { token: string; workspaceId: string };
  let appA: { id: string };
  let appB: { id: string };

  const report = async (token: string, fields: string, filter: Json = {}) =>
    (await h.ok(`query($f: UsageFilter!) { usage(filter: $f) { ${fields} } }`, { f: filter }, token)).usage;

  /** Every request-log entry so far is stored: the worker's group has read and acknowledged it. */
  const requestLogSettled = () => usageSettled(h.redis, h.names.requestLogStream());

  before(async () => {
    h = await startHarness();
    a = await h.signUp();
    b = await h.signUp();
    appA = await createApp(h, a.token, "indexer");
    appB = await createApp(h, b.token, "other");
    worker = await startWorker(h.config, undefined, {
      usage: { blockMs: 100, consumerName: "cu-e2e", requestLogIngestEnabled: true },
    });
  });

  after(async () => {
    await worker?.close();
    await h?.close();
  });

  it("usage batches with and without computeUnits: every report in both units, adding up", async () => {
    const now = Date.now();
    const A = a.workspaceId;
    // What a weighing data plane flushes: 20 eth_call (26 each), 5 eth_getLogs (60 each), 2 of them failed.
    await xaddUsage(h, [
      usageRow({
        minute: now,
        workspaceId: A,
        appId: appA.id,
        method: "eth_call",
        count: 20,
        computeUnits: 520,
      }),
      usageRow({
        minute: now,
        workspaceId: A,
        appId: appA.id,
        method: "eth_getLogs",
        count: 3,
        computeUnits: 180,
      }),
      usageRow({
        minute: now,
        workspaceId: A,
        appId: appA.id,
        method: "eth_getLogs",
        count: 2,
        computeUnits: 120,
        category: C.NodeError,
      }),
      usageRow({
        minute: now,
        workspaceId: b.workspaceId,
        appId: appB.id,
        method: "eth_call",
        count: 4,
        computeUnits: 104,
      }),
    ]);
    // An older data plane's flush (no computeUnits): a weight of 1 each.
    await xaddUsage(h, [
      usageRow({ minute: now, workspaceId: A, appId: appA.id, method: "eth_chainId", count: 7 }),
    ]);
    await usageSettled(h.redis, h.names.usageStream());

    const d = await report(
      a.token,
      `requests24h { total computeUnits series { computeUnits } }
       methods(sortBy: COMPUTE_UNITS) { method requests computeUnits errors }
       history(days: 1) { total computeUnits byApp { app { id } count computeUnits } }
       today { count computeUnits computeUnitLimit }`,
    );
    assert.equal(d.requests24h.total, 32);
    assert.equal(d.requests24h.computeUnits, 520 + 180 + 120 + 7);
    const sum = (xs: number[]) => xs.reduce((x, y) => x + y, 0);
    assert.equal(sum(d.requests24h.series.map((p: Json) => p.computeUnits)), 827);
    assert.deepEqual(d.methods, [
      { method: "eth_call", requests: 20, computeUnits: 520, errors: 0 },
      { method: "eth_getLogs", requests: 5, computeUnits: 300, errors: 2 },
      { method: "eth_chainId", requests: 7, computeUnits: 7, errors: 0 },
    ]);
    assert.deepEqual(d.history, [
      { total: 32, computeUnits: 827, byApp: [{ app: { id: appA.id }, count: 32, computeUnits: 827 }] },
    ]);
    // No live counters here (no data plane): today's served usage from the day rollup.
    assert.deepEqual(d.today, { count: 32, computeUnits: 827, computeUnitLimit: null });
    // The other tenant sees its own only, and not A's app.
    const other = await report(b.token, "requests24h { total computeUnits }");
    assert.deepEqual(other.requests24h, { total: 4, computeUnits: 104 });
    const q = "query($f: UsageFilter!) { usage(filter: $f) { requests24h { computeUnits } } }";
    assert.equal(code(await h.gql(q, { f: { appId: appA.id } }, b.token)), "NOT_FOUND");
    assert.equal(worker!.usageIngestor!.stats.invalidRows, 0);
  });

  it("request-log records: computeUnits stored and listed; null for an older data plane's record; other tenants see none", async () => {
    const now = Date.now();
    const rec = (requestId: string, item: number, method: string, computeUnits?: number) => ({
      time: now,
      workspaceId: a.workspaceId,
      appId: appA.id,
      network: "eth",
      transport: "http",
      method,
      httpStatus: 200,
      category: "Success",
      reason: "",
      latencyMs: 4.5,
      requestId,
      item,
      clientIp: "127.0.0.0",
      ...(computeUnits === undefined ? {} : { computeUnits }),
    });
    const stream = h.names.requestLogStream();
    const put = (batchId: string, records: unknown[]) =>
      h.redis.xadd(stream, "*", REQUEST_LOG_STREAM_FIELD, JSON.stringify({ batchId, records }));
    // A batch of two, weighed; a record from an older data plane; a record claiming more than a request
    // object can cost (skipped, the rest of its entry stored).
    await put("cu-1", [rec("req-batch", 0, "eth_call", 26), rec("req-batch", 1, "eth_getLogs", 60)]);
    await put("cu-2", [rec("req-old", 0, "eth_call")]);
    await put("cu-3", [rec("req-huge", 0, "eth_call", 2 ** 31), rec("req-free", 0, "eth_chainId", 0)]);
    await requestLogSettled();

    const list = async (token: string, filter: Json = {}) =>
      (
        await h.ok(
          `query($f: RequestLogFilter!) { requestLog(filter: $f) { edges { node { requestId item method computeUnits } } } }`,
          { f: filter },
          token,
        )
      ).requestLog.edges.map((e: Json) => e.node);
    const got = (await list(a.token)).sort((x: Json, y: Json) =>
      `${x.requestId}/${x.item}`.localeCompare(`${y.requestId}/${y.item}`),
    );
    assert.deepEqual(got, [
      { requestId: "req-batch", item: 0, method: "eth_call", computeUnits: 26 },
      { requestId: "req-batch", item: 1, method: "eth_getLogs", computeUnits: 60 },
      { requestId: "req-free", item: 0, method: "eth_chainId", computeUnits: 0 },
      { requestId: "req-old", item: 0, method: "eth_call", computeUnits: null },
    ]);
    assert.equal(worker!.requestLogIngestor!.stats.invalid, 1);
    assert.deepEqual(await list(b.token), []);
    assert.equal(
      code(
        await h.gql(
          `query($f: RequestLogFilter!) { requestLog(filter: $f) { edges { node { computeUnits } } } }`,
          { f: { workspaceId: a.workspaceId } },
          b.token,
        ),
      ),
      "NOT_FOUND",
    );
    // The operator reads it by naming the workspace.
    assert.equal((await list(ADMIN_TOKEN, { workspaceId: a.workspaceId })).length, 4);
  });
});
