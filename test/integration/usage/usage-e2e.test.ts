import assert from "node:assert/strict";
import { NIL_UUID } from "../../../control-plane/src/usage/usage.sql";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import type { DataPlane } from "../../../data-plane/src/data-plane";
import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import { bucketIndex } from "../../../shared/src/usage/contract";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { describeOverRedis } from "../../helpers/redis";
import {
  ADMIN_TOKEN,
  code,
  createApp,
  type Harness,
  type Json,
  startHarness,
  startHarnessDataPlane,
} from "../control-plane/harness";
import { post, sleep } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";
import { TestWsClient } from "../data-plane/ws/ws-client";

const C = ErrorCategory;
const ZERO = "0x0000000000000000000000000000000000000000";

/** Expected usage, tallied as the test sends: per category and per method. */
class Tally {
  readonly byCategory = new Map<string, number>();
  readonly byMethod = new Map<string, { requests: number; errors: number }>();
  add(method: string, category: ErrorCategory, n = 1): void {
    this.byCategory.set(category, (this.byCategory.get(category) ?? 0) + n);
    const m = this.byMethod.get(method) ?? { requests: 0, errors: 0 };
    m.requests += n;
    if (category !== C.Success) m.errors += n;
    this.byMethod.set(method, m);
  }
  get total(): number {
    let t = 0;
    for (const v of this.byCategory.values()) t += v;
    return t;
  }
  cat(c: ErrorCategory): number {
    return this.byCategory.get(c) ?? 0;
  }
}

const REPORT = `requests24h { total success errors { serviceError nodeError clientError tooManyRequests unknownError } }`;

