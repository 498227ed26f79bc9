import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";
import { startDataPlane } from "../../../data-plane/src/data-plane";
import { RedisPlaneState } from "../../../data-plane/src/state/redis-state";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { createLogger } from "../../../shared/src/log/logger";
import type { KeyRecord } from "../../../shared/src/redis/records";
import { eventually } from "../../helpers/eventually";
import { createTestRedisNamespace, TEST_REDIS_URL } from "../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";

const chainId = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };

describe("data plane state: Redis reconnects and failures", function () {
  this.timeout(60_000);
  let stub: StubUpstream;

  before(async () => {
    stub = await new StubUpstream().start();
  });

  after(async () => {
    await stub.stop();
  });

  it("drops cached keys on a Redis reconnect and keeps receiving events after it", async () => {
    let key = "";
    const gw: Gateway = await startGateway({}, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
      key = await s.putKey();
    });
    const admin = new Redis(TEST_REDIS_URL);
    try {
      const url = `${gw.base}/eth/rpc?apikey=${key}`;
      assert.equal((await post(url, chainId, { origin: "https://evil.io" })).status, 200);
      // Changed while "the event is lost": only a reconnect (or an event) can make the plane notice.
      await gw.seeder.putKey({ allowlist: { origins: ["https://good.io"], ips: [] } }, key);
      assert.equal((await post(url, chainId, { origin: "https://evil.io" })).status, 200, "still cached");
      const clients = (await admin.client("LIST")) as string;
      const ids = clients
        .split("\n")
        // The state connections (commands + subscriber), not the usage recorder's or request log's own.
        .filter(
          (line) =>
            line.includes(`name=data-plane:${gw.ns.prefix}`) &&
            !line.includes(":usage ") &&
            !line.includes(":requestlog "),
        )
        .map((line) => /id=(\d+)/.exec(line)![1]!);
      assert.equal(ids.length, 2, clients);
      for (const id of ids) await admin.client("KILL", "ID", id);
      await eventually(
        async () => (await post(url, chainId, { origin: "https://evil.io" })).status === 403,
        "the cached key dropped after the reconnect",
      );
      // The subscription is back: a revoke published now takes effect.
      await gw.seeder.deleteKey(key);
      await gw.seeder.publish({ type: "key.revoke", keyHash: hashApiKey(key) });
      await eventually(
        async () => (await post(url, chainId, { origin: "https://good.io" })).status === 401,
        "the revoke to take effect",
      );
      assert.equal((await fetch(`${gw.base}/readyz`)).status, 200);
    } finally {
      admin.disconnect();
      await gw.stop();
    }
  });

  /**
   * A plane on its own RedisPlaneState whose subscriber (or command connection) reconnects late, on a
   * namespace that holds a network, a key and the publication marker `m1`.
   */
  const startSlowReconnect = async (slow: "sub" | "cmd") => {
    const ns = createTestRedisNamespace();
    const logger = createLogger("test", process.env.LOG_LEVEL ?? "silent");
    const state = new RedisPlaneState({
      url: TEST_REDIS_URL,
      prefix: ns.prefix,
      commandTimeoutMs: 500,
      logger,
    });
    // ioredis reads its retry strategy at each close: this connection comes back 1.5 s after a drop,
    // the other one after 50 ms (as two connections backing off independently can).
    (state as unknown as Record<string, Redis>)[slow]!.options.retryStrategy = () => 1_500;
    let key = "";
    const admin = new Redis(TEST_REDIS_URL);
    const gw = await startGateway(
      {},
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
        key = await s.putKey();
        await admin.set(s.names.publishedAt(), "m1");
      },
      { state, logger },
      ns,
    );
    const names = { cmd: `data-plane:${ns.prefix}cmd`, sub: `data-plane:${ns.prefix}sub` };
    const connected = async (name: string) =>
      ((await admin.client("LIST")) as string).includes(`name=${name} `);
    const kill = async () => {
      for (const line of ((await admin.client("LIST")) as string).split("\n")) {
        if (line.includes(`name=${names.cmd} `) || line.includes(`name=${names.sub} `)) {
          await admin.client("KILL", "ID", /id=(\d+)/.exec(line)![1]!);
        }
      }
    };
    /** What Redis holds after it restarted empty. */
    const empty = async () => {
      await admin.del(state.names.publishedAt(), state.names.networks());
      await gw.seeder.deleteKey(key);
    };
    const call = (k: string, slug = "eth") => post(`${gw.base}/${slug}/rpc?apikey=${k}`, chainId);
    // The markers of the state's `reconnect` events: the plane's own listener was added first, so when
    // one is recorded here the plane has acted on it.
    const reconnects: (string | null)[] = [];
    state.on("reconnect", (marker) => reconnects.push(marker));
    return {
      reconnects,
      gw,
      state,
      admin,
      key,
      names,
      connected,
      kill,
      empty,
      call,
      async stop() {
        admin.disconnect();
        await gw.stop();
        await ns.cleanup();
      },
    };
  };

  it("a resync published while the subscriber is still reconnecting (command connection back first) is not lost", async () => {
    const t = await startSlowReconnect("sub");
    try {
      assert.equal((await t.call(t.key)).status, 200); // cached
      await t.empty();
      await t.kill();
      // The command connection is back long before the subscriber: no marker, so everything is kept.
      await eventually(() => t.connected(t.names.cmd), "the command connection back");
      assert.equal(await t.connected(t.names.sub), false, "the subscriber should still be away");
      // Nothing re-syncs on the command connection alone: no reconnect was announced, and the key is kept.
      assert.deepEqual(t.reconnects, [], "re-synced before the subscription was back");
      assert.equal((await t.call(t.key)).status, 200, "last known good state kept");
      // The control plane re-publishes now, without the old key and with a new network: its `resync`
      // reaches no one, since the subscriber is away.
      const fresh = await t.gw.seeder.putKey();
      await t.gw.seeder.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
      await t.gw.seeder.putNetwork(evmNetwork("eth2", [{ id: "stub", httpUrl: stub.url }]));
      await t.admin.set(t.state.names.publishedAt(), "m2");
      await t.gw.seeder.publish({ type: "resync" });
      // Once the subscription is back, the changed marker stands for the missed resync.
      await eventually(() => t.reconnects.length > 0, "the reconnect once the subscriber is back");
      await eventually(
        async () => (await t.call(t.key)).status === 401,
        "the key dropped by the re-publish no longer served from the cache",
      );
      await eventually(
        async () => (await t.call(fresh, "eth2")).status === 200,
        "the network added by the re-publish served",
      );
      assert.equal((await fetch(`${t.gw.base}/readyz`)).status, 200);
    } finally {
      await t.stop();
    }
  });

  it("keeps its cached keys when the subscriber is back before the command connection and Redis came back empty", async () => {
    const t = await startSlowReconnect("cmd");
    try {
      assert.equal((await t.call(t.key)).status, 200); // cached
      await t.empty();
      await t.kill();
      await eventually(() => t.connected(t.names.sub), "the subscriber back");
      // Until the command connection is back nothing can be checked: no reconnect is announced, and the
      // cache is kept meanwhile...
      assert.deepEqual(t.reconnects, [], "re-synced before the command connection was back");
      assert.equal(
        (await t.call(t.key)).status,
        200,
        "cached key dropped while the marker could not be read",
      );
      // ...and after it (the plane has handled the reconnect once it is recorded), since Redis holds no
      // publication.
      await eventually(() => t.reconnects.length > 0, "the reconnect once the command connection is back");
      assert.deepEqual(t.reconnects, [null], "the marker read after the reconnect");
      assert.equal((await t.call(t.key)).status, 200, "cached key dropped although Redis lost its data");
      // The re-publish (the key is gone) is then applied.
      await t.admin.set(t.state.names.publishedAt(), "m2");
      await t.gw.seeder.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
      await t.gw.seeder.publish({ type: "resync" });
      await eventually(async () => (await t.call(t.key)).status === 401, "the re-publish applied");
    } finally {
      await t.stop();
    }
  });

  it("networks are read with the marker on both sides: a re-publish landing between two reads is read again", async () => {
    const ns = createTestRedisNamespace();
    const seeder = new RedisSeeder(ns.prefix);
    const state = new RedisPlaneState({
      url: TEST_REDIS_URL,
      prefix: ns.prefix,
      commandTimeoutMs: 500,
      logger: createLogger("test", "silent"),
    });
    const admin = new Redis(TEST_REDIS_URL);
    try {
      await state.start();
      // Redis is empty (restarted); the re-publish lands right after the networks were read.
      const cmd = (state as unknown as { cmd: Redis }).cmd;
      const hgetall = cmd.hgetall.bind(cmd);
      let reads = 0;
      (cmd as unknown as { hgetall: (k: string) => Promise<Record<string, string>> }).hgetall = async (k) => {
        const out = await hgetall(k);
        if (reads++ === 0) {
          await seeder.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
          await admin.set(state.names.publishedAt(), "m2");
        }
        return out;
      };
      const got = await state.getPublishedNetworks();
      assert.equal(got.marker, "m2");
      assert.deepEqual(
        got.networks.map((n) => n.slug),
        ["eth"],
        "the published marker was paired with the networks read before it",
      );
      assert.equal(reads, 2);
    } finally {
      admin.disconnect();
      await state.close();
      await seeder.close();
      await ns.cleanup();
    }
  });

  it("answers 500 Internal (Service Error) when a key lookup cannot reach Redis", async () => {
    const ns = createTestRedisNamespace();
    const seeder = new RedisSeeder(ns.prefix);
    await seeder.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
    const config = loadDataPlaneConfig({
      REDIS_KEY_PREFIX: ns.prefix,
      DATA_PLANE_PORT: "0",
      DATA_PLANE_HOST: "127.0.0.1",
      LOG_LEVEL: "silent",
    });
    const logger = createLogger("test", "silent");
    /** Real Redis state whose key reads fail, as when Redis is down on a cache miss. */
    class FailingKeys extends RedisPlaneState {
      override getKey(): Promise<KeyRecord | null> {
        return Promise.reject(new Error("connection lost"));
      }
    }
    const state = new FailingKeys({
      url: config.REDIS_URL,
      prefix: ns.prefix,
      commandTimeoutMs: 500,
      logger,
    });
    const plane = await startDataPlane(config, { state, logger });
    try {
      const r = await post(`http://127.0.0.1:${plane.port}/eth/rpc?apikey=whatever`, chainId);
      const row = GatewayError.Internal;
      assert.equal(r.status, row.httpStatus);
      assert.equal(r.json.error.code, row.code);
      assert.equal(r.json.error.data.category, row.category);
      assert.equal(r.json.error.data.reason, row.reason);
      assert.equal(r.json.error.data.requestId, r.headers.get("x-request-id"));
    } finally {
      await plane.close();
      await seeder.close();
      await ns.cleanup();
    }
  });
});
