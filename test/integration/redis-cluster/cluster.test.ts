import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { runIdSource } from "../../../data-plane/src/usage/create";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { type RedisClient, scanKeys } from "../../../shared/src/redis/connect";
import { RedisNames } from "../../../shared/src/redis/keys";
import { keySlot } from "../../../shared/src/redis/slots";
import { eventually } from "../../helpers/eventually";
import {
  createTestRedisNamespace,
  describeOnRedisCluster,
  type TestRedisNamespace,
} from "../../helpers/redis";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";

/** A plain connection to one master only (no cluster routing): what it publishes, it publishes there. */
function nodeConnection(port: number): Redis {
  return new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 1, lazyConnect: true });
}

describeOnRedisCluster("Redis Cluster: slots, pub/sub across nodes, scans, run ids", function (redis) {
  this.timeout(60_000);
  let ns: TestRedisNamespace;
  let client: RedisClient;
  const ports = () => redis().clusterNodes.map((n) => n.port);

  beforeEach(() => {
    ns = createTestRedisNamespace(redis());
    client = redis().client();
  });
  afterEach(async () => {
    client.disconnect();
    await ns.cleanup();
  });

  it("keySlot agrees with CLUSTER KEYSLOT for the names RedisNames builds and for hash-tag edge cases", async () => {
    const n = new RedisNames(ns.prefix);
    const keys = [
      n.apiKey("ab".repeat(32)),
      n.networks(),
      n.plans(),
      n.workspace("ws-1"),
      n.publishedAt(),
      n.usageStream(),
      n.rateLimitWindow("ip:10.0.0.1", 1_700_000_000),
      n.rateLimitInstances(),
      n.quotaDay("ws-1", "2026-01-01"),
      n.quotaMonth("ws-1", "2026-01"),
      n.quotaFlushSeq("ws-1", "i-1"),
      n.node("n-1"),
      n.nodeSessionKeys("n-1"),
      n.loginAttempts("email", "f".repeat(32)),
      `${n.bullPrefix(true)}:nodes:wait`,
      "foo{}{bar}",
      "foo{{bar}}zap",
      "}{",
      "κλειδί:{ταυτότητα}",
    ];
    for (const k of keys) assert.equal(keySlot(k), Number(await client.cluster("KEYSLOT", k)), k);
  });

  it("an event published on any master reaches a data plane subscribed through another one", async () => {
    const stub = await new StubUpstream().start();
    let gw: Gateway | undefined;
    const conns = ports().map(nodeConnection);
    try {
      const keys: string[] = [];
      gw = await startGateway(
        { USAGE_MODE: "off" },
        async (s) => {
          await s.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: stub.url }]));
          for (let i = 0; i < ports().length; i++) keys.push(await s.putKey());
        },
        {},
        ns,
      );
      const body = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
      const url = (key: string) => `${gw!.base}/eth/rpc?apikey=${key}`;
      for (const k of keys) assert.equal((await post(url(k), body)).status, 200, "cached as valid");

      // Which master holds the data plane's subscription (ioredis names the subscriber connection after
      // the client's connection name; the client's other connections go to every master).
      const holders: number[] = [];
      for (const [i, c] of conns.entries()) {
        const list = String(await c.client("LIST"));
        if (list.includes(`name=ioredis-cluster(subscriber):data-plane:${ns.prefix}sub `)) {
          holders.push(ports()[i]!);
        }
      }
      assert.equal(holders.length, 1, "one subscriber connection, on one master");

      const names = new RedisNames(ns.prefix);
      for (const [i, c] of conns.entries()) {
        const key = keys[i]!;
        // Gone from Redis, still cached: only the event can make the data plane drop it.
        await client.del(names.apiKey(hashApiKey(key)));
        assert.equal((await post(url(key), body)).status, 200);
        const receivers = await c.publish(
          names.eventsChannel(),
          JSON.stringify({ type: "key.revoke", keyHash: hashApiKey(key) }),
        );
        // PUBLISH answers the subscribers of the node it ran on; Redis Cluster forwards it to the others.
        assert.equal(receivers, ports()[i] === holders[0] ? 1 : 0);
        await eventually(
          async () => (await post(url(key), body)).status === 401,
          `the revoke published on master ${ports()[i]} to arrive`,
        );
      }
    } finally {
      await gw?.stop();
      for (const c of conns) c.disconnect();
      await stub.stop();
    }
  });

  it("keys spread over every master; scanKeys finds them all", async () => {
    const n = new RedisNames(ns.prefix);
    const written = Array.from({ length: 60 }, (_, i) => n.apiKey(`k${i}`));
    await Promise.all(written.map((k) => client.set(k, "{}")));
    const perMaster: number[] = [];
    for (const port of ports()) {
      const c = nodeConnection(port);
      try {
        const [, found] = await c.scan("0", "MATCH", `${ns.prefix}*`, "COUNT", 1000);
        perMaster.push(found.length);
      } finally {
        c.disconnect();
      }
    }
    assert.ok(
      perMaster.every((x) => x > 0),
      `every master holds some: ${perMaster.join(", ")}`,
    );
    const seen: string[] = [];
    await scanKeys(client, n.apiKeyPattern(), (keys) => {
      seen.push(...keys);
    });
    assert.deepEqual(seen.sort(), [...written].sort());
  });

  it("the usage recorder's restart watch reads the run id of the master that holds the usage stream", async () => {
    const stream = new RedisNames(ns.prefix).usageStream();
    const slotOwner = (
      (await client.cluster("SLOTS")) as unknown as [number, number, [string, number]][]
    ).find(([from, to]) => from <= keySlot(stream) && keySlot(stream) <= to)!;
    const owner = nodeConnection(slotOwner[2][1]);
    try {
      const expected = /run_id:(\w+)/.exec(await owner.info("server"))![1];
      const text = await runIdSource(client, stream).info("server");
      assert.equal(/run_id:(\w+)/.exec(text)![1], expected);
      const others = await Promise.all(
        ports()
          .filter((p) => p !== slotOwner[2][1])
          .map(async (p) => {
            const c = nodeConnection(p);
            try {
              return /run_id:(\w+)/.exec(await c.info("server"))![1];
            } finally {
              c.disconnect();
            }
          }),
      );
      assert.ok(!others.includes(expected), "each master has its own run id");
    } finally {
      owner.disconnect();
    }
  });
});
