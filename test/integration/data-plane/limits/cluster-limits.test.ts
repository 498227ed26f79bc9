import assert from "node:assert/strict";
import { resolve } from "node:path";
import type { RedisReconciledRateLimiter } from "../../../../data-plane/src/ratelimit/redis-rate-limiter";
import { eventually, nextSecond } from "../../../helpers/eventually";
import { freePort } from "../../../helpers/ports";
import { type StartedProcess, startProcess } from "../../../helpers/process";
import {
  createTestRedisNamespace,
  describeOverRedis,
  TEST_REDIS_URL,
  type TestRedisNamespace,
} from "../../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "../harness";
import { TcpProxy } from "../ratelimit/tcp-proxy";
import { batchOf, call, FakeClock, inSecond, LIMITS_ENV, RecordingUpstream, UsageReader } from "./fixtures";

const DATA_PLANE_MAIN = resolve(__dirname, "../../../../data-plane/src/main.js");
const WS = "ws-cluster";

function plan(requestsPerSecond: number, dailyRequestLimit = 10_000_000) {
  return { name: "test", requestsPerSecond, dailyRequestLimit, monthlyRequestLimit: null };
}

function limiterOf(gw: Gateway): RedisReconciledRateLimiter {
  return gw.plane.context.limits.limits.rateLimiter as RedisReconciledRateLimiter;
}

