import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { loadDataPlaneConfig } from "../../../../data-plane/src/config";
import { createUsageRecorder, NoopUsageRecorder, RedisUsageRecorder } from "../../../../data-plane/src/usage";
import { watchRedisRestarts } from "../../../../data-plane/src/usage/create";
import { ErrorCategory } from "../../../../shared/src/jsonrpc/errors";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { UsageBatchSchema } from "../../../../shared/src/usage/contract";
import { eventually } from "../../../helpers/eventually";

const WS = "11111111-1111-4111-8111-111111111111";
const APP = "22222222-2222-4222-8222-222222222222";

describe("data-plane: usage wiring", () => {
  it("close() while a timer flush is in flight still writes the records made meanwhile", async () => {
    let release: () => void = () => {};
    const calls: string[] = [];
    const redis = {
      async xadd(_key: string, ...rest: (string | number)[]) {
        if (calls.length === 0) await new Promise<void>((r) => (release = r));
        calls.push(String(rest[rest.length - 1]));
        return "1-0";
      },
    };
    const rec = new RedisUsageRecorder({ redis, names: new RedisNames("t:"), instanceId: "i" });
    const base = {
      workspaceId: WS,
      appId: APP,
      network: "eth",
      method: "eth_call",
      category: ErrorCategory.Success,
      latencyMs: 3,
    };
    rec.record(base);
    const first = rec.flush(); // cut 1 row, XADD blocked
    rec.record({ ...base, units: 4 }); // after the cut
    const closing = rec.close(); // joins the running flush
    release();
    await first;
    await closing;
    const counts = calls.flatMap((c) => UsageBatchSchema.parse(JSON.parse(c)).rows.map((r) => r.count));
    assert.deepEqual(counts, [1, 4]);
  });

  it("config: USAGE_MODE (default redis) and USAGE_* in the data-plane config; off gives a no-op recorder", async () => {
    const c = loadDataPlaneConfig({ USAGE_FLUSH_INTERVAL_MS: "250" });
    assert.equal(c.USAGE_MODE, "redis");
    assert.equal(c.USAGE_FLUSH_INTERVAL_MS, 250);
    assert.equal(loadDataPlaneConfig({}).USAGE_FLUSH_INTERVAL_MS, 5_000);
    const off = createUsageRecorder(loadDataPlaneConfig({ USAGE_MODE: "off" }));
    assert.ok(off.recorder instanceof NoopUsageRecorder);
    off.start();
    await off.close();
    assert.throws(() => loadDataPlaneConfig({ USAGE_MODE: "sometimes" }));
  });

  it("Redis restart detection: an INFO that fails on the first 'ready' is retried, so the first restart is still seen", async () => {
    /** A connection whose INFO answers with the queued results (an Error rejects). */
    class FakeConn extends EventEmitter {
      status = "ready";
      answers: (string | Error)[] = [];
      calls = 0;
      info(): Promise<string> {
        this.calls++;
        const a = this.answers.shift() ?? new Error("no answer queued");
        return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
      }
    }
    /** The answer of an INFO just made has been handled: its promise chain runs before the next macrotask. */
    const settled = () => new Promise((r) => setImmediate(r));
    const conn = new FakeConn();
    let restarts = 0;
    const w = watchRedisRestarts(conn, () => restarts++, 20);
    try {
      conn.answers.push(new Error("LOADING"), "# Server\r\nrun_id:aaa\r\n");
      conn.emit("ready");
      await eventually(() => conn.calls === 2, "the failed INFO retried");
      await settled();
      assert.equal(conn.calls, 2, "the failed INFO was retried");
      assert.equal(restarts, 0, "first run id: no restart");
      // Reconnected to the same server: nothing; to a new one: one restart.
      conn.answers.push("run_id:aaa\r\n");
      conn.emit("ready");
      await settled();
      assert.equal(conn.calls, 3);
      assert.equal(restarts, 0);
      conn.answers.push("run_id:bbb\r\n");
      conn.emit("ready");
      await settled();
      assert.equal(conn.calls, 4);
      assert.equal(restarts, 1);
      // A failure while the connection is not ready is not retried by timer (the next "ready" reads it).
      conn.status = "reconnecting";
      conn.answers.push(new Error("closed"));
      conn.emit("ready");
      await new Promise((r) => setTimeout(r, 60));
      assert.equal(conn.calls, 5);
    } finally {
      w.stop();
    }
  });
});
