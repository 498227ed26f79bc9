import assert from "node:assert/strict";
import { resolve } from "node:path";
import { Redis } from "ioredis";
import { createLimitsRedis } from "../../../data-plane/src/ratelimit/redis-client";
import { type RunIdSource, runIdSource, watchRedisRestarts } from "../../../data-plane/src/usage/create";
import { generateApiKey, hashApiKey } from "../../../shared/src/crypto/api-key";
import { utcDayKey } from "../../../shared/src/quota/day";
import { isCluster, type RedisClient } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { keySlot } from "../../../shared/src/redis/slots";
import { USAGE_STREAM_FIELD, type UsageBatch } from "../../../shared/src/usage/contract";
import { eventually } from "../../helpers/eventually";
import { freePort } from "../../helpers/ports";
import { type StartedProcess, startProcess } from "../../helpers/process";
import {
  clusterTarget,
  createTestRedisNamespace,
  type TestRedisNamespace,
  type TestRedisTarget,
} from "../../helpers/redis";
import { TestRedisCluster } from "../../helpers/redis-cluster";
import { evmNetwork, RedisSeeder } from "../../helpers/seed-redis";
import { sleep } from "../data-plane/harness";
import { call, LIMITS_ENV, RecordingUpstream } from "../data-plane/limits/fixtures";

const DATA_PLANE_MAIN = resolve(__dirname, "../../../data-plane/src/main.js");
/** Plan limits far above the load: only what the test plants in Redis as other instances' counts refuses. */
const RATE = 10_000;
const DAILY = 10_000_000;
/** A request not answered within this long counts as hung. */
const HANG_MS = 8_000;
/** The slowest answer allowed during a failover (REDIS_COMMAND_TIMEOUT_MS is 1 s; a loaded machine). */
const SLOWEST_MS = 5_000;
/**
 * Every request sent this long after the promotion must be served 200. After a crash the clients follow
 * at once (their connections to the dead master closed); after a freeze only at their next slot-map
 * refresh (every 5 s, `shared/src/redis/connect.ts`), plus up to a second when that refresh asks the frozen
 * node first.
 */
const RECOVERY_AFTER_CRASH_MS = 3_000;
const RECOVERY_AFTER_FREEZE_MS = 8_000;

interface Outcome {
  /** When the request was sent (epoch ms). */
  at: number;
  ms: number;
  /** 0 = no answer (hung past HANG_MS, or the connection failed). */
  status: number;
  reason: string | undefined;
  /** Sent with a key not in the data plane's cache (read from Redis on the request path). */
  fresh: boolean;
}

async function send(url: string, body: object): Promise<Omit<Outcome, "fresh">> {
  const at = Date.now();
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(HANG_MS),
    });
    const text = await res.text();
    let reason: string | undefined;
    try {
      reason = (JSON.parse(text) as { error?: { data?: { reason?: string } } }).error?.data?.reason;
    } catch {
      reason = undefined;
    }
    return { at, ms: Date.now() - at, status: res.status, reason };
  } catch (err) {
    return { at, ms: Date.now() - at, status: 0, reason: (err as Error).message };
  }
}

function tally(os: Outcome[]): string {
  const m = new Map<string, number>();
  for (const o of os) {
    const k = `${o.status}${o.reason === undefined ? "" : ` ${o.reason}`}`;
    m.set(k, (m.get(k) ?? 0) + 1);
  }
  return [...m].map(([k, n]) => `${k}: ${n}`).join(", ");
}

/** [first slot, last slot, master port] of every slot range, as the test client sees them now. */
async function slotOwners(client: RedisClient): Promise<Array<[number, number, number]>> {
  const slots = (await client.cluster("SLOTS")) as unknown as Array<[number, number, [string, number]]>;
  return slots.map(([from, to, [, port]]) => [from, to, port]);
}

