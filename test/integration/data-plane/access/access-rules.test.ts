import assert from "node:assert/strict";
import { request } from "node:http";
import { Redis } from "ioredis";
import { hashApiKey } from "../../../../shared/src/crypto/api-key";
import { utcDayKey } from "../../../../shared/src/quota/day";
import { RedisNames } from "../../../../shared/src/redis/keys";
import type { AccessRecord } from "../../../../shared/src/redis/records";
import { eventually } from "../../../helpers/eventually";
import { TEST_REDIS_URL } from "../../../helpers/redis";
import { evmNetwork, type RedisSeeder } from "../../../helpers/seed-redis";
import { type Gateway, post, type RpcResponse, sleep, startGateway } from "../harness";
import { batchOf, call, FakeClock, inSecond, LIMITS_ENV, RecordingUpstream } from "../limits/fixtures";
import { TestWsClient } from "../ws/ws-client";

/**
 * An app's access rules on the data plane, against real Redis (records seeded as the control plane
 * publishes them) and a recording upstream: method allow/deny-lists per element (HTTP and WebSocket,
 * singles and batches), User-Agent patterns, the app's own per-second and daily caps on the shared
 * limiters. JWTs are in jwt.test.ts.
 */

const NO_RULES: AccessRecord = {
  methodMode: "DENY",
  methods: [],
  requestsPerSecond: null,
  requestsPerDay: null,
  userAgents: [],
  jwt: null,
};

const PLAN = {
  name: "test",
  requestsPerSecond: 1000,
  dailyRequestLimit: 1_000_000,
  monthlyRequestLimit: null,
};

// biome-ignore lint/suspicious/noExplicitAny: test convenience
function errorOf(x: any): {
  code: number;
  reason: string;
  message: string;
  limit?: number;
  retryAfterMs?: number;
} {
  return {
    code: x.error.code,
    reason: x.error.data.reason,
    message: x.error.message,
    limit: x.error.data.limit,
    retryAfterMs: x.error.data.retryAfterMs,
  };
}

