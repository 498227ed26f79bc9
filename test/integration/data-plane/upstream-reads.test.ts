import assert from "node:assert/strict";
import { privateKeyToAccount } from "viem/accounts";
import type { UsageContext, UsageRecorder } from "../../../data-plane/src/usage/recorder";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "./harness";
import { LIMITS_ENV, UsageReader } from "./limits/fixtures";
import { StubUpstream } from "./stub-upstream";
import { TestWsClient } from "./ws/ws-client";

/** anvil's dev account 2 (a fixed, public test key). */
const DEV_KEY_2 = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
const WORKSPACE = "ws-reads";
const BIG_PLAN = {
  name: "t",
  requestsPerSecond: 100_000,
  dailyRequestLimit: 10_000_000,
  monthlyRequestLimit: null,
};

class CollectingUsage implements UsageRecorder {
  readonly rows: UsageContext[] = [];
  record(ctx: UsageContext): void {
    this.rows.push(ctx);
  }
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}

async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const r = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return ((await r.json()) as { result: unknown }).result;
}

/** One sample of a metric line (`name{labels} value`), 0 when absent. */
function sample(metrics: string, name: string, labels: string): number {
  const line = metrics.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

async function signedTransfer(anvilUrl: string): Promise<string> {
  const account = privateKeyToAccount(DEV_KEY_2);
  const nonce = Number.parseInt(
    (await rpc(anvilUrl, "eth_getTransactionCount", [account.address, "latest"])) as string,
    16,
  );
  return account.signTransaction({
    type: "eip1559",
    chainId: 31337,
    nonce,
    to: "0x00000000000000000000000000000000000000aa",
    value: 1n,
    gas: 21_000n,
    maxFeePerGas: 100_000_000_000n,
    maxPriorityFeePerGas: 1n,
  });
}

/**
 * Hedged reads against a real anvil: two upstreams of the same chain, both counting proxies in front of
 * it; `slow` takes 2 s on reads and carries nearly all the weight (so reads go to it first), `fast`
 * answers at once. Limits and quota on (real Redis), no response cache (every read goes upstream).
 */
describe("data plane hedged reads (anvil behind a slow and a fast proxy)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let slow: StubUpstream;
  let fast: StubUpstream;
  let gw: Gateway;
  let usage: CollectingUsage;
  let quota: UsageReader;
  let key = "";
  let url = "";

  before(async () => {
    anvil = await startAnvil();
    await rpc(anvil.httpUrl, "anvil_mine", ["0x5"]);
  });
  after(async () => {
    await anvil.stop();
  });

  beforeEach(async () => {
    slow = await new StubUpstream(anvil.httpUrl).start();
    fast = await new StubUpstream(anvil.httpUrl).start();
    // The slow node holds reads past the test's own timeout: an answer at all proves a copy on the other
    // node served it, with no bound on elapsed time (a loaded machine makes the test slower, not red).
    for (const m of ["eth_call", "eth_getBalance", "eth_getBlockByNumber"])
      slow.methodDelayMs.set(m, 120_000);
    usage = new CollectingUsage();
    gw = await startGateway(
      {
        ...LIMITS_ENV,
        HEDGE_MIN_DELAY_MS: "50",
        HEDGE_MAX_DELAY_MS: "50",
        HEDGE_MAX_PERCENT: "100",
        // The chain watch reads blocks by number after each health probe, which the slow node holds:
        // left out, so the slow node's in-flight count is the client calls' alone.
        CACHE_FINALITY_ENABLED: "false",
        // Both proxies front one anvil: a send goes to the node the pool picks only, so that "never
        // hedged" is what the count shows (sends to every node: test/integration/data-plane/pool).
        SEND_BROADCAST_UPSTREAMS: "1",
      },
      async (s) => {
        await s.putNetwork(
          evmNetwork("eth", [
            { id: "slow", httpUrl: slow.url, weight: 1000 },
            { id: "fast", httpUrl: fast.url, weight: 1 },
          ]),
        );
        key = await s.putKey({ workspaceId: WORKSPACE, plan: BIG_PLAN });
      },
      { usage },
    );
    quota = new UsageReader(gw.ns.prefix);
    url = `${gw.base}/eth/rpc?apikey=${key}`;
  });

  afterEach(async () => {
    await gw.stop();
    await quota.close();
    await slow.stop();
    await fast.stop();
  });

  it("reads the slow node holds are answered by a copy on the other node (HTTP, batch, WS); the loser is cancelled; the tenant counts each once", async () => {
    const balance = await rpc(anvil.httpUrl, "eth_getBalance", [
      privateKeyToAccount(DEV_KEY_2).address,
      "latest",
    ]);
    const block5 = await rpc(anvil.httpUrl, "eth_getBlockByNumber", ["0x5", false]);
    // HTTP singles (one coalesced batch of eth_getBalance, and a block read that is never coalesced).
    const singles = await Promise.all([
      ...Array.from({ length: 3 }, (_, i) =>
        post(url, {
          jsonrpc: "2.0",
          id: i,
          method: "eth_getBalance",
          params: [privateKeyToAccount(DEV_KEY_2).address, "latest"],
        }),
      ),
      post(url, { jsonrpc: "2.0", id: 9, method: "eth_getBlockByNumber", params: ["0x5", false] }),
    ]);
    for (const r of singles.slice(0, 3)) assert.equal(r.json.result, balance);
    assert.deepEqual(singles[3]!.json.result, block5);
    // A client batch (one chunk).
    const batch = await post(
      url,
      Array.from({ length: 4 }, (_, i) => ({
        jsonrpc: "2.0",
        id: i,
        method: "eth_call",
        params: [{ to: "0x00000000000000000000000000000000000000aa", data: `0x0${i}` }, "latest"],
      })),
    );
    assert.equal(batch.status, 200);
    assert.equal(batch.json.length, 4);
    for (const el of batch.json) assert.equal(el.result, "0x");
    // WebSocket.
    const ws = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`);
    const wsAnswer = await ws.call("eth_getBlockByNumber", ["0x5", false]);
    assert.deepEqual(wsAnswer.result, block5);
    ws.close();

    // The slow node had every read first; every one was answered by the copy and cancelled there.
    const metrics = await (await fetch(`${gw.metricsBase}/metrics`)).text();
    const won = sample(metrics, "rpcgw_upstream_hedges_total", 'network="eth",outcome="won"');
    assert.ok(won >= 3, `hedges won: ${won}`);
    assert.equal(
      sample(metrics, "rpcgw_upstream_requests_total", 'network="eth",upstream="slow",outcome="cancelled"'),
      won,
    );
    await eventually(
      () => slow.closedUnanswered >= won,
      "the slow node sees its exchanges closed unanswered",
    );
    const pool = gw.plane.context.upstreams.get("eth")!;
    const slowState = () => pool.describe().find((u) => u.id === "slow")!;
    // The stub can see its socket closed before the gateway has settled the aborted exchange (a loaded
    // machine runs the two in either order): the slot is released once that settles.
    await eventually(
      () => slowState().inFlight === 0,
      "the slow node's cancelled exchanges release their slots",
    );
    assert.equal(slowState().breakerOpen, false, "a cancelled exchange is no failure");

    // Counted once for the tenant: 4 singles + 4 batch elements + 1 over WS = 9, in usage and in the quota.
    const mine = usage.rows.filter((r) => r.workspaceId === WORKSPACE);
    assert.equal(
      mine.reduce((n, r) => n + (r.units ?? 1), 0),
      9,
    );
    assert.equal(await quota.waitFor(WORKSPACE, 9), 9);
    // No second count arrives later: every loser has settled (above), and one more call's count, flushed
    // after anything they could still have added, lands on exactly 10.
    const marker = await post(url, { jsonrpc: "2.0", id: 99, method: "eth_chainId", params: [] });
    assert.equal(marker.status, 200, marker.text);
    assert.equal(await quota.waitFor(WORKSPACE, 10), 10, "no second count arrives later");
  });

  it("never hedges a send: the slow node sees exactly one eth_sendRawTransaction, mined once", async () => {
    // Both nodes slow on sends (whichever gets it takes 600 ms, far past the 50 ms hedge delay).
    slow.methodDelayMs.set("eth_sendRawTransaction", 600);
    fast.methodDelayMs.set("eth_sendRawTransaction", 600);
    const raw = await signedTransfer(anvil.httpUrl);
    const r = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] });
    assert.equal(r.status, 200, r.text);
    const hash = r.json?.result as string;
    assert.match(String(hash), /^0x[0-9a-f]{64}$/, r.text);
    assert.equal(slow.count("eth_sendRawTransaction") + fast.count("eth_sendRawTransaction"), 1);
    assert.equal(slow.count("eth_sendRawTransaction"), 1, "the send went to the heavily weighted node");
    // Anvil answers a send once the transaction is in its pool; on a loaded machine its automined block can
    // land a moment later, so the receipt is polled (null until then) rather than read once.
    let receipt: { status: string } | null = null;
    await eventually(async () => {
      receipt = (await rpc(anvil.httpUrl, "eth_getTransactionReceipt", [hash])) as { status: string } | null;
      return receipt !== null;
    }, "the send's receipt");
    assert.equal(receipt!.status, "0x1");
    const metrics = await (await fetch(`${gw.metricsBase}/metrics`)).text();
    assert.equal(sample(metrics, "rpcgw_upstream_hedges_total", 'network="eth",outcome="won"'), 0);
    assert.equal(sample(metrics, "rpcgw_upstream_hedges_total", 'network="eth",outcome="lost"'), 0);
  });
});

/**
 * Empty answers and head integrity against a real anvil: `lagging` proxies to anvil but reports a head 3
 * blocks behind and answers null for anything above it (and for transaction lookups), as a node that has
 * not caught up does; `ahead` is a plain counting proxy. The response cache is on and stores on the
 * first request, so a cached null would show.
 */
describe("data plane empty answers and head integrity (anvil, a lagging proxy, a lying stub)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let lagging: StubUpstream;
  let ahead: StubUpstream;
  let gw: Gateway;
  let key = "";
  let url = "";
  let head = 0;

  const hex = (n: number) => `0x${n.toString(16)}`;
  const blockOf = (params: unknown) => {
    const p = (params as unknown[] | undefined)?.[0];
    return typeof p === "string" && /^0x[0-9a-f]{1,12}$/i.test(p) ? Number.parseInt(p, 16) : -1;
  };

  before(async () => {
    anvil = await startAnvil();
  });
  after(async () => {
    await anvil.stop();
  });

  beforeEach(async () => {
    await rpc(anvil.httpUrl, "anvil_mine", ["0x3"]);
    head = Number.parseInt((await rpc(anvil.httpUrl, "eth_blockNumber")) as string, 16);
    lagging = await new StubUpstream(anvil.httpUrl).start();
    ahead = await new StubUpstream(anvil.httpUrl).start();
    lagging.fixedHead = true;
    lagging.head = head - 3;
    lagging.nullWhen = (method, params) =>
      (method.startsWith("eth_getBlockBy") && blockOf(params) > lagging.head) ||
      method === "eth_getTransactionReceipt" ||
      method === "eth_getTransactionByHash";
    gw = await startGateway(
      { CACHE_ADMISSION: "first", HEALTH_MAX_LAG_BLOCKS: "10", HEDGE_ENABLED: "false" },
      async (s) => {
        await s.putNetwork(
          evmNetwork("eth", [
            { id: "lagging", httpUrl: lagging.url, weight: 1000 },
            { id: "ahead", httpUrl: ahead.url, weight: 1 },
          ]),
        );
        key = await s.putKey();
      },
    );
    url = `${gw.base}/eth/rpc?apikey=${key}`;
    const pool = gw.plane.context.upstreams.get("eth")!;
    await eventually(() => pool.bestHead() >= head, "health checks saw the heads");
  });

  afterEach(async () => {
    await gw.stop();
    await lagging.stop();
    await ahead.stop();
  });

  it("a null for a block or transaction the lagging node has not reached is asked again on the node that has it (HTTP, batch, WS), and never cached", async () => {
    // A real transaction in the newest block, which the lagging node does not have.
    const raw = await signedTransfer(anvil.httpUrl);
    const txHash = (await rpc(anvil.httpUrl, "eth_sendRawTransaction", [raw])) as string;
    head = Number.parseInt((await rpc(anvil.httpUrl, "eth_blockNumber")) as string, 16);
    const pool = gw.plane.context.upstreams.get("eth")!;
    await eventually(() => pool.bestHead() === head, "the new head is seen");

    const receipt = await post(url, {
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getTransactionReceipt",
      params: [txHash],
    });
    assert.equal(receipt.json.result?.transactionHash, txHash, receipt.text);
    assert.equal(lagging.count("eth_getTransactionReceipt"), 1, "asked the lagging node first");
    assert.equal(ahead.count("eth_getTransactionReceipt"), 1, "then the node with a higher head");

    const want = await rpc(anvil.httpUrl, "eth_getBlockByNumber", [hex(head), false]);
    const block = await post(url, {
      jsonrpc: "2.0",
      id: 2,
      method: "eth_getBlockByNumber",
      params: [hex(head), false],
    });
    assert.deepEqual(block.json.result, want);
    const [inBatch] = (
      await post(url, [
        { jsonrpc: "2.0", id: 3, method: "eth_getBlockByNumber", params: [hex(head - 1), false] },
      ])
    ).json;
    assert.equal(inBatch.result?.number, hex(head - 1));
    const ws = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`);
    const viaWs = await ws.call("eth_getTransactionByHash", [txHash]);
    assert.equal(viaWs.result?.hash, txHash);
    ws.close();
    const metrics = await (await fetch(`${gw.metricsBase}/metrics`)).text();
    assert.ok(sample(metrics, "rpcgw_upstream_empty_retries_total", 'network="eth",outcome="found"') >= 3);

    // A block no node has yet: null (nobody to ask), twice upstream: a null is never cached.
    const future = { jsonrpc: "2.0", id: 4, method: "eth_getBlockByNumber", params: [hex(head + 2), false] };
    lagging.reset();
    ahead.reset();
    for (let i = 0; i < 2; i++) {
      const r = await post(url, future);
      assert.equal(r.json.result, null);
      assert.equal(r.headers.get("x-cache"), "MISS");
    }
    // Exactly these params: the chain watch reads other blocks by number through the same nodes meanwhile.
    const futureReads = () =>
      lagging.countExact("eth_getBlockByNumber", future.params) +
      ahead.countExact("eth_getBlockByNumber", future.params);
    assert.equal(futureReads(), 2);
    // Once the chain gets there, the block is served: the earlier null did not poison the cache.
    await rpc(anvil.httpUrl, "anvil_mine", ["0x2"]);
    lagging.head = head + 2;
    // At least there (a block mined by anything else meanwhile moves it further, which serves as well).
    await eventually(() => pool.bestHead() >= head + 2, "the head moved", 15_000);
    const later = await post(url, future);
    assert.equal(later.json.result?.number, hex(head + 2), later.text);
  });

  it("one upstream reporting a head far beyond the others cannot set the network head", async () => {
    const liar = await new StubUpstream().start();
    try {
      liar.head = 1_000_000_000;
      lagging.head = head; // a second honest node at the same head
      await gw.seeder.putNetwork(
        evmNetwork("eth", [
          { id: "liar", httpUrl: liar.url },
          { id: "lagging", httpUrl: lagging.url },
          { id: "ahead", httpUrl: ahead.url },
        ]),
      );
      await gw.seeder.publish({ type: "networks.update" });
      const pool = () => gw.plane.context.upstreams.get("eth")!;
      await eventually(
        () =>
          pool()
            .describe()
            .find((u) => u.id === "liar")?.head === 1_000_000_000,
        "liar probed",
      );
      assert.equal(pool().bestHead(), head);
      assert.equal(pool().cacheHead(), head);
      assert.equal(pool().healthyCount(), 3, "the honest nodes are not taken for laggards");
      // The honest nodes keep serving, and an answer carrying the liar's head does not move the cache's
      // (batches: never cached, so each goes to a node).
      lagging.reset();
      ahead.reset();
      for (let i = 0; i < 30; i++) await post(url, [{ jsonrpc: "2.0", id: i, method: "eth_chainId" }]);
      assert.ok(lagging.count("eth_chainId") + ahead.count("eth_chainId") > 0, "honest nodes still selected");
      // The liar still serves calls (selection weighs latency too, so on a loaded machine it can go
      // unpicked for a while: asked until it answered one, at most 300 calls)...
      for (let i = 0; i < 300 && liar.count("eth_gasPrice") === 0; i++) {
        await post(url, [{ jsonrpc: "2.0", id: i, method: "eth_gasPrice" }]);
      }
      assert.ok(liar.count("eth_gasPrice") > 0, "the liar is still selected");
      // ... but eth_blockNumber is the served head, never its own (forward/served-head.ts).
      for (let i = 0; i < 30; i++) {
        const r = await post(url, [{ jsonrpc: "2.0", id: i, method: "eth_blockNumber" }]);
        assert.equal(r.json[0].result, hex(head));
      }
      assert.equal(pool().cacheHead(), head);

      // Two upstreams far apart: nothing says which is wrong; the lower head is the network's, both serve.
      await gw.seeder.putNetwork(
        evmNetwork("eth", [
          { id: "liar", httpUrl: liar.url },
          { id: "ahead", httpUrl: ahead.url },
        ]),
      );
      await gw.seeder.publish({ type: "networks.update" });
      await eventually(() => pool().describe().length === 2, "two upstreams");
      assert.equal(pool().bestHead(), head);
      assert.equal(pool().healthyCount(), 2);
    } finally {
      await liar.stop();
    }
  });
});
