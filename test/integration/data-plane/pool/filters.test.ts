import assert from "node:assert/strict";
import { createPublicClient, type Hash, http, parseAbiItem } from "viem";
import { foundry } from "viem/chains";
import { PromMetrics, type UpstreamOutcome } from "../../../../data-plane/src/metrics/metrics";
import type { Clock } from "../../../../data-plane/src/ratelimit/clock";
import type { UsageContext, UsageRecorder } from "../../../../data-plane/src/usage/recorder";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { NetworkRecord } from "../../../../shared/src/redis/records";
import { rpc, word } from "../../../helpers/evm-logs";
import { evmNetwork } from "../../../helpers/seed-redis";
import { EMITTED_ABI, EMITTED_EVENT, TwinChain, until } from "../../../helpers/twin-chain";
import { type Gateway, post, startGateway } from "../harness";
import { TestWsClient } from "../ws/ws-client";

/**
 * Filters kept by the gateway (data-plane/src/filters) on a network of two real anvil nodes holding the
 * same chain (test/helpers/twin-chain.ts): polls are answered from either node, by either of two
 * data-plane instances on one Redis prefix, over HTTP (single and batch) and WebSocket, with real viem
 * clients; scoped to the app, capped per app, expiring after FILTER_TTL_MS without a poll (fake clock).
 */

const APP_A = { appId: "app-a", workspaceId: "ws-a" };
const APP_B = { appId: "app-b", workspaceId: "ws-b" };
/** An app whose access rules deny two filter methods. */
const APP_C = {
  appId: "app-c",
  workspaceId: "ws-c",
  access: {
    methodMode: "DENY" as const,
    methods: ["eth_newFilter", "eth_getFilterLogs"],
    requestsPerSecond: null,
    requestsPerDay: null,
    userAgents: [],
    jwt: null,
  },
};

/** Usage records, kept in memory for the assertions. */
class CollectingUsage implements UsageRecorder {
  readonly rows: UsageContext[] = [];
  record(ctx: UsageContext): void {
    this.rows.push(ctx);
  }
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}

function twoNodes(chain: TwinChain, extra: Partial<NetworkRecord> = {}): NetworkRecord {
  return {
    ...evmNetwork("eth", [
      { id: "node-a", httpUrl: chain.nodes[0]!.httpUrl },
      { id: "node-b", httpUrl: chain.nodes[1]!.httpUrl },
    ]),
    ...extra,
  };
}

async function rpcOk(url: string, method: string, params: unknown[] = []) {
  const r = await post(url, { jsonrpc: "2.0", id: 1, method, params });
  assert.equal(r.json?.error, undefined, `${method}: ${r.text}`);
  return r.json.result;
}

/** Prometheus metrics that also count each upstream's client exchanges (health probes are not booked there). */
class CountingMetrics extends PromMetrics {
  readonly exchanges = new Map<string, number>();
  override upstreamRequest(
    network: string,
    upstream: string,
    outcome: UpstreamOutcome,
    seconds: number,
  ): void {
    this.exchanges.set(upstream, (this.exchanges.get(upstream) ?? 0) + 1);
    super.upstreamRequest(network, upstream, outcome, seconds);
  }
}

/** A clock the test moves (FILTER_TTL_MS expiry without waiting). */
class FakeClock implements Clock {
  constructor(public ms = Date.now()) {}
  now(): number {
    return this.ms;
  }
}

