import assert from "node:assert/strict";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { type Anvil, startAnvil } from "../../../helpers/anvil";
import { PrivateRedis } from "../../../helpers/redis-server";
import { evmNetwork, RedisSeeder } from "../../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "../harness";

/**
 * Filters live in Redis: with Redis gone, a filter call gets a clear error (filter_store_unavailable, 503)
 * within the command timeout, the process keeps serving everything else, and once Redis is back (with its
 * data) the filter is there again.
 */
describe("filters while Redis is unreachable (a private redis-server, stopped and started)", function () {
  this.timeout(60_000);
  let redis: PrivateRedis;
  let anvil: Anvil;
  let gw: Gateway;
  let url: string;

  before(async () => {
    redis = await new PrivateRedis().start();
    anvil = await startAnvil();
    let key = "";
    gw = await startGateway(
      { REDIS_URL: redis.url, REDIS_COMMAND_TIMEOUT_MS: "300", USAGE_MODE: "off" },
      async (s) => {
        const seeder = new RedisSeeder(s.names.prefix, redis.url);
        await seeder.putNetwork(evmNetwork("eth", [{ id: "anvil", httpUrl: anvil.httpUrl }]));
        key = await seeder.putKey();
        await seeder.close();
      },
    );
    url = `${gw.base}/eth/rpc?apikey=${key}`;
  });

  after(async () => {
    await gw?.stop();
    await anvil?.stop();
    await redis?.stop();
  });

  it("answers filter_store_unavailable, serves the rest, and finds the filter again after Redis returns", async () => {
    const created = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_newBlockFilter" });
    const id = created.json.result as string;
    assert.match(id, /^0x[0-9a-f]{32}$/);
    await redis.shutdownSave();
    const t0 = performance.now();
    const down = await post(url, { jsonrpc: "2.0", id: 2, method: "eth_getFilterChanges", params: [id] });
    assert.equal(down.status, 503);
    assert.equal(down.json.error.data.reason, GatewayError.FilterStoreUnavailable.reason);
    assert.ok(performance.now() - t0 < 5_000, "answered within the command timeout (and a reconnect or two)");
    const batch = await post(url, [
      { jsonrpc: "2.0", id: 3, method: "eth_newFilter", params: [{}] },
      { jsonrpc: "2.0", id: 4, method: "eth_chainId" },
    ]);
    assert.equal(batch.status, 200);
    assert.equal(batch.json[0].error.data.reason, "filter_store_unavailable");
    assert.equal(batch.json[1].result, "0x7a69", "the rest is served");
    await redis.start();
    const deadline = Date.now() + 10_000;
    for (;;) {
      const r = await post(url, { jsonrpc: "2.0", id: 5, method: "eth_getFilterChanges", params: [id] });
      if (r.json?.error === undefined) {
        assert.ok(Array.isArray(r.json.result));
        break;
      }
      assert.equal(r.json.error.data.reason, "filter_store_unavailable", r.text);
      assert.ok(Date.now() < deadline, "the filter is back once Redis is");
      await new Promise((done) => setTimeout(done, 50));
    }
  });
});