/** The first `make(i)` (i = 0, 1, ...) whose `key(name)` lives on the master on `port`. */
function nameOn(
  owners: Array<[number, number, number]>,
  port: number,
  make: (i: number) => string,
  key: (name: string) => string | string[],
): string {
  const on = (k: string) => {
    const slot = keySlot(k);
    return owners.some(([from, to, p]) => p === port && from <= slot && slot <= to);
  };
  for (let i = 0; i < 10_000; i++) {
    const name = make(i);
    const keys = key(name);
    if (typeof keys === "string" ? on(keys) : keys.every(on)) return name;
  }
  throw new Error(`no name found on the master on ${port} (slots: ${JSON.stringify(owners)})`);
}

/** A plain connection to one node (no cluster routing), for CLIENT LIST / CLIENT KILL / INFO there. */
async function onNode<T>(port: number, f: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await r.connect();
    return await f(r);
  } finally {
    r.disconnect();
  }
}

/** The connections holding the data plane's subscription (`sub=1`) on the nodes on `ports`. */
async function subscriptions(ports: number[], prefix: string): Promise<Array<{ port: number; id: string }>> {
  const out: Array<{ port: number; id: string }> = [];
  for (const port of ports) {
    const list = String(await onNode(port, (r) => r.client("LIST")));
    for (const line of list.split("\n")) {
      if (
        line.includes(`name=ioredis-cluster(subscriber):data-plane:${prefix}sub `) &&
        / sub=1 /.test(line)
      ) {
        out.push({ port, id: /^id=(\d+)/.exec(line)![1]! });
      }
    }
  }
  return out;
}

/** The usage batches of stream entries. */
function batches(entries: Array<[string, string[]]>): UsageBatch[] {
  return entries.map(
    ([, fields]) => JSON.parse(fields[fields.indexOf(USAGE_STREAM_FIELD) + 1]!) as UsageBatch,
  );
}

async function metric(metricsBase: string, line: string): Promise<boolean> {
  return (await (await fetch(`${metricsBase}/metrics`)).text()).includes(line);
}

/**
 * A data plane (its own process, limits and usage on) in front of a stub upstream, and one app key whose
 * traffic lives on one master, the victim: the usage stream (its slot follows from the prefix), the
 * workspace's quota counters, the app's rate-limit windows, the key records, and the events subscription.
 */
class Scenario {
  readonly names: RedisNames;
  readonly client: RedisClient;
  readonly seeder: RedisSeeder;
  readonly stream: string;
  proc: StartedProcess | undefined;
  base = "";
  /** The process's METRICS_PORT base. */
  metricsBase = "";
  victim = 0;
  ws = "";
  app = "";
  key = "";
  /** A second key of the app, its record on another master, cached by the data plane before the failover. */
  other = "";
  /** Keys presented once each, so each one's record is read from the victim on the request path. */
  fresh: string[] = [];

  private constructor(
    private readonly cluster: TestRedisCluster,
    private readonly redis: TestRedisTarget,
    readonly ns: TestRedisNamespace,
    readonly up: RecordingUpstream,
  ) {
    this.names = new RedisNames(ns.prefix);
    this.client = redis.client();
    this.seeder = new RedisSeeder(ns.prefix, redis);
    this.stream = this.names.usageStream();
  }

  static async start(cluster: TestRedisCluster, redis: TestRedisTarget): Promise<Scenario> {
    const s = new Scenario(
      cluster,
      redis,
      createTestRedisNamespace(redis),
      await new RecordingUpstream().start(),
    );
    try {
      await s.seed();
      await s.startDataPlane();
      return s;
    } catch (err) {
      await s.close();
      throw err;
    }
  }

  url(key: string): string {
    return `${this.base}/eth/rpc?apikey=${key}`;
  }