describe("data plane: app access rules (methods, user agents, caps) over HTTP and WebSocket", function () {
  this.timeout(60_000);
  let up: RecordingUpstream;
  let gw: Gateway | undefined;

  beforeEach(async () => {
    up = await new RecordingUpstream().start();
  });

  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await up.stop();
  });

  async function start(
    seed: (s: RedisSeeder) => Promise<void>,
    env: Record<string, string> = {},
    clock?: FakeClock,
  ): Promise<Gateway> {
    gw = await startGateway(
      { ...LIMITS_ENV, ...env },
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
        await seed(s);
      },
      clock === undefined ? {} : { clock },
    );
    return gw;
  }

  it("a deny-list refuses its methods per element (batch and single), the rest is forwarded", async () => {
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({
        appId: "app-deny",
        plan: PLAN,
        access: { ...NO_RULES, methods: ["lim_secret", "q_*"] },
      });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const r = await post(url, [
      call("eth_chainId", 1),
      call("lim_secret", 2),
      call("lim_SECRET", 3),
      call("q_anything", 4),
      call("lim_public", 5),
      { jsonrpc: "2.0", method: "lim_secret" }, // a notification: refused, no answer object
    ]);
    assert.equal(r.status, 200, r.text);
    const byId = new Map((r.json as { id: number; result?: string }[]).map((x) => [x.id, x]));
    assert.equal(byId.size, 5);
    assert.equal(byId.get(1)!.result, "0x7a69");
    assert.equal(byId.get(5)!.result, "0x1");
    for (const id of [2, 3, 4]) {
      const e = errorOf(byId.get(id));
      assert.equal(e.code, -32601);
      assert.equal(e.reason, "method_not_allowed_by_app");
      assert.match(e.message, /on this app's method deny-list/);
    }
    assert.equal(
      up.count("lim_secret") + up.count("lim_SECRET") + up.count("q_anything"),
      0,
      "never forwarded",
    );
    assert.equal(up.count("lim_public"), 1);
    const single = await post(url, call("q_x", 9));
    assert.equal(single.status, 200);
    assert.equal(errorOf(single.json).reason, "method_not_allowed_by_app");
    assert.equal(single.json.id, 9);
    // The shared-node policy still comes first: its row, not the app's, for a method it blocks.
    const blocked = await post(url, call("admin_peers", 10));
    assert.equal(errorOf(blocked.json).reason, "method_blocked");
  });

  it("an allow-list lets only its methods and namespaces through; WebSocket singles, batches and subscribes alike", async () => {
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({
        appId: "app-allow",
        plan: PLAN,
        access: { ...NO_RULES, methodMode: "ALLOW", methods: ["eth_chainId", "lim_*"] },
      });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const r = await post(url, [call("eth_chainId", 1), call("eth_gasPrice", 2), call("lim_a", 3)]);
    const [a, b, c] = r.json as { id: number; result?: string }[];
    assert.equal(a!.result, "0x7a69");
    assert.equal(errorOf(b).reason, "method_not_allowed_by_app");
    assert.match(errorOf(b).message, /eth_gasPrice is not on this app's method allow-list/);
    assert.equal(c!.result, "0x1");
    assert.equal(up.count("eth_gasPrice"), 0);

    const ws = await TestWsClient.open(`ws://127.0.0.1:${g.port()}/eth/rpc?apikey=${key}`);
    try {
      assert.equal((await ws.call("eth_chainId")).result, "0x7a69");
      const refused = await ws.call("eth_getBalance", ["0x0", "latest"]);
      assert.equal(errorOf(refused).reason, "method_not_allowed_by_app");
      // A subscribe not on the list is refused by the app's rules before any upstream socket is needed.
      const sub = await ws.call("eth_subscribe", ["newHeads"]);
      assert.equal(errorOf(sub).reason, "method_not_allowed_by_app");
      ws.sendRaw(JSON.stringify([call("lim_b", 50), call("eth_feeHistory", 51)]));
      await ws.until(() => ws.messages.some((m) => Array.isArray(m)), 5000, "batch answer");
      const batch = ws.messages.find((m) => Array.isArray(m)) as { id: number; result?: string }[];
      assert.equal(batch.find((x) => x.id === 50)!.result, "0x1");
      assert.equal(errorOf(batch.find((x) => x.id === 51)).reason, "method_not_allowed_by_app");
      assert.equal(up.count("eth_feeHistory") + up.count("eth_getBalance"), 0);
    } finally {
      ws.close();
    }
  });

  it("User-Agent patterns: a matching agent passes, another or none gets 403 user_agent_not_allowed (HTTP and upgrade)", async () => {
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({
        appId: "app-ua",
        plan: PLAN,
        access: { ...NO_RULES, userAgents: ["MyWallet/*", "*Indexer*"] },
      });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    assert.equal((await post(url, call("eth_chainId"), { "user-agent": "MyWallet/2.1" })).status, 200);
    assert.equal((await post(url, call("eth_chainId"), { "user-agent": "acme-indexer 3" })).status, 200);
    // No User-Agent at all (node:http sends none unless told to).
    const bare = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        let body = "";
        res.on("data", (c: Buffer) => {
          body += c.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      req.end(JSON.stringify(call("eth_chainId")));
    });
    assert.equal(bare.status, 403);
    assert.equal(errorOf(JSON.parse(bare.body)).reason, "user_agent_not_allowed");
    const refused = await post(url, call("eth_chainId"), { "user-agent": "curl/8.5.0" });
    assert.equal(refused.status, 403);
    assert.equal(errorOf(refused.json).code, -32016);
    assert.equal(errorOf(refused.json).reason, "user_agent_not_allowed");
    const wsUrl = `ws://127.0.0.1:${g.port()}/eth/rpc?apikey=${key}`;
    await assert.rejects(
      TestWsClient.open(wsUrl, { "user-agent": "python-websockets" }),
      (err: { status: number; body: unknown }) => {
        assert.equal(err.status, 403);
        assert.equal(errorOf(err.body).reason, "user_agent_not_allowed");
        return true;
      },
    );
    const ws = await TestWsClient.open(wsUrl, { "user-agent": "MyWallet/2.1 (ws)" });
    assert.equal((await ws.call("eth_chainId")).result, "0x7a69");
    ws.close();
  });

  it("a per-second cap below the plan's: the 21st call in a second gets 429 app_rate_limit (Retry-After, limit); other apps unaffected", async () => {
    const clock = new FakeClock(inSecond(200));
    let key = "";
    let other = "";
    const g = await start(
      async (s) => {
        key = await s.putKey({
          appId: "app-cap",
          plan: PLAN,
          access: { ...NO_RULES, requestsPerSecond: 20 },
        });
        other = await s.putKey({ appId: "app-free", plan: PLAN });
      },
      {},
      clock,
    );
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const ok = await Promise.all(Array.from({ length: 20 }, (_, i) => post(url, call("lim_cap", i))));
    for (const r of ok) {
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get("x-ratelimit-limit"), "20");
    }
    const over = await post(url, call("lim_cap", 21));
    assert.equal(over.status, 429);
    const e = errorOf(over.json);
    assert.equal(e.code, -32005);
    assert.equal(e.reason, "app_rate_limit");
    assert.equal(e.limit, 20);
    assert.equal(e.retryAfterMs, 800);
    assert.equal(over.headers.get("retry-after"), "1");
    assert.equal(up.count("lim_cap"), 20);
    // A batch larger than the cap can never pass: its message says so.
    clock.advance(1000);
    const big = await post(url, batchOf(21, "lim_cap"));
    assert.equal(big.status, 429);
    assert.match(errorOf(big.json).message, /batch larger than the app's cap of 20/);
    // The same workspace's other app has the plan's budget.
    const rs = await Promise.all(
      Array.from({ length: 30 }, (_, i) => post(`${g.base}/eth/rpc?apikey=${other}`, call("lim_other", i))),
    );
    assert.ok(rs.every((r) => r.status === 200));
    // WebSocket messages count against the same window.
    const ws = await TestWsClient.open(`ws://127.0.0.1:${g.port()}/eth/rpc?apikey=${key}`);
    try {
      ws.sendRaw(JSON.stringify(batchOf(15, "lim_cap", 100)));
      ws.sendRaw(JSON.stringify(batchOf(10, "lim_cap", 200)));
      await ws.until(
        () => ws.messages.filter((m) => Array.isArray(m)).length === 2,
        5000,
        "two batch answers",
      );
      const answers = ws.messages.filter((m) => Array.isArray(m)) as { id: number; error?: unknown }[][];
      const refusedBatch = answers.find((a) => a[0]!.id >= 200)!;
      assert.equal(errorOf(refusedBatch[0]).reason, "app_rate_limit");
      assert.ok(answers.find((a) => a[0]!.id < 200)!.every((x) => x.error === undefined));
    } finally {
      ws.close();
    }
  });

  it("the per-second cap holds within 10% under sustained load (real clock, reconciled limiter)", async () => {
    const CAP = 10;
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({
        appId: "app-sustained",
        plan: PLAN,
        // Low enough that six clients exceed it even on a busy machine (what is tested is the cap).
        access: { ...NO_RULES, requestsPerSecond: CAP },
      });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    up.watch = "lim_load";
    const stopAt = Date.now() + 3500;
    let refused = 0;
    await Promise.all(
      Array.from({ length: 6 }, async (_, w) => {
        let i = 0;
        while (Date.now() < stopAt) {
          const r = await post(url, call("lim_load", w * 100_000 + i++));
          if (r.status === 429) {
            refused++;
            assert.equal(errorOf(r.json).reason, "app_rate_limit");
          }
        }
      }),
    );
    assert.ok(refused > 0, "the load was above the cap");
    // Whole seconds only (the first and last were partly loaded).
    const seconds = [...up.perSecond.entries()].sort((a, b) => a[0] - b[0]).slice(1, -1);
    assert.ok(seconds.length >= 2, JSON.stringify([...up.perSecond]));
    for (const [sec, n] of seconds) {
      assert.ok(n <= CAP * 1.1 && n >= CAP * 0.9, `second ${sec}: ${n} forwarded, cap ${CAP} (±10%)`);
    }
  });

  it("a daily cap counts the app's served units (Redis) and refuses past it with 429 app_daily_limit until 00:00 UTC", async () => {
    const t0 = Date.UTC(2026, 2, 3, 22, 0, 0);
    const clock = new FakeClock(t0);
    let key = "";
    let sibling = "";
    const g = await start(
      async (s) => {
        key = await s.putKey({ appId: "app-daily", plan: PLAN, access: { ...NO_RULES, requestsPerDay: 50 } });
        sibling = await s.putKey({ appId: "app-sibling", plan: PLAN });
      },
      {},
      clock,
    );
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    let served = 0;
    let refusal: RpcResponse | undefined;
    for (let i = 0; i < 60 && refusal === undefined; i++) {
      // One second per call: far from the per-second cap.
      clock.advance(1000);
      const r = await post(url, call("lim_day", i));
      if (r.status === 200) served++;
      else refusal = r;
    }
    assert.equal(served, 50, "exactly the cap on one instance");
    assert.ok(refusal);
    assert.equal(refusal.status, 429);
    const e = errorOf(refusal.json);
    assert.equal(e.reason, "app_daily_limit");
    assert.equal(e.limit, 50);
    const midnight = Date.UTC(2026, 2, 4);
    assert.equal(e.retryAfterMs, midnight - clock.t);
    assert.equal(refusal.headers.get("retry-after"), String(Math.ceil((midnight - clock.t) / 1000)));
    // A batch refused whole; the sibling app of the workspace is served.
    assert.equal((await post(url, batchOf(3, "lim_day"))).status, 429);
    assert.equal((await post(`${g.base}/eth/rpc?apikey=${sibling}`, call("lim_day", 99))).status, 200);
    // The count lives in Redis under the app (other instances read it).
    const redis = new Redis(TEST_REDIS_URL);
    try {
      const names = new RedisNames(g.ns.prefix);
      const k = names.appQuotaDay("app-daily", utcDayKey(t0));
      await eventually(async () => Number(await redis.get(k)) === 50, "the app's count in Redis");
    } finally {
      redis.disconnect();
    }
    // Past midnight the cap starts over.
    clock.t = midnight + 1000;
    assert.equal((await post(url, call("lim_day", 100))).status, 200);
  });

  it("a daily cap shared by two instances ends within 10% of the cap", async () => {
    let key = "";
    const first = await start(async (s) => {
      key = await s.putKey({
        appId: "app-daily-2",
        plan: PLAN,
        access: { ...NO_RULES, requestsPerDay: 600 },
      });
    });
    const second = await startGateway({ ...LIMITS_ENV }, async () => {}, {}, first.ns);
    try {
      let served = 0;
      await Promise.all(
        [first, second].flatMap((g) =>
          Array.from({ length: 4 }, async (_, w) => {
            for (let i = 0; i < 100; i++) {
              const r = await post(`${g.base}/eth/rpc?apikey=${key}`, call("lim_shared", w * 1000 + i));
              if (r.status === 200) served++;
              else assert.equal(errorOf(r.json).reason, "app_daily_limit");
              await sleep(5);
            }
          }),
        ),
      );
      assert.ok(served >= 600 && served <= 660, `served ${served}, cap 600 (+10%)`);
    } finally {
      await second.stop();
    }
  });

  it("rules changed by the control plane (key.upsert) apply to the next request and to open sockets", async () => {
    let key = "";
    const g = await start(async (s) => {
      key = await s.putKey({ appId: "app-live", plan: PLAN });
    });
    const url = `${g.base}/eth/rpc?apikey=${key}`;
    const ws = await TestWsClient.open(`ws://127.0.0.1:${g.port()}/eth/rpc?apikey=${key}`);
    try {
      assert.equal((await post(url, call("lim_live"))).json.result, "0x1");
      assert.equal((await ws.call("lim_live")).result, "0x1");
      await g.seeder.putKey(
        { appId: "app-live", plan: PLAN, access: { ...NO_RULES, methods: ["lim_live"] } },
        key,
      );
      await g.seeder.publish({ type: "key.upsert", keyHash: hashApiKey(key) });
      await eventually(
        async () =>
          (await post(url, call("lim_live"))).json.error?.data?.reason === "method_not_allowed_by_app",
        "the new rules over HTTP",
      );
      const wsReason = await eventually(
        async () => (await ws.call("lim_live")).error?.data?.reason as string | undefined,
        "the new rules on the open socket",
      );
      assert.equal(wsReason, "method_not_allowed_by_app", "the open socket follows the new rules");
    } finally {
      ws.close();
    }
  });
});
