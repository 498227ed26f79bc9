import assert from "node:assert/strict";
import { Advance, FilterKind, FilterStore } from "../../../../data-plane/src/filters/filter-store";
import type { Clock } from "../../../../data-plane/src/ratelimit/clock";
import type { RedisClient } from "../../../../shared/src/redis/connect";
import { RedisNames } from "../../../../shared/src/redis/keys";
import { createTestRedisNamespace, describeOverRedis, type TestRedisNamespace } from "../../../helpers/redis";

/**
 * The filters' Redis store (data-plane/src/filters/filter-store.ts) on a real Redis and a real Redis
 * Cluster (its scripts touch a filter and its tenant's set: one slot through the `{tenant}` hash tag):
 * racing polls claim a range once, expiry follows the injected clock, the cap counts live filters only, and
 * a tenant sees only its own filters.
 */
describeOverRedis("filter store", function (redis) {
  this.timeout(30_000);
  let ns: TestRedisNamespace;
  let client: RedisClient;
  const clock: Clock & { ms: number } = { ms: 1_000_000, now: () => clock.ms };
  let store: FilterStore;

  before(() => {
    ns = createTestRedisNamespace(redis());
    client = ns.redis.client("dp-commands");
    store = new FilterStore(client, new RedisNames(ns.prefix), clock, 60_000, 3);
  });

  after(async () => {
    client?.disconnect();
    await ns?.cleanup();
  });

  it("of 20 polls racing for one range, exactly one claims it; the range given back is claimable again", async () => {
    const id = (await store.add("app:race", { kind: FilterKind.Blocks, last: 100 }))!;
    const results = await Promise.all(
      Array.from({ length: 20 }, () => store.advance("app:race", id, 100, 105)),
    );
    assert.equal(results.filter((r) => r === Advance.Claimed).length, 1);
    assert.equal(results.filter((r) => r === Advance.Lost).length, 19);
    assert.equal((await store.get("app:race", id))?.last, 105);
    // A failed fetch gives it back (to -> from), and the next poll claims it again.
    assert.equal(await store.advance("app:race", id, 105, 100), Advance.Claimed);
    assert.equal(await store.advance("app:race", id, 100, 105), Advance.Claimed);
    assert.equal(await store.remove("app:race", id), true);
    assert.equal(await store.advance("app:race", id, 105, 106), Advance.Gone);
  });

  it("keeps what a filter is (kind, criteria, the pending filter's node), for its tenant only", async () => {
    const logs = (await store.add("app:one", {
      kind: FilterKind.Logs,
      last: 7,
      criteria: '{"address":"0x01"}',
    }))!;
    const pending = (await store.add("app:one", {
      kind: FilterKind.Pending,
      last: 0,
      upstreamId: "node-a",
      remoteId: "0xabc",
    }))!;
    assert.deepEqual(await store.get("app:one", logs), {
      kind: "logs",
      last: 7,
      criteria: '{"address":"0x01"}',
      upstreamId: undefined,
      remoteId: undefined,
    });
    const p = await store.get("app:one", pending);
    assert.equal(p?.upstreamId, "node-a");
    assert.equal(p?.remoteId, "0xabc");
    // Another tenant: not found, cannot advance, cannot remove.
    assert.equal(await store.get("app:two", logs), undefined);
    assert.equal(await store.advance("app:two", logs, 7, 8), Advance.Gone);
    assert.equal(await store.remove("app:two", logs), false);
    assert.equal((await store.get("app:one", logs))?.last, 7);
    // Ids not of the issued shape are never looked up.
    assert.equal(await store.get("app:one", "*"), undefined);
    assert.equal(await store.remove("app:one", `${logs}*`), false);
    await store.remove("app:one", logs);
    await store.remove("app:one", pending);
  });

  it("expires a filter FILTER_TTL_MS after its last poll (injected clock), and counts only live ones toward the cap", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await store.add("app:cap", { kind: FilterKind.Blocks, last: 1 }))!);
    assert.equal(await store.add("app:cap", { kind: FilterKind.Blocks, last: 1 }), undefined, "at the cap");
    clock.ms += 59_000;
    assert.equal(await store.advance("app:cap", ids[0]!, 1, 1), Advance.Claimed, "a poll keeps it");
    clock.ms += 2_000; // ids[1], ids[2]: 61 s without a poll
    assert.equal(await store.get("app:cap", ids[1]!), undefined);
    assert.equal(await store.advance("app:cap", ids[2]!, 1, 2), Advance.Gone);
    assert.equal((await store.get("app:cap", ids[0]!))?.kind, "blocks");
    // Two places free again.
    assert.notEqual(await store.add("app:cap", { kind: FilterKind.Blocks, last: 1 }), undefined);
    assert.notEqual(await store.add("app:cap", { kind: FilterKind.Blocks, last: 1 }), undefined);
    assert.equal(await store.add("app:cap", { kind: FilterKind.Blocks, last: 1 }), undefined);
    clock.ms += 58_001; // ids[0]: 60 s + 1 ms after its poll
    assert.equal(await store.get("app:cap", ids[0]!), undefined);
    assert.equal(await store.remove("app:cap", ids[0]!), false, "an expired filter is not removed live");
  });
});