  private async seed(): Promise<void> {
    const { names } = this;
    this.victim = await this.cluster.masterOf(this.stream);
    const owners = await slotOwners(this.client);
    const day = utcDayKey(Date.now());
    this.ws = nameOn(
      owners,
      this.victim,
      // Names of varying length: the two keys' CRC16 slots differ by a constant per name length (CRC is
      // linear), so with one length both might never fall on the same master.
      (i) => `ws-failover-${"x".repeat(i % 29)}${i}`,
      // The workspace's quota counter and its per-second windows (every app of it shares them).
      (w) => [names.quotaDay(w, day), names.rateLimitWindow(`ws:${w}`, 0)],
    );
    this.app = nameOn(
      owners,
      this.victim,
      (i) => `app-failover-${i}`,
      (a) => names.rateLimitWindow(`app:${a}`, 0), // an app's own cap (none here) would count there
    );
    const keyOnVictim = () =>
      nameOn(
        owners,
        this.victim,
        () => generateApiKey(),
        (k) => names.apiKey(hashApiKey(k)),
      );
    const plan = {
      name: "test",
      requestsPerSecond: RATE,
      dailyRequestLimit: DAILY,
      monthlyRequestLimit: null,
    };
    const record = { workspaceId: this.ws, appId: this.app, plan };
    await this.seeder.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: this.up.url }]));
    this.key = await this.seeder.putKey(record, keyOnVictim());
    const elsewhere = this.cluster.ports.find((p) => p !== this.victim)!;
    this.other = await this.seeder.putKey(
      record,
      nameOn(
        owners,
        elsewhere,
        () => generateApiKey(),
        (k) => names.apiKey(hashApiKey(k)),
      ),
    );
    this.fresh = Array.from({ length: 1_000 }, keyOnVictim);
    await Promise.all(this.fresh.map((k) => this.seeder.putKey(record, k)));
  }

  private async startDataPlane(): Promise<void> {
    const port = await freePort();
    const metricsPort = await freePort();
    this.base = `http://127.0.0.1:${port}`;
    this.metricsBase = `http://127.0.0.1:${metricsPort}`;
    this.proc = await startProcess(process.execPath, [DATA_PLANE_MAIN], {
      env: {
        ...LIMITS_ENV,
        DATA_PLANE_PORT: String(port),
        DATA_PLANE_HOST: "127.0.0.1",
        METRICS_PORT: String(metricsPort),
        // One serving thread: one subscription to steer, and every request meets the same caches.
        DATA_PLANE_THREADS: "1",
        REDIS_KEY_PREFIX: this.ns.prefix,
        LOG_LEVEL: "warn",
        USAGE_MODE: "redis",
        USAGE_FLUSH_INTERVAL_MS: "100",
        SHARED_NODE_EXTRA_NAMESPACES: "lim",
        UPSTREAM_STATE_PROBE_INTERVAL_MS: "0",
        ...this.redis.env(),
      },
      ready: async () => (await fetch(`${this.base}/readyz`)).status === 200,
    });
    assert.equal((await send(this.url(this.key), call("lim_before"))).status, 200);
    assert.equal((await send(this.url(this.other), call("lim_before"))).status, 200);
    await this.steerSubscription();
    await eventually(
      async () => (await this.client.xlen(this.stream)) > 0,
      "a usage entry before the failover",
    );
  }

  /**
   * Moves the data plane's subscription onto the victim: ioredis puts it on a random node and moves it
   * to another random one when its connection is lost, so its connection is killed wherever else it lands
   * until it lands there.
   */
  private async steerSubscription(): Promise<void> {
    const nodes = [...this.cluster.ports, ...this.cluster.replicaPorts];
    await eventually(
      async () => {
        const subs = await subscriptions(nodes, this.ns.prefix);
        if (subs.length === 1 && subs[0]!.port === this.victim) return true;
        if (subs.length === 1) await onNode(subs[0]!.port, (r) => r.client("KILL", "ID", subs[0]!.id));
        return false;
      },
      `the subscription to land on ${this.victim}`,
      20_000,
    );
  }

  /** Batch ids in the usage stream now. */
  async usageBatchIds(): Promise<string[]> {
    return batches(await this.client.xrange(this.stream, "-", "+")).map((b) => b.batchId);
  }

  /**
   * Sends keyed requests (three loops on the cached key, one on fresh keys) while `failover` runs (it
   * resolves with the promotion time) and after it, until 10 fresh-key requests went out `recoveryMs` past
   * the promotion; checks every answer.
   */
  async throughFailover(
    what: string,
    failover: () => Promise<{ promoted: number; at: number }>,
    recoveryMs: number,
  ): Promise<{ promotedAt: number }> {
    const outcomes: Outcome[] = [];
    let stopAt = Number.POSITIVE_INFINITY;
    const cachedLoop = async () => {
      while (Date.now() < stopAt) {
        outcomes.push({ ...(await send(this.url(this.key), call("lim_load"))), fresh: false });
        await sleep(10);
      }
    };
    let next = 0;
    const freshLoop = async () => {
      while (Date.now() < stopAt && next < this.fresh.length) {
        outcomes.push({ ...(await send(this.url(this.fresh[next++]!), call("lim_fresh"))), fresh: true });
        await sleep(20);
      }
    };
    const load = Promise.all([cachedLoop(), cachedLoop(), cachedLoop(), freshLoop()]);
    // The failure comes under load: once some answers are in (counted, not timed).
    await eventually(() => outcomes.length >= 20, "20 answers before the failure");
    const startedAt = Date.now();
    const { promoted, at: promotedAt } = await failover();
    // Load until `recoveryMs` after the promotion and then on, until 10 fresh-key requests were sent past
    // it (counted, not timed: a loaded machine sends fewer per second).
    await eventually(
      () => outcomes.filter((o) => o.fresh && o.at >= promotedAt + recoveryMs).length >= 10,
      "10 fresh-key requests past the recovery time",
      recoveryMs + 30_000,
    );
    stopAt = Date.now();
    await load;

    const bad = outcomes.filter((o) => o.status !== 200);
    const lastBad = bad.length === 0 ? "-" : Math.max(...bad.map((o) => o.at)) - promotedAt;
    console.log(
      `      master ${this.victim} ${what}; replica ${promoted} promoted ${promotedAt - startedAt} ms later; ` +
        `${outcomes.length} requests (${tally(outcomes)}); slowest answer ${Math.max(...outcomes.map((o) => o.ms))} ms; ` +
        `last non-200 sent ${lastBad} ms after the promotion`,
    );
    const proc = this.proc!;
    assert.equal(proc.child.exitCode, null, `the data plane exited:\n${proc.output()}`);
    // Defined outcomes only: a cached key is always served (limits and usage never wait on Redis); a key
    // whose record is on a master that does not answer is the documented 500 `internal`.
    for (const o of outcomes) {
      const ok = o.status === 200 || (o.fresh && o.status === 500 && o.reason === "internal");
      assert.ok(
        ok,
        `${o.fresh ? "fresh" : "cached"} key answered ${o.status} ${o.reason} (${tally(outcomes)})`,
      );
      assert.ok(o.ms <= SLOWEST_MS, `an answer took ${o.ms} ms`);
    }
    const late = outcomes.filter((o) => o.at >= promotedAt + recoveryMs);
    assert.deepEqual(
      late.filter((o) => o.status !== 200),
      [],
      `${recoveryMs} ms after the promotion every request is served`,
    );
    assert.ok(late.filter((o) => o.fresh).length >= 10, `too few fresh-key requests late: ${tally(late)}`);
    assert.ok(
      !/rpcgw_handler_exceptions_total\{/.test(await (await fetch(`${this.metricsBase}/metrics`)).text()),
      `no handler exception nor unhandled rejection:\n${proc.output()}`,
    );
    return { promotedAt };
  }

  /** Until both limits report reaching Redis. */
  async limitsHealthy(): Promise<void> {
    await eventually(
      async () =>
        (await metric(this.metricsBase, 'rpcgw_limits_redis_up{component="ratelimit"} 1')) &&
        (await metric(this.metricsBase, 'rpcgw_limits_redis_up{component="quota"} 1')),
      "the limits to report Redis healthy after the failover",
    );
  }

  /**
   * Usage rows of the load written after `sinceMs`, and every batch in `before` still in the stream
   * (replicated, or written again by the recorder when it saw the stream's master change).
   */
  async usageContinues(sinceMs: number, before: Set<string>): Promise<void> {
    await eventually(async () => {
      const rows = batches(await this.client.xrange(this.stream, String(sinceMs), "+")).flatMap(
        (b) => b.rows,
      );
      return rows.some((r) => r.appId === this.app && r.method === "lim_load");
    }, "usage recorded after the failover");
    const ids = await this.usageBatchIds();
    const missing = [...before].filter((id) => !ids.includes(id));
    assert.deepEqual(missing, [], "usage batches written before the failover are in the stream after it");
    console.log(`      usage: ${ids.length} entries, ${ids.length - new Set(ids).size} written again`);
  }

  /** A revocation published now reaches the data plane (as on a healthy cluster). */
  async revocationArrives(): Promise<void> {
    await this.seeder.deleteKey(this.key);
    await this.seeder.publish({ type: "key.revoke", keyHash: hashApiKey(this.key) });
    await eventually(
      async () => (await send(this.url(this.key), call("lim_after"))).status === 401,
      "the revocation to arrive",
    );
  }

  /**
   * Revokes `other` as the control plane would (record deleted, then the event), publishing on a master
   * that answers: the event reaches the data plane only if its subscription is on a node that answers.
   */
  async revokeOther(): Promise<void> {
    await this.client.del(this.names.apiKey(hashApiKey(this.other)));
    const publisher = this.cluster.ports.find((p) => p !== this.victim)!;
    const event = JSON.stringify({ type: "key.revoke", keyHash: hashApiKey(this.other) });
    await onNode(publisher, (r) => r.publish(this.names.eventsChannel(), event));
  }

  /** SIGTERM: the data plane drains and exits 0. */
  async stopDataPlane(): Promise<void> {
    const proc = this.proc!;
    this.proc = undefined;
    assert.equal(await proc.stop(10_000), 0, proc.output());
  }

  async close(): Promise<void> {
    await this.proc?.stop(10_000);
    await this.up.stop();
    // Bounded: after a failed check a client may still wait on a frozen master, and the check's own
    // message is what the run must report.
    const bounded = (p: Promise<unknown>) => Promise.race([p.catch(() => undefined), sleep(5_000)]);
    await bounded(this.seeder.close());
    await bounded(this.ns.cleanup());
    this.client.disconnect();
  }
}

