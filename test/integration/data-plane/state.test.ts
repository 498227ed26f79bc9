import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";
import { startDataPlane } from "../../../data-plane/src/data-plane";
import { RedisPlaneState } from "../../../data-plane/src/state/redis-state";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { createLogger } from "../../../shared/src/log/logger";
import type { KeyRecord } from "../../../shared/src/redis/records";
import { createTestRedisNamespace, TEST_REDIS_URL } from "../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../helpers/seed-redis";
import { type Gateway, post, sleep, startGateway } from "./harness";
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
        // The state connections (commands + subscriber), not the usage recorder's own connection.
        .filter((line) => line.includes(`name=data-plane:${gw.ns.prefix}`) && !line.includes(":usage "))
        .map((line) => /id=(\d+)/.exec(line)![1]!);
      assert.equal(ids.length, 2, clients);
      for (const id of ids) await admin.client("KILL", "ID", id);
      let status = 0;
      for (let i = 0; i < 50 && status !== 403; i++) {
        await sleep(100);
        status = (await post(url, chainId, { origin: "https://evil.io" })).status;
      }
      assert.equal(status, 403, "cache not dropped after reconnect");
      // The subscription is back: a revoke published now takes effect.
      await gw.seeder.deleteKey(key);
      await gw.seeder.publish({ type: "key.revoke", keyHash: hashApiKey(key) });
      await sleep(300);
      const r = await post(url, chainId, { origin: "https://good.io" });
      assert.equal(r.status, 401);
      assert.equal((await fetch(`${gw.base}/readyz`)).status, 200);
    } finally {
      admin.disconnect();
      await gw.stop();
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
