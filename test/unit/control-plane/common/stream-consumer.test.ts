import assert from "node:assert/strict";
import {
  entryJson,
  StreamConsumer,
  type StreamConsumerOptions,
  type StreamEntryHandler,
} from "../../../../control-plane/src/common/stream-consumer";
import { createLogger } from "../../../../shared/src/log/logger";
import { createRedis, type RedisClient } from "../../../../shared/src/redis/connect";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { eventually } from "../../../helpers/eventually";
import { createTestRedisNamespace, TEST_REDIS_URL, type TestRedisNamespace } from "../../../helpers/redis";

const GROUP = "test-ingest";
const silent = createLogger("stream-consumer-test", "silent");

/** XINFO CONSUMERS idle time (ms, by Redis's count) of one consumer. */
async function idleMs(redis: RedisClient, stream: string, name: string): Promise<number> {
  const list = (await redis.xinfo("CONSUMERS", stream, GROUP)) as unknown[][];
  for (const flat of list) {
    const info: Record<string, unknown> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) info[String(flat[i])] = flat[i + 1];
    if (info.name === name) return Number(info.idle);
  }
  return -1;
}

/** XINFO CONSUMERS as name -> pending count. */
async function pendingByConsumer(redis: RedisClient, stream: string): Promise<Record<string, number>> {
  const list = (await redis.xinfo("CONSUMERS", stream, GROUP)) as unknown[][];
  const out: Record<string, number> = {};
  for (const flat of list) {
    const info: Record<string, unknown> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) info[String(flat[i])] = flat[i + 1];
    out[String(info.name)] = Number(info.pending);
  }
  return out;
}