describe("Redis Cluster failover: a master fails, its replica takes over, the data plane rides through", function () {
  this.timeout(90_000);
  let cluster: TestRedisCluster;
  let redis: TestRedisTarget;

  // A cluster per test: each fails a master.
  beforeEach(async function () {
    this.timeout(60_000);
    cluster = await new TestRedisCluster(3, { replicasPerMaster: 1 }).start();
    redis = clusterTarget(cluster);
  });
  afterEach(async () => {
    await cluster?.stop();
  });

  it("a master crashes (SIGKILL): every request is answered; then limits, usage and events work again", async () => {
    const s = await Scenario.start(cluster, redis);
    try {
      let before = new Set<string>();
      const { promotedAt } = await s.throughFailover(
        "killed",
        async () => {
          before = new Set(await s.usageBatchIds());
          await cluster.killMaster(s.victim);
          return { promoted: await cluster.waitForFailover(s.victim), at: Date.now() };
        },
        RECOVERY_AFTER_CRASH_MS,
      );
      await s.limitsHealthy();
      // Another instance (planted by the test) used the workspace's whole per-second limit in the coming seconds:
      // only the reconciliation through Redis (the promoted replica) can tell this one.
      const second = Math.floor(Date.now() / 1000);
      for (let t = second + 1; t <= second + 3; t++) {
        const window = s.names.rateLimitWindow(`ws:${s.ws}`, t);
        await s.client.hset(window, "other-instance", RATE);
        await s.client.pexpire(window, 10_000);
      }
      await sleep((second + 1) * 1000 - Date.now());
      const limited: Outcome[] = [];
      while (Date.now() < (second + 3) * 1000 && !limited.some((o) => o.reason === "rate_limit")) {
        limited.push({ ...(await send(s.url(s.key), call("lim_after"))), fresh: false });
      }
      assert.ok(
        limited.some((o) => o.status === 429 && o.reason === "rate_limit"),
        `the per-second limit was not enforced through Redis after the failover (${tally(limited)})`,
      );
      // The same for the daily quota, once the planted seconds are over.
      await sleep((second + 4) * 1000 - Date.now());
      await s.client.incrby(s.names.quotaDay(s.ws, utcDayKey(Date.now())), DAILY);
      await eventually(async () => {
        const r = await send(s.url(s.key), call("lim_after"));
        if (r.status === 429 && r.reason === "daily_limit") return true;
        assert.equal(r.status, 200, `${r.status} ${r.reason}`);
        return false;
      }, "the daily quota enforced through Redis after the failover");
      await s.usageContinues(promotedAt, before);
      // The subscription was on the victim: ioredis moved it when its connection closed.
      await s.revocationArrives();
      await s.stopDataPlane();
    } finally {
      await s.close();
    }
  });

  it("a master stops answering (SIGSTOP, as a hung host or a partition): requests are answered, then served again once the clients refresh their slot map", async () => {
    const s = await Scenario.start(cluster, redis);
    try {
      let before = new Set<string>();
      const { promotedAt } = await s.throughFailover(
        "frozen",
        async () => {
          before = new Set(await s.usageBatchIds());
          await cluster.freezeMaster(s.victim);
          // Revoked while the subscription sits on the frozen master: the event is lost with it.
          await s.revokeOther();
          // No barrier can pass a frozen master: this only gives a delivered event time to show, and
          // is a check of the setup (the failover's own checks follow), not of the behaviour.
          await sleep(200);
          assert.equal((await send(s.url(s.other), call("lim_other"))).status, 200, "the event was lost");
          return { promoted: await cluster.waitForFailover(s.victim), at: Date.now() };
        },
        RECOVERY_AFTER_FREEZE_MS,
      );
      await s.limitsHealthy();
      await s.usageContinues(promotedAt, before);
      // Nothing closed the subscription's connection to the frozen victim: it moves when the slot-map
      // refresh drops the victim.
      const live = [...cluster.ports, ...cluster.replicaPorts].filter((p) => p !== s.victim);
      await eventually(
        async () => (await subscriptions(live, s.ns.prefix)).length > 0,
        "the subscription to leave the frozen master",
        Math.max(10_000, RECOVERY_AFTER_FREEZE_MS * 2),
      );
      // The data plane re-synced when its subscription moved (cached keys dropped, as after a reconnect
      // on a single Redis), so the revocation it never heard of applies too.
      await eventually(
        async () => (await send(s.url(s.other), call("lim_other"))).status === 401,
        "a key revoked during the failover refused",
      );
      await s.revocationArrives();
      await s.stopDataPlane();
    } finally {
      await s.close();
    }
  });

  it("the usage recorder's restart watch sees the usage stream's master fail over, though nothing was written during it", async () => {
    const ns = createTestRedisNamespace(redis);
    const stream = new RedisNames(ns.prefix).usageStream();
    // The usage recorder's connection and restart watch, as createUsageRecorder makes them.
    const conn = createLimitsRedis(redis.url, {
      clusterNodes: redis.clusterNodes,
      name: `${ns.prefix}usage`,
    });
    const source = runIdSource(conn, stream);
    const runIds: string[] = [];
    const reading: RunIdSource = {
      get status() {
        return source.status;
      },
      on: (event, listener) => source.on(event, listener),
      async info(section) {
        const text = await source.info(section);
        runIds.push(/run_id:(\w+)/.exec(text)![1]!);
        return text;
      },
    };
    let restarts = 0;
    const watch = watchRedisRestarts(reading, () => restarts++);
    try {
      await eventually(() => runIds.length > 0, "the run id read");
      // As against a cluster in service, the client knows every replica: the promoted one is no new node.
      assert.equal(isCluster(conn) && conn.nodes("slave").length, 3);
      const victim = await cluster.masterOf(stream);
      await cluster.killMaster(victim);
      const promoted = await cluster.waitForFailover(victim);
      // The recorder's next flush, on the new master.
      await conn.xadd(stream, "*", USAGE_STREAM_FIELD, "{}");
      await eventually(() => restarts > 0, "the failover noticed");
      assert.equal(restarts, 1);
      const now = await onNode(promoted, (r) => r.info("server"));
      assert.equal(runIds.at(-1), /run_id:(\w+)/.exec(now)![1], "the promoted replica's run id");
    } finally {
      watch.stop();
      conn.disconnect();
      await ns.cleanup();
    }
  });
});
