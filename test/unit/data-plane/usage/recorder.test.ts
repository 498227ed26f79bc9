import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { NoopUsageRecorder, RedisUsageRecorder } from "../../../../data-plane/src/usage";
import { loadUsageRecorderConfig } from "../../../../data-plane/src/usage/recorder";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import { RedisNames } from "../../../../shared/src/redis/keys";
import {
  BUCKET_COUNT,
  bucketIndex,
  UsageBatch,
  UsageBatchSchema,
} from "../../../../shared/src/usage/contract";
import { eventually } from "../../../helpers/eventually";

const WS = "11111111-1111-4111-8111-111111111111";
const APP = "22222222-2222-4222-8222-222222222222";
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

/** Captures XADDs; fails while `down` is true. */
class FakeRedis {
  down = false;
  calls: (string | number)[][] = [];
  fails = 0;
  async xadd(key: string, ...rest: (string | number)[]): Promise<string> {
    const args = [key, ...rest];
    if (this.down) {
      this.fails++;
      throw new Error("ECONNREFUSED (simulated)");
    }
    this.calls.push(args);
    return `${this.calls.length}-0`;
  }
  batches(): UsageBatch[] {
    return this.calls.map((a) => UsageBatchSchema.parse(JSON.parse(String(a[a.length - 1]))));
  }
  rows() {
    return this.batches().flatMap((b) => b.rows);
  }
}

function setup(config: Record<string, number> = {}) {
  const redis = new FakeRedis();
  let now = T0;
  const registry = new Registry();
  const rec = new RedisUsageRecorder({
    redis,
    names: new RedisNames("t:"),
    config,
    registry,
    instanceId: "inst",
    now: () => now,
  });
  return {
    redis,
    rec,
    registry,
    set: (t: number) => {
      now = t;
    },
  };
}

const base = {
  workspaceId: WS,
  appId: APP,
  network: "eth",
  method: "eth_call",
  category: ErrorCategory.Success,
  latencyMs: 12,
};

