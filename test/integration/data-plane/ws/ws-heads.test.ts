import assert from "node:assert/strict";
import { eventually } from "../../../helpers/eventually";
import { type SubstrateTestNode, startSubstrateTestNode } from "../../../substrate-node";
import { type Gateway, startGateway } from "../harness";
import { type StubWsUpstream, startStubWsUpstream } from "./stub-ws-upstream";
import { TestWsClient, wsNetwork } from "./ws-client";

/** The head numbers (and hashes) a client got on subscription `id`, in order. */
function heads(c: TestWsClient, id: string): { n: number; hash: string | undefined }[] {
  return c.notifications(id).map((m) => ({
    n: Number.parseInt(m.params.result.number, 16),
    hash: m.params.result.hash,
  }));
}

async function metric(gw: Gateway, name: string): Promise<number> {
  const text = await (await fetch(`${gw.metricsBase}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  assert.ok(line !== undefined, `no ${name} on /metrics`);
  return Number(line.split(" ")[1]);
}

/**
 * New heads never go back over WebSocket (ws/hub.ts headAdvances): after a failover re-subscribes on a
 * node that is behind, the client sees each head once, in order; a reorg at the highest height still
 * reaches it. EVM through stub upstreams whose heads the test scripts; Substrate through two Substrate
 * test nodes (the named stand-in).
 */
describe("WebSocket new heads never go back (failover to a node behind)", function () {
  this.timeout(30_000);

  describe("EVM eth_subscribe newHeads", () => {
    let a: StubWsUpstream;
    let b: StubWsUpstream;
    let gw: Gateway;
    let key = "";

    before(async () => {
      a = await startStubWsUpstream();
      b = await startStubWsUpstream();
      gw = await startGateway({ UPSTREAM_WS_CONNECTIONS: "1" }, async (s) => {
        await s.putNetwork(
          wsNetwork("eth", "EVM", [
            { id: "a", httpUrl: a.httpUrl, wsUrl: a.wsUrl },
            { id: "b", httpUrl: b.httpUrl, wsUrl: b.wsUrl },
          ]),
        );
        key = await s.putKey();
      });
    });

    after(async () => {
      await gw?.stop();
      await a?.close();
      await b?.close();
    });

    it("10, 11, 12, failover, 11, 12, 13: the clients see 10, 11, 12, 13 once each; a reorg at 13 passes, a lower head after it does not", async () => {
      const url = `ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`;
      const c1 = await TestWsClient.open(url);
      const c2 = await TestWsClient.open(url);
      try {
        const s1 = (await c1.call("eth_subscribe", ["newHeads"])).result;
        const s2 = (await c2.call("eth_subscribe", ["newHeads"])).result;
        const [used, other] = a.subscriptions() === 1 ? [a, b] : [b, a];
        for (const n of [10, 11, 12]) used.emitHeadAt(n);
        await c1.until(() => heads(c1, s1).length === 3, 5000, "10, 11, 12");
        const dropped = await metric(gw, "rpcgw_ws_heads_dropped_total");
        await used.kill();
        await c1.until(() => other.subscriptions() === 1, 5000, "re-subscription on the other upstream");
        for (const n of [11, 12, 13]) other.emitHeadAt(n);
        await c1.until(() => heads(c1, s1).length >= 4, 5000, "13 after the failover");
        // A reorg: another block at the highest height reaches the clients; a head below it does not,
        // the next one does.
        other.emitHeadAt(13, `0x${"cd".repeat(32)}`);
        other.emitHeadAt(12);
        other.emitHeadAt(14);
        for (const [c, s] of [
          [c1, s1],
          [c2, s2],
        ] as const) {
          await c.until(() => heads(c, s).some((h) => h.n === 14), 5000, "14");
          assert.deepEqual(
            heads(c, s).map((h) => h.n),
            [10, 11, 12, 13, 13, 14],
          );
          assert.equal(heads(c, s)[4]!.hash, `0x${"cd".repeat(32)}`);
        }
        // 11 and 12 after the failover, and 12 after the reorg.
        assert.equal((await metric(gw, "rpcgw_ws_heads_dropped_total")) - dropped, 3);
        // Requests on the same socket still work.
        assert.equal((await c1.call("eth_chainId")).result, "0x7a69");
      } finally {
        c1.terminate();
        c2.terminate();
      }
    });
  });

  describe("the upstream socket goes to a node at the head", () => {
    let ahead: StubWsUpstream;
    let behind: StubWsUpstream;
    let gw: Gateway;
    let key = "";
    // Six networks over the same two nodes: six hubs, each choosing its socket's node for itself.
    const slugs = ["n1", "n2", "n3", "n4", "n5", "n6"];

    before(async () => {
      ahead = await startStubWsUpstream();
      behind = await startStubWsUpstream();
      // Two blocks apart (within HEALTH_MAX_LAG_BLOCKS: both healthy). No subscriptions yet: nothing sent.
      ahead.emitHeadAt(0x102);
      gw = await startGateway(
        { UPSTREAM_WS_CONNECTIONS: "1", HEALTH_CHECK_INTERVAL_MS: "100" },
        async (s) => {
          for (const slug of slugs) {
            await s.putNetwork(
              wsNetwork(slug, "EVM", [
                { id: "ahead", httpUrl: ahead.httpUrl, wsUrl: ahead.wsUrl },
                { id: "behind", httpUrl: behind.httpUrl, wsUrl: behind.wsUrl },
              ]),
            );
          }
          key = await s.putKey();
        },
      );
      const known = () =>
        slugs.every((slug) =>
          gw.plane.context.upstreams
            .get(slug)
            ?.describe()
            .every((u) => u.head >= 0),
        );
      await eventually(known, "the health checks seeing both heads");
    });

    after(async () => {
      await gw?.stop();
      await ahead?.close();
      await behind?.close();
    });

    it("each network's subscription is made on the node ahead (one chance in 64 by a coin's toss)", async () => {
      const clients: TestWsClient[] = [];
      try {
        for (const slug of slugs) {
          const c = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/${slug}/rpc?apikey=${key}`);
          clients.push(c);
          assert.equal(typeof (await c.call("eth_subscribe", ["newHeads"])).result, "string");
        }
        assert.equal(ahead.subscriptions(), slugs.length);
        assert.equal(behind.subscriptions(), 0);
      } finally {
        for (const c of clients) c.terminate();
      }
    });
  });

  describe("Substrate chain_subscribeNewHeads", () => {
    let first: SubstrateTestNode;
    let second: SubstrateTestNode;
    let gw: Gateway;
    let key = "";

    before(async () => {
      // One genesis time, so the two nodes build the same headers (the same chain).
      const genesisTimeMs = Date.now() - 60_000;
      [first, second] = await Promise.all([
        startSubstrateTestNode({ blockTimeMs: 0, startBlock: 10, genesisTimeMs }),
        startSubstrateTestNode({ blockTimeMs: 0, startBlock: 10, genesisTimeMs }),
      ]);
      gw = await startGateway({ UPSTREAM_WS_CONNECTIONS: "1" }, async (s) => {
        await s.putNetwork(
          wsNetwork("dot", "SUBSTRATE", [
            { id: "first", httpUrl: first.httpUrl, wsUrl: first.wsUrl },
            { id: "second", httpUrl: second.httpUrl, wsUrl: second.wsUrl },
          ]),
        );
        key = await s.putKey();
      });
    });

    after(async () => {
      await gw?.stop();
      await first?.close();
      await second?.close();
    });

    it("a failover to a node at an older head: its current head and the ones the client has are not sent again", async () => {
      const c = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/dot/rpc?apikey=${key}`);
      try {
        const s = (await c.call("chain_subscribeNewHeads", [])).result;
        await c.until(() => heads(c, s).length === 1, 5000, "the current head");
        const used = first.wsConnections() > 0 ? first : second;
        const other = used === first ? second : first;
        used.produceBlocks(2);
        await c.until(() => heads(c, s).length === 3, 5000, "11, 12");
        await used.close();
        // The other node, still at 10, answers the re-subscription with its current head (10), then
        // imports 11, 12 (the same blocks) and 13.
        await c.until(() => other.wsConnections() > 0, 5000, "re-subscription on the other node");
        other.produceBlocks(3);
        await c.until(() => heads(c, s).some((h) => h.n === 13), 5000, "13");
        other.produceBlocks(1);
        await c.until(() => heads(c, s).some((h) => h.n === 14), 5000, "14");
        assert.deepEqual(
          heads(c, s).map((h) => h.n),
          [10, 11, 12, 13, 14],
        );
      } finally {
        c.terminate();
      }
    });
  });
});