describeOverRedis(
  "usage end to end: gateway -> Redis stream -> worker -> Postgres -> GraphQL usage",
  function (redis, kind) {
    this.timeout(180_000);
    let h: Harness;
    let anvil: Anvil;
    let stub: StubUpstream;
    let worker: ControlPlaneWorker | undefined;
    let dp: DataPlane;
    let a: { token: string; accountId: string; workspaceId: string };
    let b: { token: string; accountId: string; workspaceId: string };
    let appA: { id: string; apiKey: string };
    let appB: { id: string; apiKey: string };
    let base = "";
    const startDp = (env: Record<string, string> = {}) =>
      startHarnessDataPlane(h, {
        HEALTH_CHECK_INTERVAL_MS: "200",
        USAGE_FLUSH_INTERVAL_MS: "200",
        RATE_LIMIT_MODE: "local",
        QUOTA_MODE: "off",
        // stub_error / stub_invalidParams: the stub's own namespace, opened as an operator would.
        SHARED_NODE_EXTRA_NAMESPACES: "stub",
        ...env,
      });
    const startUsageWorker = () =>
      startWorker(h.config, undefined, { usage: { blockMs: 100, consumerName: "usage-e2e" } });

    /**
     * Everything counted so far is in Postgres: the data planes' pending rows are flushed to the stream,
     * and the worker's group has read (lag 0) and acknowledged (nothing pending) every entry, which it does
     * after the rows are committed. What a report shows then is final: nothing more can trickle in.
     */
    const settled = async (...planes: DataPlane[]): Promise<void> => {
      for (const p of planes) await p.usage.flush();
      await eventually(
        async () => {
          const groups = (await h.redis.xinfo("GROUPS", h.names.usageStream())) as unknown[][];
          return groups.every((g) => {
            const f: Record<string, unknown> = {};
            for (let i = 0; i + 1 < g.length; i += 2) f[String(g[i])] = g[i + 1];
            return Number(f.lag) === 0 && Number(f.pending) === 0;
          });
        },
        "the usage stream is drained",
        30_000,
      );
    };
    const report = async (token: string, filter: Json = {}, fields = REPORT): Promise<Json> =>
      (await h.ok(`query($f: UsageFilter!) { usage(filter: $f) { ${fields} } }`, { f: filter }, token)).usage;
    /** Polls `usage` until requests24h.total reaches `total` (fails after `ms`); returns the wait. */
    const waitTotal = async (token: string, filter: Json, total: number, ms = 30_000): Promise<number> => {
      const t0 = performance.now();
      let last = -1;
      while (performance.now() - t0 < ms) {
        last = (await report(token, filter, "requests24h { total }")).requests24h.total;
        if (last >= total) {
          assert.equal(last, total, "usage total overshot");
          return performance.now() - t0;
        }
        await sleep(25);
      }
      throw new Error(`usage total stayed at ${last}, expected ${total}`);
    };

    before(async () => {
      h = await startHarness({}, { redis: redis() });
      anvil = await startAnvil({ blockTimeSec: 1 });
      stub = await new StubUpstream().start();
      await h.ok(
        `mutation($a: String!, $w: String, $s: String!) {
        n1: createNetwork(input: { slug: "evm-anvil", name: "Anvil", protocol: EVM, chainId: 31337 }) { id }
        n2: createNetwork(input: { slug: "evm-stub", name: "Stub", protocol: EVM, chainId: 31337 }) { id }
        u1: addUpstream(networkSlug: "evm-anvil", input: { httpUrl: $a, wsUrl: $w }) { id }
        u2: addUpstream(networkSlug: "evm-stub", input: { httpUrl: $s }) { id } }`,
        { a: anvil.httpUrl, w: anvil.wsUrl, s: stub.url },
        ADMIN_TOKEN,
      );
      a = await h.signUp();
      b = await h.signUp();
      appA = await createApp(h, a.token, "a-app");
      appB = await createApp(h, b.token, "b-app");
      worker = await startUsageWorker();
      dp = await startDp();
      base = `http://127.0.0.1:${dp.port}`;
    });

    after(async () => {
      await dp?.close();
      await worker?.close();
      await anvil?.stop();
      await stub?.stop();
      await h?.close();
    });

    it("a known mix over HTTP and WebSocket shows up with exact counts per category and method", async () => {
      const t = new Tally();
      const rpc = (net: string, key = appA.apiKey) => `${base}/${net}/rpc?apikey=${key}`;
      const anvilUrl = rpc("evm-anvil");
      // Successes: singles (eth_chainId is cached permanently: 1 miss + 2 hits, all Success).
      for (let i = 0; i < 3; i++) {
        const r = await post(anvilUrl, { jsonrpc: "2.0", id: i, method: "eth_chainId" });
        assert.equal(r.json.result, "0x7a69");
        t.add("eth_chainId", C.Success);
      }
      for (let i = 0; i < 2; i++) {
        const r = await post(anvilUrl, { jsonrpc: "2.0", id: i, method: "eth_blockNumber" });
        assert.match(r.json.result, /^0x/);
        t.add("eth_blockNumber", C.Success);
      }
      // A JSON-RPC notification (no id): forwarded, 204, recorded as Success.
      assert.equal((await post(anvilUrl, { jsonrpc: "2.0", method: "eth_blockNumber" })).status, 204);
      t.add("eth_blockNumber", C.Success);
      // A batch of 10, timed client-side.
      const batch = Array.from({ length: 10 }, (_, i) => ({
        jsonrpc: "2.0",
        id: i,
        method: "eth_getBalance",
        params: [ZERO, "latest"],
      }));
      const t0 = performance.now();
      const br = await post(anvilUrl, batch);
      const batchClientMs = performance.now() - t0;
      assert.equal(br.json.length, 10);
      t.add("eth_getBalance", C.Success, 10);
      // Blocked method (per element, 200): Client Error.
      const blocked = await post(anvilUrl, { jsonrpc: "2.0", id: 1, method: "personal_sign", params: [] });
      assert.equal(blocked.json.error.code, -32601);
      t.add("personal_sign", C.ClientError);
      // Upstream JSON-RPC errors: -32602 is a Client Error, -32000 a Node Error.
      const inv = await post(rpc("evm-stub"), { jsonrpc: "2.0", id: 1, method: "stub_invalidParams" });
      assert.equal(inv.json.error.code, -32602);
      t.add("stub_invalidParams", C.ClientError);
      const nodeErr = await post(rpc("evm-stub"), { jsonrpc: "2.0", id: 1, method: "stub_error" });
      assert.equal(nodeErr.json.error.code, -32000);
      t.add("stub_error", C.NodeError);
      // Body not JSON (400): one Client Error under "other" (key known: the app's).
      assert.equal((await post(anvilUrl, "{not json")).status, 400);
      t.add("other", C.ClientError);
      // A batch over the plan's 50 req/s: refused whole (429); each request object shows as Too Many Requests.
      const big = Array.from({ length: 60 }, (_, i) => ({
        jsonrpc: "2.0",
        id: i,
        method: "eth_blockNumber",
      }));
      const refused = await post(anvilUrl, big);
      assert.equal(refused.status, 429);
      t.add("eth_blockNumber", C.TooManyRequests, 60);

      // Not the workspace's: unknown key, public endpoint, unknown network.
      for (let i = 0; i < 3; i++) {
        assert.equal(
          (await post(rpc("evm-anvil", "nope"), { jsonrpc: "2.0", id: 1, method: "eth_chainId" })).status,
          401,
        );
      }
      for (let i = 0; i < 2; i++) {
        const r = await post(`${base}/evm-anvil/public`, { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
        assert.equal(r.json.result, "0x7a69");
      }
      assert.equal((await post(`${base}/no-such-net/rpc?apikey=${appA.apiKey}`, {})).status, 404);
      // Workspace B: two requests of its own.
      for (let i = 0; i < 2; i++) {
        await post(rpc("evm-anvil", appB.apiKey), { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
      }

      // WebSocket: a single, a batch with a blocked element, a subscription with its notifications.
      const ws = await TestWsClient.open(`ws://127.0.0.1:${dp.port}/evm-anvil/rpc?apikey=${appA.apiKey}`);
      let notifications = 0;
      try {
        assert.equal((await ws.call("eth_chainId")).result, "0x7a69");
        t.add("eth_chainId", C.Success);
        ws.sendRaw(
          JSON.stringify([
            { jsonrpc: "2.0", id: 101, method: "eth_blockNumber" },
            { jsonrpc: "2.0", id: 102, method: "eth_chainId" },
            { jsonrpc: "2.0", id: 103, method: "personal_sign", params: [] },
          ]),
        );
        await ws.until(() => ws.messages.some((m) => Array.isArray(m)), 5000, "ws batch answer");
        t.add("eth_blockNumber", C.Success);
        t.add("eth_chainId", C.Success);
        t.add("personal_sign", C.ClientError);
        const sub = (await ws.call("eth_subscribe", ["newHeads"])).result as string;
        t.add("eth_subscribe", C.Success);
        await ws.until(() => ws.notifications(sub).length >= 2, 15_000, "two heads");
        assert.equal((await ws.call("eth_unsubscribe", [sub])).result, true);
        t.add("eth_unsubscribe", C.Success);
        // Every notification delivered before the unsubscribe answer arrived before it on this socket.
        notifications = ws.notifications(sub).length;
        t.add("eth_subscription", C.Success, notifications);
      } finally {
        ws.close();
      }

      await waitTotal(a.token, {}, t.total);
      await settled(dp);
      const r = await report(
        a.token,
        {},
        `${REPORT} methods { method requests errors p50 p95 }
       responseTime(method: "eth_getBalance") { p50 p95 avg }
       history(days: 2) { date total byApp { app { id } count } }
       today { count limit }`,
      );
      assert.deepEqual(r.requests24h, {
        total: t.total,
        success: t.cat(C.Success),
        errors: {
          serviceError: 0,
          nodeError: t.cat(C.NodeError),
          clientError: t.cat(C.ClientError),
          tooManyRequests: t.cat(C.TooManyRequests),
          unknownError: 0,
        },
      });
      assert.equal(t.total, 86 + notifications);
      const methods = new Map<string, Json>(r.methods.map((m: Json) => [m.method, m]));
      assert.deepEqual(
        [...methods.keys()].sort(),
        [...t.byMethod.keys()].sort(),
        `methods: ${JSON.stringify(r.methods)}`,
      );
      for (const [method, want] of t.byMethod) {
        const got = methods.get(method)!;
        assert.deepEqual({ requests: got.requests, errors: got.errors }, want, method);
      }
      // The 10 balances were answered together: one server latency, at most the client's, one bucket.
      const rt = r.responseTime;
      assert.ok(rt.p50 > 0 && rt.avg > 0, JSON.stringify(rt));
      assert.equal(bucketIndex(rt.p50), bucketIndex(rt.p95));
      assert.ok(bucketIndex(rt.p50) <= bucketIndex(batchClientMs), `${rt.p50} vs client ${batchClientMs}`);
      assert.ok(rt.avg <= batchClientMs);
      const today = r.history[r.history.length - 1];
      assert.equal(today.total, t.total);
      assert.deepEqual(
        today.byApp.map((x: Json) => [x.app.id, x.count]),
        [[appA.id, t.total]],
      );
      // today (QUOTA_MODE=off: from the rollups): what counts against the limit, i.e. without the 429s.
      assert.equal(r.today.count, t.total - t.cat(C.TooManyRequests));

      // Filters.
      assert.equal((await report(a.token, { network: "evm-stub" })).requests24h.total, 2);
      assert.equal((await report(a.token, { appId: appA.id })).requests24h.total, t.total);
      // Tenant isolation: B sees its own two requests only, and not A's app.
      await waitTotal(b.token, {}, 2);
      const rb = await report(b.token, {}, `${REPORT} methods { method requests }`);
      assert.equal(rb.requests24h.total, 2);
      assert.deepEqual(rb.methods, [{ method: "eth_chainId", requests: 2 }]);
      const q = `query($f: UsageFilter!) { usage(filter: $f) { requests24h { total } } }`;
      assert.equal(code(await h.gql(q, { f: { appId: appA.id } }, b.token)), "NOT_FOUND");
      assert.equal(code(await h.gql(q, { f: { workspaceId: a.workspaceId } }, b.token)), "NOT_FOUND");

      // Unknown-key, public and unknown-network traffic: stored without a workspace, under the network.
      const rows: { network: string; category: string; c: number }[] = await h.cp.dataSource.query(
        `SELECT network, category, sum(count)::int AS c FROM usage_minute WHERE workspace_id = $1
       GROUP BY network, category ORDER BY network, category`,
        [NIL_UUID],
      );
      assert.deepEqual(
        rows.map((x) => [x.network, x.category, x.c]),
        [
          ["evm-anvil", C.Success, 2],
          ["evm-anvil", C.ClientError, 3],
          ["unknown", C.ClientError, 1],
        ].sort((x, y) => `${x[0]}|${x[1]}`.localeCompare(`${y[0]}|${y[1]}`)),
      );
    });

    it("close() mid-load: every request that got an answer is counted, nothing more", async () => {
      const app = await createApp(h, a.token, "close-app");
      const dp2 = await startDp({ RATE_LIMIT_MODE: "off", SHUTDOWN_DRAIN_MS: "5000" });
      stub.delayMs = 100;
      let answered = 0;
      let stop = false;
      const url = `http://127.0.0.1:${dp2.port}/evm-stub/rpc?apikey=${app.apiKey}`;
      const loop = async (k: number) => {
        let i = 0;
        while (!stop) {
          try {
            const r = await post(url, {
              jsonrpc: "2.0",
              id: `${k}-${i++}`,
              method: "eth_getBalance",
              params: [ZERO],
            });
            if (r.status === 200 && r.json?.result !== undefined) answered++;
            // After the drain: 503 shutting_down, counted under the app whose key it carries.
            else if (r.status === 503 && r.json?.error?.data?.reason === "shutting_down") answered++;
          } catch {
            return; // connection refused / reset: not answered
          }
        }
      };
      const loops = Array.from({ length: 20 }, (_, k) => loop(k));
      // Several rounds answered (20 loops, 100 ms each), the next ones in flight.
      await eventually(() => answered >= 40, "two rounds answered", 30_000, 5);
      await dp2.close();
      stop = true;
      await Promise.all(loops);
      stub.delayMs = 0;
      assert.ok(answered >= 40, `answered ${answered}`);
      await waitTotal(a.token, { appId: app.id }, answered);
      await settled(dp);
      assert.equal((await report(a.token, { appId: app.id })).requests24h.total, answered);
    });

    it("worker stopped and restarted mid-stream: counted once", async () => {
      const app = await createApp(h, a.token, "restart-app");
      const url = `${base}/evm-stub/rpc?apikey=${app.apiKey}`;
      let sent = 0;
      let stop = false;
      const traffic = (async () => {
        while (!stop) {
          const r = await post(url, { jsonrpc: "2.0", id: sent, method: "eth_getBalance", params: [ZERO] });
          assert.equal(r.status, 200);
          sent++;
          await sleep(40); // under the free plan's 50 req/s
        }
      })();
      await sleep(700);
      await worker!.close();
      worker = undefined;
      await sleep(700); // flushes pile up in the stream meanwhile
      worker = await startUsageWorker();
      await sleep(700);
      stop = true;
      await traffic;
      assert.ok(sent > 20, `sent ${sent}`);
      await waitTotal(a.token, { appId: app.id }, sent);
      await settled(dp);
      assert.equal((await report(a.token, { appId: app.id })).requests24h.total, sent);
    });

    // A measurement for the report (~16 s), taken on the single Redis only.
    if (kind === "single")
      it("end-to-end delay from an answer to it being visible in usage (200 ms and the default 5 s flush)", async () => {
        const measure = async (plane: DataPlane, samples: number): Promise<number[]> => {
          const app = await createApp(h, a.token, `delay-${Math.random()}`);
          const url = `http://127.0.0.1:${plane.port}/evm-stub/rpc?apikey=${app.apiKey}`;
          const out: number[] = [];
          for (let i = 1; i <= samples; i++) {
            await post(url, { jsonrpc: "2.0", id: i, method: "eth_blockNumber" });
            out.push(Math.round(await waitTotal(a.token, { appId: app.id }, i, 20_000)));
          }
          return out;
        };
        const fast = await measure(dp, 5);
        const slowDp = await startDp({ USAGE_FLUSH_INTERVAL_MS: "5000" });
        let slow: number[];
        try {
          slow = await measure(slowDp, 3);
        } finally {
          await slowDp.close();
        }
        // waitTotal asserted that each answer became visible, counted once (its deadline is the liveness
        // bound). How soon is a figure for the report, not an assertion: on a loaded machine it measures
        // the machine, not the flush.
        console.log(
          `      usage visible after (ms): flush 200 ms -> ${fast.join(", ")}; flush 5 s -> ${slow.join(", ")}`,
        );
      });
  },
);