describeOverRedis(
  "data plane limits across instances, through Redis outages and shutdown",
  function (redis, kind) {
    this.timeout(60_000);
    let up: RecordingUpstream;
    let ns: TestRedisNamespace;
    const gateways: Gateway[] = [];
    let usage: UsageReader;

    beforeEach(async () => {
      up = await new RecordingUpstream().start();
      ns = createTestRedisNamespace(redis());
      usage = new UsageReader(ns.prefix, redis());
    });

    afterEach(async () => {
      for (const g of gateways.splice(0)) await g.stop();
      await usage.close();
      await up.stop();
      await ns.cleanup();
    });

    async function start(
      seed: (s: RedisSeeder) => Promise<void>,
      env: Record<string, string> = {},
      clock?: FakeClock,
    ): Promise<Gateway> {
      const g = await startGateway(
        { ...LIMITS_ENV, ...env },
        async (s) => {
          await s.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
          await seed(s);
        },
        clock === undefined ? {} : { clock },
        ns,
      );
      gateways.push(g);
      return g;
    }

    it("two instances sharing one key: each second's total within 10% of the limit; the daily count exact", async () => {
      // High enough that the few requests admitted just before a second's end and counted by the
      // upstream in the next second stay inside 10%; low enough for a loaded 2-core machine to offer more
      // (at 200/s it offered less, and the test failed).
      const limit = 100;
      let key = "";
      // The bound is the reconciliation's while Redis answers: a sync that outlasts the default 1 s command
      // timeout on a loaded machine would make the instances fail open (local limits only), another test.
      const env = { REDIS_COMMAND_TIMEOUT_MS: "10000" };
      const a = await start(async (s) => {
        key = await s.putKey({ workspaceId: WS, plan: plan(limit) });
      }, env);
      const b = await start(async () => {}, env);
      // Both announce themselves (heartbeats every 500 ms) before the load starts.
      await eventually(
        () => limiterOf(a).liveInstances >= 2 && limiterOf(b).liveInstances >= 2,
        "the two instances to see each other",
      );
      // Admissions counted inside each plane, in the second of its limiter's own clock: what the limit is
      // about. (The upstream's arrival times would put a request admitted at the end of one second into
      // the next whenever this shared machine is slow to forward it.)
      const admitted = new Map<number, number>();
      const refusedIn = new Set<number>();
      for (const g of [a, b]) {
        const limiter = limiterOf(g);
        const check = limiter.check.bind(limiter);
        const refund = limiter.refund.bind(limiter);
        const second = () => Math.floor(Date.now() / 1000);
        limiter.check = (id, cost, perSecond, commit = true) => {
          const r = check(id, cost, perSecond, commit);
          if (id.includes(WS) && commit) {
            if (r.allowed) admitted.set(second(), (admitted.get(second()) ?? 0) + cost);
            else refusedIn.add(second());
          }
          return r;
        };
        limiter.refund = (id, cost) => {
          refund(id, cost);
          if (id.includes(WS)) admitted.set(second(), (admitted.get(second()) ?? 0) - cost);
        };
      }
      up.watch = "lim_hammer";
      const urls = [a, b].map((g) => `${g.base}/eth/rpc?apikey=${key}`);
      await nextSecond();
      const first = Math.floor(Date.now() / 1000);
      const endMs = (first + 3) * 1000;
      let ok = 0;
      let refused = 0;
      let other = 0;
      const clientSide = new Map<number, [number, number]>();
      const loop = async (url: string) => {
        while (Date.now() < endMs) {
          const r = await post(url, call("lim_hammer"));
          const sec = Math.floor(Date.now() / 1000) - first;
          const c = clientSide.get(sec) ?? [0, 0];
          clientSide.set(sec, c);
          if (r.status === 200) {
            ok++;
            c[0]++;
          } else if (r.status === 429) {
            refused++;
            c[1]++;
          } else other++;
        }
      };
      await Promise.all(urls.flatMap((url) => Array.from({ length: 12 }, () => loop(url))));
      assert.equal(other, 0);
      const perSecond = [first, first + 1, first + 2].map((s) => admitted.get(s) ?? 0);
      // For the report: offered load and what each second admitted.
      console.log(
        `      two instances, limit ${limit}/s: admitted per second ${perSecond.join(", ")} ` +
          `(arrived upstream ${[first, first + 1, first + 2].map((s) => up.perSecond.get(s) ?? 0).join(", ")}); ` +
          `${ok} served, ${refused} refused (${Math.round((ok + refused) / 3)} offered/s); ` +
          `client side [ok, 429] per second: ${JSON.stringify([...clientSide.entries()])}`,
      );
      // The load must cross the limit for the figures below to mean anything; how far it gets above it
      // depends on this machine (the client and both gateways share this process), so the seconds that
      // saw 429s are the ones checked closely.
      assert.ok(refused > 0, "the load crossed the limit");
      // Never more than 10% over. In a second where the load crossed the limit (a plane refused), within 10%
      // below too; a second without any refusal had less load than the limit (this process stalled, on a
      // shared machine), and at least two of the three must be loaded.
      let loaded = 0;
      perSecond.forEach((n, i) => {
        assert.ok(n <= limit * 1.1, `admitted ${n} in a second, limit ${limit}`);
        if (refusedIn.has(first + i)) {
          loaded++;
          assert.ok(n >= limit * 0.9, `admitted ${n} in a loaded second, limit ${limit}`);
        }
      });
      assert.ok(loaded >= 2, "the load crossed the limit in at least two of the three seconds");
      // The daily count across both instances is exact once both have flushed (close flushes).
      for (const g of gateways.splice(0)) await g.stop();
      assert.equal((await usage.read(WS)).count, ok);
      assert.equal(up.count("lim_hammer"), ok);
    });

    // A TCP proxy in front of the single Redis (a cluster's clients follow the addresses its nodes announce).
    if (kind === "single")
      it("keeps serving with local limits while Redis is cut (fail-open), and the daily count is complete after it returns", async () => {
        const proxy = new TcpProxy("127.0.0.1", Number(new URL(TEST_REDIS_URL).port || 6379));
        await proxy.start();
        const clock = new FakeClock(inSecond(100));
        let big = "";
        let small = "";
        const g = await start(
          async (s) => {
            big = await s.putKey({ workspaceId: WS, appId: "app-big", plan: plan(1000) });
            small = await s.putKey({ workspaceId: WS, appId: "app-small", plan: plan(5) });
          },
          { REDIS_URL: proxy.url },
          clock,
        );
        try {
          const bigUrl = `${g.base}/eth/rpc?apikey=${big}`;
          const smallUrl = `${g.base}/eth/rpc?apikey=${small}`;
          for (let i = 0; i < 20; i++) assert.equal((await post(bigUrl, call("lim_out", i))).status, 200);
          // Both keys in the key cache (an uncached key cannot be verified while Redis is down). A fresh
          // second: both apps share the workspace's per-second window, and the small key's plan is 5/s.
          clock.advance(1000);
          assert.equal((await post(smallUrl, call("lim_out", 0))).status, 200);
          assert.equal(await usage.waitFor(WS, 21, clock.now()), 21);

          await proxy.cut();
          const metricsUrl = `${g.metricsBase}/metrics`;
          await eventually(
            async () =>
              (await (await fetch(metricsUrl)).text()).includes(
                'rpcgw_limits_redis_up{component="ratelimit"} 0',
              ),
            "the limiter to notice Redis was gone",
          );
          for (let i = 0; i < 30; i++) {
            const r = await post(bigUrl, call("lim_out", i));
            assert.equal(r.status, 200, `during the outage: ${r.text}`);
          }
          // Local limits still apply per instance (a fresh second for the small key's 5/s).
          clock.advance(1000);
          const smalls = await Promise.all(
            Array.from({ length: 5 }, (_, i) => post(smallUrl, call("lim_out", i))),
          );
          for (const r of smalls) assert.equal(r.status, 200);
          const over = await post(smallUrl, call("lim_out", 6));
          assert.equal(over.status, 429);
          assert.equal((await usage.read(WS, clock.now())).count, 21, "nothing flushed while Redis is cut");

          await proxy.start();
          assert.equal(await usage.waitFor(WS, 56, clock.now(), 10_000), 56);
          await eventually(async () => {
            const m = await (await fetch(metricsUrl)).text();
            return (
              m.includes('rpcgw_limits_redis_up{component="ratelimit"} 1') &&
              m.includes('rpcgw_limits_redis_up{component="quota"} 1')
            );
          }, "the limits to report Redis healthy again");
        } finally {
          for (const x of gateways.splice(0)) await x.stop();
          await proxy.cut();
        }
      });

    it("close() flushes the quota: the count in Redis equals the units served", async () => {
      let key = "";
      const g = await start(
        async (s) => {
          key = await s.putKey({ workspaceId: WS, plan: plan(1000) });
        },
        // No periodic flush within the test: only the shutdown flush can write the count.
        { QUOTA_FLUSH_INTERVAL_MS: "10000" },
      );
      const url = `${g.base}/eth/rpc?apikey=${key}`;
      for (let i = 0; i < 10; i++) assert.equal((await post(url, call("lim_close", i))).status, 200);
      assert.equal((await post(url, batchOf(15, "lim_close"))).status, 200);
      assert.equal((await usage.read(WS)).count, 0, "not flushed yet");
      gateways.splice(0);
      await g.stop();
      assert.equal((await usage.read(WS)).count, 25);
    });

    it("SIGTERM flushes the quota of a data-plane process before it exits", async () => {
      const seeder = new RedisSeeder(ns.prefix, ns.redis);
      let proc: StartedProcess | undefined;
      try {
        await seeder.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
        const key = await seeder.putKey({ workspaceId: WS, plan: plan(1000) });
        const port = await freePort();
        const base = `http://127.0.0.1:${port}`;
        proc = await startProcess(process.execPath, [DATA_PLANE_MAIN], {
          env: {
            DATA_PLANE_PORT: String(port),
            DATA_PLANE_HOST: "127.0.0.1",
            REDIS_KEY_PREFIX: ns.prefix,
            LOG_LEVEL: "warn",
            RATE_LIMIT_MODE: "redis",
            QUOTA_MODE: "redis",
            QUOTA_FLUSH_INTERVAL_MS: "10000",
            // REDIS_CLUSTER_NODES too: the process parses it from its environment.
            ...ns.redis.env(),
          },
          ready: async () => (await fetch(`${base}/readyz`)).status === 200,
        });
        const url = `${base}/eth/rpc?apikey=${key}`;
        for (let i = 0; i < 7; i++) assert.equal((await post(url, call("lim_term", i))).status, 200);
        assert.equal((await post(url, batchOf(9, "lim_term"))).status, 200);
        assert.equal((await usage.read(WS)).count, 0, "not flushed yet");
        const code = await proc.stop(10_000);
        assert.equal(code, 0, proc.output());
        assert.equal((await usage.read(WS)).count, 16);
      } finally {
        await proc?.stop();
        await seeder.close();
      }
    });
  },
);
