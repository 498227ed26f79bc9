import assert from "node:assert/strict";
import { type Anvil, startAnvil } from "../../../helpers/anvil";
import { eventually } from "../../../helpers/eventually";
import { createTestRedisNamespace, type TestRedisNamespace } from "../../../helpers/redis";
import { evmNetwork, RedisSeeder } from "../../../helpers/seed-redis";
import { StubUpstream } from "../stub-upstream";
import { perThreadDelta, postFresh, scrape, startThreadedPlane, sumOf, type ThreadedPlane } from "./fixture";

/**
 * The response cache and its in-flight merge are the process's, whatever DATA_PLANE_THREADS is
 * (cache/shared-response-cache.ts): a finalized block goes upstream once per process, on whichever thread
 * each new connection lands, and identical calls in flight on several threads at once are one upstream
 * call. The upstream is a real anvil behind a counting proxy (StubUpstream).
 */

const plan = {
  name: "big",
  requestsPerSecond: 1_000_000,
  dailyRequestLimit: 10_000_000,
  monthlyRequestLimit: null,
};

const call = (method: string, params: unknown[], id = 1) => ({ jsonrpc: "2.0", id, method, params });

for (const threads of [2, 4]) {
  describe(`data plane with DATA_PLANE_THREADS=${threads}: one response cache and in-flight merge per process`, function () {
    this.timeout(120_000);
    let anvil: Anvil;
    let up: StubUpstream;
    let ns: TestRedisNamespace;
    let seeder: RedisSeeder;
    let plane: ThreadedPlane;
    let path: string;

    before(async () => {
      anvil = await startAnvil();
      // anvil's finalized block is head - 64: with 100 blocks, blocks 0..36 are final.
      await fetch(anvil.httpUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(call("anvil_mine", ["0x64"])),
      });
      up = await new StubUpstream(anvil.httpUrl).start();
      ns = createTestRedisNamespace();
      seeder = new RedisSeeder(ns.prefix);
      await seeder.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
      path = `/eth/rpc?apikey=${await seeder.putKey({ workspaceId: "ws-cache", appId: "app-cache", plan })}`;
      // Every answer stored on its first upstream call (the doorkeeper's sharing has its unit tests), so
      // "once per process" is exactly one call.
      plane = await startThreadedPlane(
        ns.prefix,
        {
          DATA_PLANE_THREADS: String(threads),
          CACHE_ADMISSION: "first",
          RATE_LIMIT_MODE: "off",
          QUOTA_MODE: "off",
          USAGE_MODE: "off",
          LOG_LEVEL: "warn",
        },
        // Four threads each load a whole data plane: slow to start on a busy 2-CPU machine.
        90_000,
      );
      // Every thread knows the finalized head (its own pool's chain watch), so block 5 is keyed as final on
      // each: the process's gauge is the sum over the threads, 36 (100 - 64) from each.
      await eventually(async () => {
        const s = await scrape(plane.metricsBase);
        return sumOf(s, "rpcgw_network_finalized_block", { network: "eth" }) === 36 * threads;
      }, "the finalized head on every thread");
    });

    after(async () => {
      if (plane !== undefined) assert.equal(await plane.proc.stop(20_000), 0, plane.proc.output());
      await seeder?.close();
      await up?.stop();
      await anvil?.stop();
      await ns?.cleanup();
    });

    it("a finalized block goes upstream once, every later answer on every thread is a HIT", async () => {
      const p = plane;
      const params = ["0x5", false];
      up.reset();
      const before = await scrape(p.metricsBase);
      const first = await postFresh(p.port, path, call("eth_getBlockByNumber", params));
      assert.equal(first.status, 200);
      assert.equal(first.headers["x-cache"], "MISS");
      assert.equal(first.json.result.number, "0x5");
      const n = 12 * threads;
      for (let i = 0; i < n; i++) {
        const a = await postFresh(p.port, path, call("eth_getBlockByNumber", params, i));
        assert.equal(a.headers["x-cache"], "HIT", `request ${i + 2}`);
        assert.deepEqual(a.json.result, first.json.result);
        assert.equal(a.json.id, i);
      }
      assert.equal(up.countExact("eth_getBlockByNumber", params), 1, "upstream calls for block 5");
      const after = await scrape(p.metricsBase);
      // The hits were spread over the threads (each new connection lands on any of them).
      const served = perThreadDelta(before, after);
      const threadsServing = [...served.values()].filter((v) => v > 0).length;
      assert.ok(threadsServing >= 2, `threads that answered: ${JSON.stringify([...served])}`);
      assert.equal(
        sumOf(after, "rpcgw_cache_lookups_total", { network: "eth", result: "hit" }) -
          sumOf(before, "rpcgw_cache_lookups_total", { network: "eth", result: "hit" }),
        n,
      );
    });

    it("identical calls in flight on different threads at once are one upstream call, and the answer is then cached", async () => {
      const p = plane;
      // Permanent by method (data addressed by hash); held by the node long enough for the others to join.
      const block = (await postFresh(p.port, path, call("eth_getBlockByNumber", ["0x7", false]))).json.result;
      const params = [block.hash, false];
      up.reset();
      up.methodDelayMs.set("eth_getBlockByHash", 1_500);
      try {
        const leader = postFresh(p.port, path, call("eth_getBlockByHash", params, 0));
        await eventually(() => up.count("eth_getBlockByHash") === 1, "the first call at the node");
        const before = await scrape(p.metricsBase);
        const followers = Array.from({ length: 6 * threads }, (_, i) =>
          postFresh(p.port, path, call("eth_getBlockByHash", params, i + 1)),
        );
        const answers = await Promise.all([leader, ...followers]);
        for (const [i, a] of answers.entries()) {
          assert.equal(a.status, 200);
          assert.equal(a.json.id, i);
          assert.equal(a.json.result.hash, block.hash);
        }
        assert.equal(up.countExact("eth_getBlockByHash", params), 1, "upstream calls");
        // Followers on other threads than the leader's (their connections landed all over).
        const served = perThreadDelta(before, await scrape(p.metricsBase));
        assert.ok([...served.values()].filter((v) => v > 0).length >= 2, JSON.stringify([...served]));
        const again = await postFresh(p.port, path, call("eth_getBlockByHash", params, 99));
        assert.equal(again.headers["x-cache"], "HIT");
        assert.equal(up.countExact("eth_getBlockByHash", params), 1);
      } finally {
        up.methodDelayMs.delete("eth_getBlockByHash");
      }
    });
  });
}
