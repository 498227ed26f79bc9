import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import type { DataPlane } from "../../../data-plane/src/data-plane";
import { REQUEST_LOG_CONSUMER_GROUP } from "../../../shared/src/requestlog/contract";
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

const FLOOD = 10_000;
const CONCURRENCY = 32;

/** Bytes Redis holds under the test's prefix: MEMORY USAGE (exact, SAMPLES 0) of every key SCAN finds. */
async function prefixBytes(h: Harness): Promise<number> {
  let cursor = "0";
  let total = 0;
  do {
    const [next, keys] = (await h.redis.scan(cursor, "MATCH", `${h.ns.prefix}*`, "COUNT", 1000)) as [
      string,
      string[],
    ];
    cursor = next;
    for (const k of keys) total += Number((await h.redis.call("MEMORY", "USAGE", k, "SAMPLES", "0")) ?? 0);
  } while (cursor !== "0");
  return total;
}

/**
 * Issue 24 §2, keyless floods: one host sending random keys must not grow what all tenants share (the Redis
 * that holds every tenant's keys, quotas and queues, and the request_log table) by one record per request.
 * 10,000 requests with unknown random keys from one address, through the real data plane and worker: Redis
 * (everything under this test's prefix) grows by less than 1 MB and request_log by no row, with the key
 * look-up throttle on (the default) and off (the aggregate counting alone).
 */