describe("filters kept by the gateway across a pool of nodes", function () {
  this.timeout(120_000);
  let chain: TwinChain;
  let gw: Gateway;
  let gw2: Gateway;
  let url: string;
  let url2: string;
  let urlB: string;
  const clock = new FakeClock();
  const metrics = new CountingMetrics();
  const usage = new CollectingUsage();
  let urlC: string;

  before(async () => {
    chain = await TwinChain.start(2);
    let keyA = "";
    let keyB = "";
    let keyC = "";
    const env = { MAX_FILTERS_PER_APP: "4", FILTER_TTL_MS: "60000" };
    gw = await startGateway(
      env,
      async (s) => {
        await s.putNetwork(twoNodes(chain));
        keyA = await s.putKey(APP_A);
        keyB = await s.putKey(APP_B);
        keyC = await s.putKey(APP_C);
      },
      { clock, metrics, usage },
    );
    // A second instance on the same Redis prefix: another process (or thread) of the same deployment.
    gw2 = await startGateway(env, async () => {}, { clock }, gw.ns);
    url = `${gw.base}/eth/rpc?apikey=${keyA}`;
    url2 = `${gw2.base}/eth/rpc?apikey=${keyA}`;
    urlB = `${gw.base}/eth/rpc?apikey=${keyB}`;
    urlC = `${gw.base}/eth/rpc?apikey=${keyC}`;
    // Both upstreams healthy and at the head in both instances before the first filter.
    const head = await chain.head();
    await until(() => healthyAt(gw, head) && healthyAt(gw2, head), 10_000, "both nodes healthy");
  });

  after(async () => {
    await gw2?.stop();
    await gw?.stop();
    await chain?.stop();
  });

  function healthyAt(g: Gateway, head: number): boolean {
    const pool = g.plane.context.upstreams.get("eth");
    return pool !== undefined && pool.selectableAt(head).length === 2;
  }

  /** Waits until both instances' pools have seen `head` on both nodes (the head polls report up to). */
  async function synced(): Promise<void> {
    const head = await chain.head();
    await until(() => healthyAt(gw, head) && healthyAt(gw2, head), 10_000, `head ${head} in both instances`);
  }

  it("viem createEventFilter + getFilterChanges: every event once, polls alternating between two instances", async () => {
    const c1 = createPublicClient({ chain: foundry, transport: http(url) });
    const c2 = createPublicClient({ chain: foundry, transport: http(url2) });
    const event = parseAbiItem(EMITTED_EVENT);
    const filter = await c1.createEventFilter({ address: chain.emitter as `0x${string}`, event });
    const seen: bigint[] = [];
    let round = 0;
    const sent: number[] = [];
    const before = new Map(metrics.exchanges);
    for (let batch = 0; batch < 4; batch++) {
      const values = [batch * 10 + 1, batch * 10 + 2, batch * 10 + 3];
      await chain.emit(...values);
      sent.push(...values);
      await synced();
      // Polls until every sent event arrived, each poll on the other instance than the one before.
      await until(async () => {
        const client = round++ % 2 === 0 ? c1 : c2;
        const logs = await client.getFilterChanges({ filter });
        for (const l of logs) seen.push(l.args.a!);
        return seen.length >= sent.length;
      });
    }
    // One more poll on each: nothing new, nothing repeated.
    assert.deepEqual(await c1.getFilterChanges({ filter }), []);
    assert.deepEqual(await c2.getFilterChanges({ filter }), []);
    assert.deepEqual(seen, sent.map(BigInt));
    assert.ok(round >= 4, "polls went to both instances");
    // And to both nodes: instance 1's polls alone reached each of them (its nodes in turn).
    for (const node of ["node-a", "node-b"]) {
      assert.ok((metrics.exchanges.get(node) ?? 0) > (before.get(node) ?? 0), `${node} answered polls`);
    }
    assert.equal(await c2.uninstallFilter({ filter }), true);
  });

  it("viem createBlockFilter: the hash of every block once, in order, through either instance", async () => {
    const c1 = createPublicClient({ chain: foundry, transport: http(url) });
    const c2 = createPublicClient({ chain: foundry, transport: http(url2) });
    await synced();
    const start = await chain.head();
    const filter = await c1.createBlockFilter();
    const seen: Hash[] = [];
    let round = 0;
    for (let i = 0; i < 3; i++) {
      await chain.mine(2);
      await chain.emit(100 + i);
      await synced();
      const head = await chain.head();
      await until(async () => {
        const client = round++ % 2 === 0 ? c1 : c2;
        seen.push(...(await client.getFilterChanges({ filter })));
        return seen.length >= head - start;
      });
    }
    assert.deepEqual(seen, await chain.hashes(start + 1, await chain.head()));
    assert.equal(await c1.uninstallFilter({ filter }), true);
  });

  it("viem watchContractEvent and watchBlocks (HTTP, poll mode): every event and block exactly once", async () => {
    const client = createPublicClient({ chain: foundry, transport: http(url), pollingInterval: 50 });
    await synced();
    const start = await chain.head();
    const events: bigint[] = [];
    const blocks: bigint[] = [];
    const errors: Error[] = [];
    const unwatchEvents = client.watchContractEvent({
      address: chain.emitter as `0x${string}`,
      abi: EMITTED_ABI,
      eventName: "Emitted",
      poll: true,
      onLogs: (logs) => {
        for (const l of logs) events.push(l.args.a!);
      },
      onError: (e) => errors.push(e),
    });
    const unwatchBlocks = client.watchBlocks({
      poll: true,
      emitMissed: true,
      onBlock: (b) => blocks.push(b.number),
      onError: (e) => errors.push(e),
    });
    try {
      // viem installs its filter before it reports: wait for it (in Redis, where any instance finds it).
      await until(async () => (await filterKeys(gw)).length > 0, 10_000, "viem's filter installed");
      await until(() => blocks.length > 0, 10_000, "watchBlocks' first block");
      const sent = [201, 202, 203, 204, 205, 206];
      for (const v of sent) {
        await chain.emit(v);
        await chain.mine(1);
      }
      await synced();
      const head = await chain.head();
      await until(
        () => events.length >= sent.length && blocks.includes(BigInt(head)),
        15_000,
        "every event and block",
      );
      assert.deepEqual(events, sent.map(BigInt));
      const expected: bigint[] = [];
      for (let n = blocks[0]!; n <= BigInt(head); n++) expected.push(n);
      assert.deepEqual(blocks, expected, "consecutive blocks, none twice");
      assert.equal(blocks[0], BigInt(start), "from the head when the watch began");
      assert.deepEqual(errors, []);
    } finally {
      unwatchEvents();
      unwatchBlocks();
    }
  });

  it("a filter is the app's: another app's key neither polls nor uninstalls it", async () => {
    const id = await rpcOk(url, "eth_newBlockFilter");
    assert.match(id, /^0x[0-9a-f]{32}$/);
    const other = await post(urlB, { jsonrpc: "2.0", id: 7, method: "eth_getFilterChanges", params: [id] });
    assert.equal(other.status, 200);
    assert.equal(other.json.error.code, -32000);
    assert.equal(other.json.error.message, "filter not found");
    assert.equal(other.json.error.data.reason, GatewayError.FilterNotFound.reason);
    assert.equal(await rpcOk(urlB, "eth_uninstallFilter", [id]), false);
    // Still the owner's.
    assert.deepEqual(await rpcOk(url, "eth_getFilterChanges", [id]), []);
    assert.equal(await rpcOk(url, "eth_uninstallFilter", [id]), true);
    assert.equal(await rpcOk(url, "eth_uninstallFilter", [id]), false);
    const gone = await post(url, { jsonrpc: "2.0", id: 8, method: "eth_getFilterChanges", params: [id] });
    assert.equal(gone.json.error.message, "filter not found");
    // A filter object too large to keep (2,000 addresses, about 90 KB): refused; the gateway serves on.
    const many = Array.from({ length: 2000 }, (_, i) => `0x${i.toString(16).padStart(40, "0")}`);
    const big = await post(url, {
      jsonrpc: "2.0",
      id: 10,
      method: "eth_newFilter",
      params: [{ address: many }],
    });
    assert.equal(big.status, 200);
    assert.equal(big.json.error.data.reason, GatewayError.FilterTooLarge.reason);
    assert.equal(big.json.error.code, -32602);
    const small = await rpcOk(url, "eth_newFilter", [{ address: many.slice(0, 10) }]);
    assert.match(small, /^0x[0-9a-f]{32}$/);
    assert.equal(await rpcOk(url, "eth_uninstallFilter", [small]), true);
    // By name, as jsonrpsee-based nodes take it: a gateway filter too (polled here, so not a node's).
    const named = await post(url, {
      jsonrpc: "2.0",
      id: 12,
      method: "eth_newFilter",
      params: { filter: { address: chain.emitter } },
    });
    assert.deepEqual(await rpcOk(url, "eth_getFilterChanges", [named.json.result]), []);
    assert.equal(await rpcOk(url, "eth_uninstallFilter", [named.json.result]), true);
    // Not a filter object: the node's own answer (its invalid-params error), nothing kept.
    const notObject = await post(url, { jsonrpc: "2.0", id: 11, method: "eth_newFilter", params: [7] });
    assert.notEqual(notObject.json.error, undefined);
    // Ids that were never issued, and ones that are not even ids.
    for (const bad of ["0x1", `0x${"0".repeat(32)}`, "*", 12]) {
      const r = await post(url, { jsonrpc: "2.0", id: 9, method: "eth_getFilterChanges", params: [bad] });
      assert.equal(r.json.error.code, -32000, String(bad));
    }
  });

  it("filter calls are policed and counted like any call: the app's access rules, usage per request object", async () => {
    const denied = await post(urlC, { jsonrpc: "2.0", id: 1, method: "eth_newFilter", params: [{}] });
    assert.equal(denied.json.error.data.reason, "method_not_allowed_by_app");
    const batch = await post(urlC, [
      { jsonrpc: "2.0", id: 1, method: "eth_newBlockFilter" },
      { jsonrpc: "2.0", id: 2, method: "eth_getFilterLogs", params: ["0x00"] },
    ]);
    assert.match(batch.json[0].result, /^0x[0-9a-f]{32}$/, "not denied");
    assert.equal(batch.json[1].error.data.reason, "method_not_allowed_by_app");
    const ws = await TestWsClient.open(urlC.replace("http", "ws"));
    try {
      const r = await ws.call("eth_newFilter", [{}]);
      assert.equal(r.error.data.reason, "method_not_allowed_by_app");
      assert.equal((await ws.call("eth_uninstallFilter", [batch.json[0].result])).result, true);
    } finally {
      ws.close();
    }
    // Usage: one record per request object, whatever the gateway did to answer it.
    const mine = (method: string) =>
      usage.rows
        .filter((u) => u.appId === "app-c" && u.method === method)
        .reduce((n, u) => n + (u.units ?? 1), 0);
    await until(() => mine("eth_uninstallFilter") === 1, 5_000, "the WebSocket call's usage record");
    assert.equal(mine("eth_newBlockFilter"), 1);
    assert.equal(mine("eth_newFilter"), 2);
    assert.equal(mine("eth_getFilterLogs"), 1);
  });

  it("MAX_FILTERS_PER_APP caps live filters per app; uninstalled and expired ones free their place", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await rpcOk(url, "eth_newBlockFilter"));
    const over = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_newFilter", params: [{}] });
    assert.equal(over.status, 200);
    assert.equal(over.json.error.code, GatewayError.FilterLimit.code);
    assert.equal(over.json.error.data.reason, "filter_limit");
    assert.match(over.json.error.message, /at most 4 filters/);
    // The other app has its own allowance.
    const theirs = await rpcOk(urlB, "eth_newBlockFilter");
    assert.equal(await rpcOk(urlB, "eth_uninstallFilter", [theirs]), true);
    // Uninstalling one (on the other instance) makes room.
    assert.equal(await rpcOk(url2, "eth_uninstallFilter", [ids.pop()]), true);
    ids.push(await rpcOk(url, "eth_newBlockFilter"));
    // Expiry: FILTER_TTL_MS (60 s) without a poll. ids[0] is polled at +50 s (which keeps it alive), the
    // others are not: at +70 s they are gone and their places free, ids[0] lives until +110 s.
    clock.ms += 50_000;
    assert.deepEqual(await rpcOk(url, "eth_getFilterChanges", [ids[0]]), []);
    clock.ms += 20_000;
    for (const id of ids.slice(1)) {
      const r = await post(url2, { jsonrpc: "2.0", id: 1, method: "eth_getFilterChanges", params: [id] });
      assert.equal(r.json.error.message, "filter not found", "expired");
    }
    const fresh: string[] = [];
    for (let i = 0; i < 3; i++) fresh.push(await rpcOk(url, "eth_newBlockFilter"));
    const stillOver = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_newBlockFilter" });
    assert.equal(stillOver.json.error.data.reason, "filter_limit", "ids[0] still counts");
    clock.ms += 41_000;
    const expired = await post(url, {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getFilterChanges",
      params: [ids[0]],
    });
    assert.equal(expired.json.error.message, "filter not found");
    // The fresh ones (made at +70 s) live until +130 s.
    for (const id of fresh) assert.equal(await rpcOk(url, "eth_uninstallFilter", [id]), true);
  });

  it("a log filter after a long gap reports at most maxLogsBlockRange blocks per poll, and the rest after", async () => {
    await gw.seeder.putNetwork(twoNodes(chain, { maxLogsBlockRange: 3 }));
    await gw.seeder.publish({ type: "networks.update" });
    await until(() => gw.plane.context.upstreams.get("eth")?.record.maxLogsBlockRange === 3, 5000, "range 3");
    try {
      await synced();
      const from = `0x${((await chain.head()) + 1).toString(16)}`;
      const id = await rpcOk(url, "eth_newFilter", [{ address: chain.emitter, fromBlock: from }]);
      await chain.emit(301, 302, 303, 304, 305, 306, 307); // seven blocks, one log each
      await synced();
      const first = await rpcOk(url, "eth_getFilterChanges", [id]);
      assert.equal(first.length, 3, "three blocks' logs");
      const values = first.map((l: { data: string }) => Number.parseInt(l.data, 16));
      assert.deepEqual(values, [301, 302, 303]);
      const rest: number[] = [];
      await until(async () => {
        const logs = await rpcOk(url, "eth_getFilterChanges", [id]);
        for (const l of logs) rest.push(Number.parseInt(l.data, 16));
        return rest.length >= 4;
      });
      assert.deepEqual(rest, [304, 305, 306, 307]);
      // eth_getFilterLogs: every log the filter matches (its own fromBlock .. latest), not only new ones;
      // no poll state.
      const all = await rpcOk(url, "eth_getFilterLogs", [id]);
      assert.deepEqual(
        all.map((l: { data: string }) => Number.parseInt(l.data, 16)),
        [301, 302, 303, 304, 305, 306, 307],
      );
      assert.deepEqual(await rpcOk(url, "eth_getFilterChanges", [id]), []);
      // The range check of eth_newFilter itself still applies.
      const wide = await post(url, {
        jsonrpc: "2.0",
        id: 2,
        method: "eth_newFilter",
        params: [{ fromBlock: "0x0", toBlock: "0x64" }],
      });
      assert.equal(wide.json.error.data.reason, "logs_range_too_large");
      assert.equal(await rpcOk(url, "eth_uninstallFilter", [id]), true);
    } finally {
      await gw.seeder.putNetwork(twoNodes(chain));
      await gw.seeder.publish({ type: "networks.update" });
    }
  });

  it("HTTP batches and WebSocket: the same filter methods, one filter seen from both", async () => {
    await synced();
    const batch = await post(url, [
      { jsonrpc: "2.0", id: 1, method: "eth_newBlockFilter" },
      { jsonrpc: "2.0", id: 2, method: "eth_chainId" },
      { jsonrpc: "2.0", id: 3, method: "eth_newFilter", params: [{ address: chain.emitter }] },
    ]);
    assert.equal(batch.status, 200);
    const [blockId, chainId, logId] = batch.json.map((r: { result: unknown }) => r.result);
    assert.equal(chainId, "0x7a69");
    const wsUrl = `${gw2.base.replace("http", "ws")}/eth/rpc?apikey=${new URL(url).searchParams.get("apikey")}`;
    const ws = await TestWsClient.open(wsUrl);
    try {
      const start = await chain.head();
      await chain.emit(401, 402);
      await synced();
      const hashes: string[] = [];
      const values: number[] = [];
      await until(async () => {
        const r = await ws.call("eth_getFilterChanges", [blockId]);
        hashes.push(...r.result);
        const b = await post(url, [
          { jsonrpc: "2.0", id: 5, method: "eth_getFilterChanges", params: [logId] },
          { jsonrpc: "2.0", id: 6, method: "eth_blockNumber" },
        ]);
        for (const l of b.json[0].result) values.push(Number.parseInt(l.data, 16));
        return hashes.length >= 2 && values.length >= 2;
      });
      assert.deepEqual(hashes, await chain.hashes(start + 1, start + 2));
      assert.deepEqual(values, [401, 402]);
      // Created over WebSocket, polled over HTTP on the other instance.
      const wsFilter = (await ws.call("eth_newFilter", [{ address: chain.emitter }])).result;
      await chain.emit(403);
      await synced();
      const got: number[] = [];
      await until(async () => {
        for (const l of await rpcOk(url, "eth_getFilterChanges", [wsFilter]))
          got.push(Number.parseInt(l.data, 16));
        return got.length >= 1;
      });
      assert.deepEqual(got, [403]);
      assert.equal((await ws.call("eth_uninstallFilter", [wsFilter])).result, true);
      const unknown = await ws.call("eth_getFilterChanges", [wsFilter]);
      assert.equal(unknown.error.code, -32000);
      assert.equal(unknown.error.message, "filter not found");
      assert.equal((await ws.call("eth_uninstallFilter", [blockId])).result, true);
      assert.equal(await rpcOk(url, "eth_uninstallFilter", [logId]), true);
    } finally {
      ws.close();
    }
  });

  it("ten polls racing on two instances report each block once between them", async () => {
    await synced();
    const start = await chain.head();
    const id = await rpcOk(url, "eth_newBlockFilter");
    await chain.mine(3);
    await synced();
    const all: string[] = [];
    await until(async () => {
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          post(i % 2 === 0 ? url : url2, {
            jsonrpc: "2.0",
            id: i,
            method: "eth_getFilterChanges",
            params: [id],
          }),
        ),
      );
      for (const a of answers) {
        assert.equal(a.json.error, undefined, a.text);
        all.push(...a.json.result);
      }
      return all.length >= 3;
    });
    assert.deepEqual(all, await chain.hashes(start + 1, start + 3), "each block once, in order");
    assert.equal(await rpcOk(url2, "eth_uninstallFilter", [id]), true);
  });

  it("a pending-transaction filter stays on the node that made it, and is `filter not found` once that node is gone", async () => {
    const pool = () => gw.plane.context.upstreams.get("eth")!;
    const only = (id: string) => ({
      ...twoNodes(chain),
      upstreams: twoNodes(chain).upstreams.filter((u) => u.id === id),
    });
    const upstreamIds = () =>
      pool()
        .selectableAt(-1)
        .map((u) => u.id)
        .sort()
        .join(",");
    try {
      // Made while node-a is the network's only node: bound to node-a.
      await gw.seeder.putNetwork(only("node-a"));
      await gw.seeder.publish({ type: "networks.update" });
      await until(() => upstreamIds() === "node-a", 5_000, "node-a alone");
      const id = await rpcOk(url, "eth_newPendingTransactionFilter");
      assert.match(id, /^0x[0-9a-f]{32}$/);
      await gw.seeder.putNetwork(twoNodes(chain));
      await gw.seeder.publish({ type: "networks.update" });
      await until(() => upstreamIds() === "node-a,node-b", 10_000, "both nodes");
      await chain.emit(601);
      const hashes: string[] = [];
      await until(async () => {
        hashes.push(...(await rpcOk(url2, "eth_getFilterChanges", [id])));
        return hashes.length >= 1;
      });
      assert.equal(hashes.length, 1);
      const tx = await rpc(chain.nodes[0]!.httpUrl, "eth_getTransactionByHash", [hashes[0]]);
      assert.equal((tx as { input: string }).input, word(601));
      // node-a leaves the network: the filter it holds is gone, for every instance.
      await gw.seeder.putNetwork(only("node-b"));
      await gw.seeder.publish({ type: "networks.update" });
      await until(() => upstreamIds() === "node-b", 5_000, "node-b alone");
      const gone = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_getFilterChanges", params: [id] });
      assert.equal(gone.json.error.message, "filter not found");
      assert.equal(await rpcOk(url2, "eth_uninstallFilter", [id]), false, "already removed");
      // A new one works (on node-b).
      const again = await rpcOk(url, "eth_newPendingTransactionFilter");
      assert.deepEqual(await rpcOk(url2, "eth_getFilterChanges", [again]), []);
      assert.equal(await rpcOk(url, "eth_uninstallFilter", [again]), true);
    } finally {
      await gw.seeder.putNetwork(twoNodes(chain));
      await gw.seeder.publish({ type: "networks.update" });
      await until(() => upstreamIds() === "node-a,node-b", 10_000, "both nodes again");
    }
  });

  it("a filter survives its node going away: polls go on from the other node, nothing lost or repeated", async () => {
    await synced();
    const id = await rpcOk(url, "eth_newFilter", [{ address: chain.emitter }]);
    await chain.emit(501, 502);
    await synced();
    const got: number[] = [];
    for (const l of await rpcOk(url, "eth_getFilterChanges", [id])) got.push(Number.parseInt(l.data, 16));
    await chain.stopNode(0);
    await chain.emit(503, 504);
    await until(async () => {
      const r = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_getFilterChanges", params: [id] });
      if (r.json?.error !== undefined) return false; // the dead node until its breaker opens: next poll
      for (const l of r.json.result) got.push(Number.parseInt(l.data, 16));
      return got.length >= 4;
    }, 20_000);
    assert.deepEqual(got, [501, 502, 503, 504]);
  });
});

/** The filter hashes in the gateway's Redis namespace. */
async function filterKeys(g: Gateway): Promise<string[]> {
  const client = g.ns.redis.client();
  try {
    return await client.keys(`${g.ns.prefix}filter:*`);
  } finally {
    client.disconnect();
  }
}