describe("control-plane: StreamConsumer (real Redis)", function () {
  this.timeout(30_000);
  let ns: TestRedisNamespace;
  let names: RedisNames;
  let stream: string;
  let redis: RedisClient;
  const opened: RedisClient[] = [];
  const started: StreamConsumer[] = [];

  /** A consumer on a connection of its own (named, so CLIENT LIST finds it); `seen` lists what its handler got. */
  function consumer(opts: Partial<StreamConsumerOptions> & { handle?: StreamEntryHandler } = {}) {
    const connName = `sc-test-${Math.random().toString(36).slice(2)}`;
    const conn = createRedis({ url: TEST_REDIS_URL }, "blocking", { name: connName });
    opened.push(conn);
    const seen: string[] = [];
    const handle = opts.handle ?? (async () => true);
    const c = new StreamConsumer(conn, silent, {
      stream,
      group: GROUP,
      consumerName: "c1",
      blockMs: 0,
      batch: 10,
      claimIdleMs: 60_000,
      label: "test",
      ...opts,
      handle: async (id, fields) => {
        seen.push(String(fields[1]));
        return handle(id, fields);
      },
    });
    return { c, conn, connName, seen };
  }

  async function add(...values: string[]): Promise<string[]> {
    const ids: string[] = [];
    for (const v of values) ids.push((await redis.xadd(stream, "*", "v", v)) as string);
    return ids;
  }

  async function pendingCount(): Promise<number> {
    return ((await redis.xpending(stream, GROUP)) as [number])[0];
  }

  before(() => {
    ns = createTestRedisNamespace();
    names = new RedisNames(ns.prefix);
    redis = ns.redis.client();
  });

  beforeEach(async () => {
    // A fresh stream per test: the usage stream's name under a prefix of this run, cleared between tests.
    stream = names.usageStream();
    await redis.del(stream, names.deadLetterStream(stream));
  });

  afterEach(async () => {
    for (const c of started.splice(0)) await c.stop();
    for (const conn of opened.splice(0)) conn.disconnect();
  });

  after(async () => {
    await ns.cleanup();
    redis.disconnect();
  });

  it("creates the group once, at the start of the stream; a second create (BUSYGROUP) is no error", async () => {
    await redis.xadd(stream, "*", "v", "before-the-group");
    const { c, seen } = consumer();
    await c.ensureGroup();
    await c.ensureGroup();
    await consumer({ consumerName: "c2" }).c.ensureGroup();
    const groups = (await redis.xinfo("GROUPS", stream)) as unknown[][];
    assert.equal(groups.length, 1);
    assert.equal(groups[0]![1], GROUP);
    assert.equal(await c.pollOnce(0), 1, "an entry added before the group existed is read");
    assert.deepEqual(seen, ["before-the-group"]);
    assert.equal(await pendingCount(), 0, "handled entries are acknowledged");
  });

  it("ensureGroup fails on any other error (the key is not a stream)", async () => {
    await redis.set(stream, "not a stream");
    const { c } = consumer();
    await assert.rejects(c.ensureGroup(), /WRONGTYPE/);
  });

  it("a handler that throws while its store is away leaves the entry pending and ends the round; the next round reads this consumer's pending entries first", async () => {
    await add("a", "b", "c");
    let crash = true;
    const { c, seen } = consumer({
      probe: async () => {
        if (crash) throw new Error("store away");
      },
      handle: async (_id, fields) => {
        if (fields[1] === "b" && crash) throw new Error("crash before XACK");
        return true;
      },
    });
    await c.ensureGroup();
    await assert.rejects(c.pollOnce(0), /crash before XACK/);
    crash = false;
    assert.deepEqual(seen, ["a", "b"]);
    assert.deepEqual(await pendingByConsumer(redis, stream), { c1: 2 }, "b and c read, not acknowledged");
    await add("d");
    assert.equal(await c.pollOnce(0), 3);
    assert.deepEqual(seen, ["a", "b", "b", "c", "d"], "pending b and c before the new d");
    assert.equal(await pendingCount(), 0);
  });

  it("an entry that keeps failing while the store works is tried maxAttempts times with a backoff, then set aside to the dead-letter stream; the others go on", async () => {
    const ids = await add("a", "poison", "c");
    let probes = 0;
    const attempts: number[] = [];
    const { c, seen } = consumer({
      maxAttempts: 3,
      attemptBackoffMs: 40,
      probe: async () => {
        probes++;
      },
      handle: async (_id, fields) => {
        if (fields[1] === "poison") {
          attempts.push(Date.now());
          throw new Error('invalid byte sequence for encoding "UTF8": 0x00');
        }
        return true;
      },
    });
    await c.ensureGroup();
    assert.equal(await c.pollOnce(0), 3, "a, poison (failed once), c");
    assert.deepEqual(seen, ["a", "poison", "c"]);
    assert.equal(await pendingCount(), 1, "only the poisoned entry is pending; c went on");
    await add("d");
    await eventually(async () => {
      await c.pollOnce(0);
      return c.deadLettered === 1;
    }, "the third attempt");
    assert.equal(attempts.length, 3);
    assert.ok(attempts[1]! - attempts[0]! >= 40, "backoff before the 2nd attempt");
    assert.ok(attempts[2]! - attempts[1]! >= 80, "doubled before the 3rd");
    assert.equal(probes, 3, "each failure asked whether the store works");
    assert.ok(seen.includes("d"), "entries added meanwhile were handled");
    assert.equal(await pendingCount(), 0, "the poisoned entry is acknowledged once set aside");
    const dead = (await redis.xrange(names.deadLetterStream(stream), "-", "+")) as [string, string[]][];
    assert.equal(dead.length, 1);
    const f = dead[0]![1];
    const get = (k: string) => f[f.indexOf(k) + 1];
    assert.equal(get("v"), "poison", "the original fields are kept");
    assert.equal(get("deadEntryId"), ids[1]);
    assert.equal(get("deadAttempts"), "3");
    assert.match(get("deadError")!, /0x00/);
    assert.equal(await c.pollOnce(0), 0, "nothing left to read");
  });

  it("failures while the store is away never count against an entry: it is not set aside, and is stored once the store is back", async () => {
    await add("a");
    let storeUp = false;
    const { c, seen } = consumer({
      maxAttempts: 2,
      attemptBackoffMs: 1,
      probe: async () => {
        if (!storeUp) throw new Error("ECONNREFUSED");
      },
      handle: async () => {
        if (!storeUp) throw new Error("connection terminated");
        return true;
      },
    });
    await c.ensureGroup();
    for (let i = 0; i < 5; i++) await assert.rejects(c.pollOnce(0), /connection terminated/);
    assert.equal(c.deadLettered, 0);
    assert.equal(await redis.exists(names.deadLetterStream(stream)), 0);
    storeUp = true;
    assert.equal(await c.pollOnce(0), 1);
    assert.deepEqual(seen, ["a", "a", "a", "a", "a", "a"]);
    assert.equal(await pendingCount(), 0);
  });

  it("after a restart under the same name, the pending entries are read first; one the handler keeps pending does not stall the read", async () => {
    await add("a", "b", "c");
    const first = consumer({ handle: async () => false });
    await first.c.ensureGroup();
    assert.equal(await first.c.pollOnce(0), 3);
    assert.equal(await pendingCount(), 3, "false: left unacknowledged");
    first.conn.disconnect();
    await add("d");
    // batch 1: the pending read goes entry by entry; "b" is kept pending again and must not be re-read forever.
    const again = consumer({ batch: 1, handle: async (_id, fields) => fields[1] !== "b" });
    assert.equal(await again.c.pollOnce(0), 4);
    assert.deepEqual(again.seen, ["a", "b", "c", "d"]);
    const pending = (await redis.xpending(stream, GROUP, "-", "+", 10)) as [string, string, number, number][];
    assert.deepEqual(
      pending.map((p) => p[1]),
      ["c1"],
    );
    assert.equal(pending.length, 1, "only b is still pending");
  });

  it("skips a pending entry trimmed from the stream", async () => {
    const [a] = await add("a", "b");
    const first = consumer({ handle: async () => false });
    await first.c.ensureGroup();
    await first.c.pollOnce(0);
    await redis.xdel(stream, a!);
    const again = consumer();
    assert.equal(await again.c.pollOnce(0), 1, "only b is handed over");
    assert.deepEqual(again.seen, ["b"]);
  });

  it("claims the entries a dead consumer left pending once they are idle for claimIdleMs, not before", async () => {
    await add("a", "b", "c");
    const dead = consumer({ consumerName: "dead", handle: async () => false });
    await dead.c.ensureGroup();
    await dead.c.pollOnce(0);
    dead.conn.disconnect();
    const early = consumer({ consumerName: "early", claimIdleMs: 60_000 });
    assert.equal(await early.c.pollOnce(0), 0, "not idle long enough: not claimed");
    assert.deepEqual(await pendingByConsumer(redis, stream), { dead: 3, early: 0 });
    // Claimable once idle for more than claimIdleMs (100), by Redis's count.
    await eventually(async () => (await idleMs(redis, stream, "dead")) > 100, "dead idle for 100 ms");
    const survivor = consumer({ consumerName: "survivor", claimIdleMs: 100, batch: 2 });
    await add("d");
    assert.equal(await survivor.c.pollOnce(0), 4, "3 claimed (in batches of 2) + 1 new");
    assert.deepEqual(survivor.seen, ["a", "b", "c", "d"]);
    assert.equal(await pendingCount(), 0);
    assert.equal((await pendingByConsumer(redis, stream)).dead, 0);
  });

  it("removes idle consumers with nothing pending, never itself nor one with pending entries", async () => {
    await add("a");
    const holder = consumer({ consumerName: "holder", handle: async () => false });
    await holder.c.ensureGroup();
    await holder.c.pollOnce(0);
    const idle = consumer({ consumerName: "idle" });
    await idle.c.pollOnce(0);
    const self = consumer({ consumerName: "self" });
    await self.c.pollOnce(0);
    // Pruned once idle for more than 10 ms, by Redis's count.
    await eventually(async () => (await idleMs(redis, stream, "idle")) > 10, "idle idle for 10 ms");
    assert.deepEqual(await self.c.pruneIdleConsumers(10), ["idle"]);
    assert.deepEqual(Object.keys(await pendingByConsumer(redis, stream)).sort(), ["holder", "self"]);
  });

  it("its read rounds remove idle consumers every pruneIntervalMs (pruneIdleMs idle, nothing pending)", async () => {
    await add("a");
    const gone = consumer({ consumerName: "gone" });
    await gone.c.ensureGroup();
    await gone.c.pollOnce(0);
    const { c } = consumer({ consumerName: "live", pruneIntervalMs: 50, pruneIdleMs: 20 });
    const names = async () =>
      ((await redis.xinfo("CONSUMERS", stream, GROUP)) as unknown[][]).map((x) => String(x[1])).sort();
    // Idle for less than the threshold (a minute here, which a slow machine cannot cross): kept.
    assert.deepEqual(await c.pruneIdleConsumers(60_000), []);
    assert.deepEqual(await names(), ["gone"]);
    // Once idle past 20 ms, a poll's periodic prune removes it.
    await eventually(async () => {
      await c.pollOnce(0);
      return (await names()).join() === "live";
    }, "the idle consumer pruned by a poll");
  });

  it("recreates the group when the stream is deleted (NOGROUP) and goes on reading", async () => {
    const { c, seen } = consumer({ blockMs: 200, retryPauseMs: 50 });
    await c.start();
    started.push(c);
    await add("a");
    await eventually(() => seen.includes("a"), "a");
    await redis.del(stream);
    await add("b");
    await eventually(() => seen.includes("b"), "b after the group was recreated");
    const groups = (await redis.xinfo("GROUPS", stream)) as unknown[][];
    assert.equal(groups.length, 1);
    await eventually(async () => (await pendingCount()) === 0, "b acknowledged");
  });

  it("stop() returns promptly while a read is blocked, and leaves nothing handled unacknowledged", async () => {
    const { c, connName, seen } = consumer({ blockMs: 30_000 });
    await c.start();
    await add("a");
    await eventually(() => seen.includes("a"), "a");
    await eventually(async () => {
      const list = String(await redis.client("LIST"));
      return list.split("\n").some((l) => l.includes(`name=${connName} `) && l.includes("cmd=xreadgroup"));
    }, "the blocked XREADGROUP");
    const t0 = Date.now();
    await c.stop();
    const took = Date.now() - t0;
    assert.ok(took < 5_000, `stop took ${took} ms with a 30 s block`);
    assert.equal(await pendingCount(), 0);
  });
});

describe("control-plane: entryJson", () => {
  it("is the JSON of the field's last occurrence; undefined when missing or not JSON", () => {
    assert.deepEqual(entryJson(["a", "1", "batch", '{"x":1}'], "batch"), { x: 1 });
    assert.equal(entryJson(["batch", "1", "batch", "2"], "batch"), 2);
    assert.equal(entryJson(["a", "1"], "batch"), undefined);
    assert.equal(entryJson(["batch", "{not json"], "batch"), undefined);
    assert.equal(entryJson(["batch"], "batch"), undefined, "a name without a value");
  });
});