describe("keyless flood: 10,000 unknown keys from one address", function () {
  this.timeout(300_000);
  let h: Harness;
  let stub: StubUpstream;
  let worker: ControlPlaneWorker | undefined;
  let dp: DataPlane | undefined;
  let tenant: { token: string; workspaceId: string };
  let app: { id: string; apiKey: string };

  const startDp = async (env: Record<string, string>) => {
    await dp?.close();
    dp = await startHarnessDataPlane(h, {
      HEALTH_CHECK_INTERVAL_MS: "200",
      USAGE_FLUSH_INTERVAL_MS: "200",
      REQUEST_LOG_FLUSH_INTERVAL_MS: "100",
      RATE_LIMIT_MODE: "local",
      QUOTA_MODE: "off",
      SHARED_NODE_EXTRA_NAMESPACES: "stub",
      // The tenant's key, looked up once before the flood, stays cached however long a loaded machine
      // takes over the flood (past the default minute its next look-up would meet the address's throttle).
      KEY_CACHE_TTL_MS: "3600000",
      // Each unknown key is a Redis read: on a loaded machine one of 10,000 can outlast the default
      // command timeout and be answered 500 `internal` (the contract's row for a failed look-up), which
      // is not what this test is about.
      REDIS_COMMAND_TIMEOUT_MS: "10000",
      ...env,
    });
    return `http://127.0.0.1:${dp.port}`;
  };

  /** Every request of the flood answered; the statuses seen, with how many of each. */
  const flood = async (base: string) => {
    const statuses = new Map<number, number>();
    let retryAfter = 0;
    let next = 0;
    const startedMs = Date.now();
    const one = async () => {
      while (next < FLOOD) {
        next++;
        const key = randomBytes(24).toString("base64url");
        const r = await post(`${base}/evm-stub/rpc?apikey=${key}`, {
          jsonrpc: "2.0",
          id: 1,
          method: "eth_chainId",
        });
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status === 429) {
          assert.equal(r.json.error.data.reason, "key_lookup_throttled");
          assert.equal(r.json.error.code, -32005);
          assert.ok(r.json.error.data.retryAfterMs > 0);
          retryAfter = Number(r.headers.get("retry-after"));
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, one));
    // The throttle's windows are KEY_LOOKUP_WINDOW_MS (60 s by default) aligned to the epoch: a flood that
    // crosses a boundary meets a fresh allowance in each window it spans.
    const windows = Math.floor(Date.now() / 60_000) - Math.floor(startedMs / 60_000) + 1;
    return { statuses, retryAfter, windows };
  };

  /** The keyless hashes' counts: reason -> requests (every minute, every client prefix). */
  const keylessCounts = async (): Promise<Map<string, number>> => {
    const out = new Map<string, number>();
    const keys = (await h.redis.keys(`${h.ns.prefix}keyless:*`)) as string[];
    for (const k of keys) {
      const ttl = await h.redis.ttl(k);
      assert.ok(ttl > 0 && ttl <= 10_800, `${k} has a TTL (${ttl} s)`);
      const hash = (await h.redis.hgetall(k)) as Record<string, string>;
      for (const [field, n] of Object.entries(hash)) {
        const [reason, prefix] = field.split("|");
        assert.equal(prefix, "127.0.0.0/24", "counted per client /24");
        out.set(reason!, (out.get(reason!) ?? 0) + Number(n));
      }
    }
    return out;
  };

  /** request_log rows of anyone but the real tenant (whose own requests are logged as before). */
  const requestLogRows = async () =>
    Number(
      (
        (await h.cp.dataSource.query(
          `SELECT count(*)::int AS n FROM request_log WHERE workspace_id IS DISTINCT FROM $1`,
          [tenant.workspaceId],
        )) as { n: number }[]
      )[0]!.n,
    );

  /** Waits until the worker has read every request-log entry (so a stored row would be in Postgres). */
  const ingested = async () => {
    const stream = h.names.requestLogStream();
    await eventually(
      async () => {
        const gs = (await h.redis.xinfo("GROUPS", stream).catch(() => [])) as unknown[][];
        const g = gs.map((flat) => {
          const o: Record<string, unknown> = {};
          for (let j = 0; j + 1 < flat.length; j += 2) o[String(flat[j])] = flat[j + 1];
          return o;
        });
        const group = g.find((x) => x.name === REQUEST_LOG_CONSUMER_GROUP);
        return group !== undefined && Number(group.lag) === 0 && Number(group.pending) === 0;
      },
      "request-log ingestion catching up",
      30_000,
    );
  };

  before(async () => {
    h = await startHarness();
    stub = await new StubUpstream().start();
    await createStubNetwork(h, stub.url);
    tenant = await h.signUp();
    app = await createApp(h, tenant.token, "real-app");
    worker = await startWorker(h.config, undefined, { usage: { blockMs: 100, consumerName: "flood-test" } });
  });

  after(async () => {
    await dp?.close();
    await worker?.close();
    await stub?.stop();
    await h?.close();
  });

  for (const throttled of [true, false]) {
    it(`grows Redis by less than 1 MB and request_log by no row (key look-up throttle ${throttled ? "on" : "off"})`, async () => {
      const base = await startDp(throttled ? {} : { KEY_LOOKUP_MAX_FAILURES: "0" });
      // A real tenant's traffic before the flood: its error is logged as before (the log works).
      const own = await post(`${base}/evm-stub/rpc?apikey=${app.apiKey}`, {
        jsonrpc: "2.0",
        id: 1,
        method: "stub_error",
      });
      assert.equal(own.json.error.code, -32000);
      await ingested();
      await h.redis.del(
        ...((await h.redis.keys(`${h.ns.prefix}keyless:*`)) as string[]),
        `${h.ns.prefix}none`,
      );
      const rowsBefore = await requestLogRows();
      const bytesBefore = await prefixBytes(h);

      const { statuses, retryAfter, windows } = await flood(base);
      // The tenant's own key, cached, is still served from the flooding address (the throttle spares Redis,
      // not known keys).
      const during = await post(`${base}/evm-stub/rpc?apikey=${app.apiKey}`, {
        jsonrpc: "2.0",
        id: 2,
        method: "stub_error",
      });
      assert.equal(during.json.error.code, -32000);

      await dp!.close(); // flushes the request log and usage
      dp = undefined;
      await ingested();
      const bytesAfter = await prefixBytes(h);
      const grew = bytesAfter - bytesBefore;
      console.log(
        `      [measure] ${FLOOD} unknown keys from one address, throttle ${throttled ? "on" : "off"}: Redis under the prefix ${bytesBefore} -> ${bytesAfter} bytes (${grew >= 0 ? "+" : ""}${grew}); statuses ${JSON.stringify(Object.fromEntries(statuses))}`,
      );
      assert.ok(grew < 1_000_000, `Redis grew by ${grew} bytes`);
      assert.equal(await requestLogRows(), rowsBefore, "no request_log row for the flood");

      const counts = await keylessCounts();
      if (throttled) {
        // 20 look-ups (KEY_LOOKUP_MAX_FAILURES) reach Redis in each window the flood spans (plus those in
        // flight when the 20th failure lands); the rest are refused before it.
        const unknown = statuses.get(401) ?? 0;
        assert.ok(
          unknown >= 20 && unknown <= 20 * windows + CONCURRENCY,
          `401s: ${unknown} over ${windows} windows`,
        );
        assert.equal((statuses.get(429) ?? 0) + unknown, FLOOD);
        assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
        assert.equal(counts.get("unknown_key"), unknown);
        assert.equal(counts.get("key_lookup_throttled"), FLOOD - unknown);
      } else {
        assert.equal(statuses.get(401), FLOOD);
        assert.equal(counts.get("unknown_key"), FLOOD);
      }
    });
  }

  it("the throttle holds on every path: HTTP, WebSocket upgrades and dedicated-node endpoints answer 429 with Retry-After", async () => {
    const base = await startDp({ KEY_LOOKUP_MAX_FAILURES: "3", KEY_LOOKUP_WINDOW_MS: "3600000" });
    const unknown = () => randomBytes(24).toString("base64url");
    const call = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
    for (let i = 0; i < 3; i++)
      assert.equal((await post(`${base}/evm-stub/rpc?apikey=${unknown()}`, call)).status, 401);
    const checkThrottled = (status: number, retryAfter: string | null | undefined, body: string) => {
      assert.equal(status, 429);
      const s = Number(retryAfter);
      assert.ok(s >= 1 && s <= 3600, `Retry-After ${retryAfter}`);
      const err = JSON.parse(body).error;
      assert.equal(err.data.reason, "key_lookup_throttled");
      assert.equal(err.data.category, "Too Many Requests");
      assert.ok(err.data.retryAfterMs > 0 && err.data.retryAfterMs <= 3_600_000);
    };
    const http = await post(`${base}/evm-stub/rpc?apikey=${unknown()}`, call);
    checkThrottled(http.status, http.headers.get("retry-after"), http.text);
    const node = await post(`${base}/nodes/00000000-0000-4000-8000-000000000000/${unknown()}`, call);
    checkThrottled(node.status, node.headers.get("retry-after"), node.text);
    for (const path of [
      `/evm-stub/rpc?apikey=${unknown()}`,
      `/nodes/00000000-0000-4000-8000-000000000000/${unknown()}`,
    ]) {
      const upgrade = await new Promise<{ status: number; retryAfter: string | undefined; body: string }>(
        (resolve, reject) => {
          const req = request(`${base}${path}`, {
            headers: {
              connection: "Upgrade",
              upgrade: "websocket",
              "sec-websocket-version": "13",
              "sec-websocket-key": randomBytes(16).toString("base64"),
            },
          });
          req.on("response", (res) => {
            let body = "";
            res.on("data", (c: Buffer) => (body += c.toString()));
            res.on("end", () =>
              resolve({ status: res.statusCode!, retryAfter: res.headers["retry-after"] as string, body }),
            );
          });
          req.on("upgrade", () => reject(new Error(`${path}: upgraded`)));
          req.on("error", reject);
          req.end();
        },
      );
      checkThrottled(upgrade.status, upgrade.retryAfter, upgrade.body);
    }
  });
});