describe("data-plane: usage recorder", () => {
  it("aggregates per minute x workspace x app x network x method x category", async () => {
    const { rec, redis, set } = setup();
    rec.record(base);
    rec.record({ ...base, latencyMs: 40 });
    rec.record({ ...base, latencyMs: 3, units: 5 });
    rec.record({ ...base, category: ErrorCategory.NodeError, latencyMs: 700 });
    rec.record({ ...base, method: "eth_getLogs" });
    rec.record({ ...base, workspaceId: null, appId: null, network: "eth" });
    set(T0 + 61_000);
    rec.record(base);
    await rec.flush();
    assert.equal(redis.calls.length, 1);
    const [key, maxlen, approx, , id, field] = redis.calls[0]!;
    assert.deepEqual([key, maxlen, approx, id, field], ["t:usage:stream", "MAXLEN", "~", "*", "batch"]);
    const b = redis.batches()[0]!;
    assert.equal(b.batchId, "inst:1");
    const rows = b.rows;
    assert.equal(rows.length, 5);
    const call = rows.find(
      (r) => r.minute === T0 && r.method === "eth_call" && r.category === "Success" && r.appId,
    )!;
    assert.equal(call.count, 7);
    assert.equal(call.latencySumMs, 12 + 40 + 15);
    assert.equal(call.buckets[bucketIndex(12)], 1);
    assert.equal(call.buckets[bucketIndex(40)], 1);
    assert.equal(call.buckets[bucketIndex(3)], 5);
    assert.equal(
      call.buckets.reduce((a, c) => a + c, 0),
      7,
    );
    assert.equal(rows.find((r) => r.category === "Node Error")!.count, 1);
    const anon = rows.find((r) => r.workspaceId === null)!;
    assert.equal(anon.appId, null);
    assert.equal(anon.count, 1);
    assert.equal(rows.find((r) => r.minute === T0 + 60_000)!.count, 1);
    await rec.flush();
    assert.equal(redis.calls.length, 1, "nothing new: no XADD");
    assert.equal(rec.pendingRowCount, 0);
  });

  it("adds up compute units per row: the weight of each record's objects, or its count when none is given", async () => {
    const { rec, redis } = setup();
    rec.record({ ...base, computeUnits: 26 });
    rec.record({ ...base, units: 3, computeUnits: 78 });
    rec.record({ ...base, method: "eth_chainId", units: 2, computeUnits: 0 });
    rec.record({ ...base, method: "eth_getLogs", units: 2 });
    await rec.flush();
    const rows = redis.rows();
    assert.equal(rows.find((r) => r.method === "eth_call")!.count, 4);
    assert.equal(rows.find((r) => r.method === "eth_call")!.computeUnits, 104);
    assert.equal(rows.find((r) => r.method === "eth_chainId")!.computeUnits, 0, "a free method");
    assert.equal(rows.find((r) => r.method === "eth_getLogs")!.computeUnits, 2, "no weight given: 1 each");
  });

  it("repeats of one request share a row, interleaved ones keep theirs, a flushed row is never counted into", async () => {
    const { rec, redis } = setup();
    rec.record(base);
    rec.record(base); // same shape as the previous record: counted into its row
    rec.record({ ...base, appId: null }); // another scope in between
    rec.record(base);
    rec.record({ ...base, category: "Not A Category" as ErrorCategory }); // folds into Unknown Error
    rec.record({ ...base, category: "Not A Category" as ErrorCategory });
    redis.down = true;
    await rec.flush(); // cut: the rows are queued (the write fails and stays pending)
    rec.record(base); // same shape again, after the cut: a new row
    redis.down = false;
    await rec.flush();
    const [first, second] = redis.batches();
    const count = (rows: UsageBatch["rows"], pred: (r: UsageBatch["rows"][number]) => boolean) =>
      rows.filter(pred).reduce((n, r) => n + r.count, 0);
    assert.equal(
      count(first!.rows, (r) => r.appId === APP && r.category === "Success"),
      3,
    );
    assert.equal(
      count(first!.rows, (r) => r.appId === null),
      1,
    );
    assert.equal(
      count(first!.rows, (r) => r.category === ErrorCategory.UnknownError),
      2,
    );
    assert.equal(second!.rows.length, 1);
    assert.equal(second!.rows[0]!.count, 1);
  });

  it("bounds method names (cap per network per minute; invalid names and bad networks fold)", async () => {
    const { rec, redis, set } = setup({ maxMethodsPerNetwork: 10 });
    for (let i = 0; i < 50; i++) rec.record({ ...base, method: `custom_method${i}` });
    for (let i = 0; i < 20; i++) rec.record({ ...base, method: `garbage ${i} <script>` });
    rec.record({ ...base, method: "eth_getBalance" });
    rec.record({ ...base, network: "Bad Network!" });
    await rec.flush();
    const rows = redis.rows();
    const methods = new Set(rows.map((r) => r.method));
    assert.equal(methods.size, 10 + 1 + 1 + 1, [...methods].join(","));
    assert.equal(rows.find((r) => r.method === "other")!.count, 40 + 20);
    assert.ok(rows.some((r) => r.network === "unknown"));
    set(T0 + 60_000);
    rec.record({ ...base, method: "custom_method49" });
    await rec.flush();
    assert.ok(
      redis.rows().some((r) => r.minute === T0 + 60_000 && r.method === "custom_method49"),
      "cap resets",
    );
  });

  it("keeps a failed flush and retries it with the same batch id", async () => {
    const { rec, redis } = setup();
    rec.record(base);
    redis.down = true;
    await rec.flush();
    assert.equal(redis.fails, 1);
    assert.equal(rec.pendingRowCount, 1);
    rec.record({ ...base, method: "eth_getLogs" });
    await rec.flush();
    assert.equal(redis.fails, 2, "stops at the first failure");
    redis.down = false;
    await rec.flush();
    const batches = redis.batches();
    assert.deepEqual(
      batches.map((b) => b.batchId),
      ["inst:1", "inst:2"],
      "order and ids kept",
    );
    assert.equal(batches[0]!.rows[0]!.method, "eth_call");
    assert.equal(rec.pendingRowCount, 0);
  });

  it("caps rows pending while Redis is down; drops the oldest and counts them", async () => {
    const { rec, redis, registry } = setup({ maxPendingRows: 10 });
    redis.down = true;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 7; i++) rec.record({ ...base, method: `m_r${round}x${i}` });
      await rec.flush();
      assert.ok(rec.pendingRowCount <= 10);
    }
    assert.equal(rec.droppedRows, 11);
    const metrics = await registry.getMetricsAsJSON();
    const dropped = metrics.find((m) => m.name === "gateway_usage_rows_dropped_total")!;
    assert.equal((dropped.values as { value: number }[])[0]!.value, 11);
    redis.down = false;
    await rec.flush();
    const methods = redis.rows().map((r) => r.method);
    assert.equal(methods.length, 10);
    assert.ok(methods.includes("m_r2x6") && !methods.includes("m_r0x0"), "newest kept");
  });

  it("close() stops the timer and flushes everything", async () => {
    const { rec, redis } = setup({ flushIntervalMs: 60_000 });
    rec.start();
    rec.record(base);
    rec.record({ ...base, units: 29 });
    await rec.close();
    assert.equal(redis.rows()[0]!.count, 30);
  });

  it("close() keeps retrying until Redis is back (within closeTimeoutMs)", async () => {
    const { rec, redis } = setup({ closeTimeoutMs: 3_000 });
    rec.record(base);
    redis.down = true;
    setTimeout(() => {
      redis.down = false;
    }, 300);
    await rec.close();
    assert.equal(redis.rows().length, 1);
  });

  it("the timer flushes every flushIntervalMs", async () => {
    const redis = new FakeRedis();
    const rec = new RedisUsageRecorder({
      redis,
      names: new RedisNames("t:"),
      config: { flushIntervalMs: 50 },
    });
    rec.start();
    rec.record(base);
    // No flush() here: only the timer can write it.
    await eventually(() => redis.rows().length === 1, "the timer's flush");
    await rec.close();
  });

  it("with a real Redis client that cannot connect, rows stay pending and nothing throws", async () => {
    const redis = new Redis("redis://127.0.0.1:1", {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
    redis.on("error", () => {});
    const errors: unknown[] = [];
    const rec = new RedisUsageRecorder({
      redis,
      names: new RedisNames("t:"),
      config: { closeTimeoutMs: 0 },
      onError: (e) => errors.push(e),
    });
    rec.record(base);
    await rec.flush();
    assert.equal(rec.pendingRowCount, 1);
    assert.equal(errors.length, 1);
    await rec.close();
    assert.equal(rec.droppedRows, 1, "given up at close: counted as dropped");
    assert.equal(rec.pendingRowCount, 0);
    redis.disconnect();
  });

  it("record() aggregates in memory: 200k records of 4 methods are 4 pending rows", async () => {
    // How fast record() is belongs to `npm run bench`; what is checked here is that it folds records
    // into one row per (workspace, app, network, method, bucket) instead of keeping each.
    const { rec, redis } = setup();
    const methods = ["eth_call", "eth_getLogs", "eth_blockNumber", "eth_getBalance"];
    for (let i = 0; i < 200_000; i++) rec.record({ ...base, method: methods[i & 3]!, latencyMs: i % 300 });
    assert.equal(rec.pendingRowCount, 4);
    await rec.flush();
    const rows = redis.rows();
    assert.equal(rows.length, 4);
    assert.equal(
      rows.reduce((n, r) => n + r.count, 0),
      200_000,
    );
  });

  it("noop recorder and env config", async () => {
    const n = new NoopUsageRecorder();
    n.record();
    await n.flush();
    await n.close();
    const c = loadUsageRecorderConfig({ USAGE_FLUSH_INTERVAL_MS: "1000" });
    assert.equal(c.flushIntervalMs, 1000);
    assert.equal(c.maxPendingRows, 200_000);
    assert.throws(() => loadUsageRecorderConfig({ USAGE_FLUSH_INTERVAL_MS: "x" }), /USAGE_FLUSH_INTERVAL_MS/);
    assert.equal(BUCKET_COUNT, 24);
  });

  it("Redis lost its data: entries written within the replay window are written again, same batch ids, oldest first", async () => {
    const { rec, redis, set } = setup({ replayWindowMs: 30_000, replayMaxRows: 1_000 });
    rec.record(base);
    await rec.flush(); // batch 1 at T0
    set(T0 + 40_000);
    rec.record({ ...base, method: "eth_chainId" });
    await rec.flush(); // batch 2 at T0+40 s, the last write before the loss: batch 1 is outside the window
    // Redis went away right after, and came back 80 s later, empty: longer than the window, but the
    // window is measured back from the last write the old Redis took, not from now.
    set(T0 + 120_000);
    rec.record({ ...base, method: "eth_blockNumber" });
    redis.down = true;
    await rec.flush(); // batch 3 fails: still pending, not yet written, so not a replay candidate
    assert.equal(rec.redeliverRecent(), 1);
    await rec.flush(); // the flush redeliverRecent started, still failing: nothing lost
    redis.down = false;
    await rec.flush();
    assert.deepEqual(
      redis.batches().map((b) => b.batchId),
      ["inst:1", "inst:2", "inst:2", "inst:3"],
      "the replay goes before what is newer",
    );
    assert.equal(rec.replayedEntries, 1);
    // A second loss replays what was written since (the replayed entry included); a window of 0 keeps nothing.
    assert.equal(rec.redeliverRecent(), 2);
    const off = setup({ replayWindowMs: 0 });
    off.rec.record(base);
    await off.rec.flush();
    assert.equal(off.rec.redeliverRecent(), 0);
  });

  it("the replay memory is capped in rows (oldest dropped)", async () => {
    const { rec } = setup({ replayWindowMs: 60_000, replayMaxRows: 2 });
    for (const method of ["a_1", "a_2", "a_3"]) {
      rec.record({ ...base, method });
      await rec.flush();
    }
    assert.equal(rec.redeliverRecent(), 2);
  });
});
