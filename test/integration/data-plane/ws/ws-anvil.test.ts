import assert from "node:assert/strict";
import { WebSocketProvider } from "ethers";
import { createPublicClient, createWalletClient, http, parseAbiItem, webSocket } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { foundry } from "viem/chains";
import { type Anvil, startAnvil } from "../../../helpers/anvil";
import { type Gateway, startGateway } from "../harness";
import { TestWsClient, wsNetwork } from "./ws-client";

/** anvil's well-known dev account #2 (test-only key). */
const DEV_KEY_2 = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";

/**
 * Init code of a contract whose every call emits `Ping(uint256)` with topic keccak("Ping(uint256)") and
 * data = the call value. Runtime: PUSH32 topic; CALLVALUE; PUSH1 0; MSTORE; PUSH1 32; PUSH1 0; LOG1; STOP.
 */
const PING_TOPIC = "0x48257dc961b6f792c2b78a080dacfed693b660960a702de21cee364e20270e2f";
const RUNTIME = `7f${PING_TOPIC.slice(2)}3460005260206000a100`;
const INIT = `0x${"60"}${(RUNTIME.length / 2).toString(16).padStart(2, "0")}600c60003960${(RUNTIME.length / 2)
  .toString(16)
  .padStart(2, "0")}6000f3${RUNTIME}`;

describe("WebSocket subscriptions against a real node (anvil)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let gw: Gateway;
  let url = "";

  before(async () => {
    anvil = await startAnvil({ blockTimeSec: 1 });
    let key = "";
    gw = await startGateway({}, async (s) => {
      await s.putNetwork(
        wsNetwork("eth", "EVM", [{ id: "anvil", httpUrl: anvil.httpUrl, wsUrl: anvil.wsUrl }]),
      );
      key = await s.putKey();
    });
    url = `ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`;
  });

  after(async () => {
    await gw?.stop();
    await anvil?.stop();
  });

  it("eth_subscribe newHeads delivers mined blocks; two clients share one upstream subscription", async () => {
    const c1 = await TestWsClient.open(url);
    const c2 = await TestWsClient.open(url);
    try {
      const s1 = (await c1.call("eth_subscribe", ["newHeads"])).result;
      const s2 = (await c2.call("eth_subscribe", ["newHeads"])).result;
      await c1.until(() => c1.notifications(s1).length >= 2, 10_000, "two heads");
      await c2.until(() => c2.notifications(s2).length >= 2, 10_000, "two heads");
      const heads = c1.notifications(s1).map((n) => Number.parseInt(n.params.result.number, 16));
      assert.equal(heads[1], heads[0]! + 1);
      assert.match(c1.notifications(s1)[0].params.result.hash, /^0x[0-9a-f]{64}$/);
      assert.equal(gw.plane.ws.upstreamSubscriptionCount("eth"), 1);
    } finally {
      c1.close();
      c2.close();
    }
    await new TestWsClientWaiter().until(() => gw.plane.ws.upstreamSubscriptionCount("eth") === 0);
  });

  it("ethers v6 WebSocketProvider: provider.on('block') receives blocks", async () => {
    const provider = new WebSocketProvider(url);
    try {
      const blocks: number[] = [];
      await new Promise<void>((resolve) => {
        void provider.on("block", (n: number) => {
          blocks.push(n);
          if (blocks.length === 2) resolve();
        });
      });
      assert.equal(blocks[1], blocks[0]! + 1);
      assert.equal((await provider.getNetwork()).chainId, 31337n);
    } finally {
      await provider.destroy();
    }
  });

  it("viem webSocket transport: watchBlockNumber and a logs subscription seeing a real transaction's log", async () => {
    const client = createPublicClient({ chain: foundry, transport: webSocket(url) });
    const seen: bigint[] = [];
    await new Promise<void>((resolve, reject) => {
      const unwatch = client.watchBlockNumber({
        onBlockNumber: (n) => {
          seen.push(n);
          if (seen.length === 2) {
            unwatch();
            resolve();
          }
        },
        onError: reject,
      });
    });
    assert.equal(seen[1], seen[0]! + 1n);

    // Deploy the Ping contract over HTTP, watch its logs over WS, send it a transaction.
    const account = privateKeyToAccount(DEV_KEY_2);
    const wallet = createWalletClient({ account, chain: foundry, transport: http(anvil.httpUrl) });
    const reader = createPublicClient({ chain: foundry, transport: http(anvil.httpUrl) });
    const deployHash = await wallet.deployContract({ abi: [], bytecode: INIT as `0x${string}` });
    const deployed = await reader.waitForTransactionReceipt({ hash: deployHash, pollingInterval: 100 });
    const address = deployed.contractAddress!;
    const logs = await new Promise<unknown[]>((resolve, reject) => {
      const unwatch = client.watchEvent({
        address,
        event: parseAbiItem("event Ping(uint256 value)"),
        onLogs: (l) => {
          unwatch();
          resolve(l);
        },
        onError: reject,
      });
      setTimeout(() => {
        void wallet.sendTransaction({ to: address, value: 7n });
      }, 300);
    });
    const log = logs[0] as { address: string; topics: string[]; args: { value: bigint } };
    assert.equal(log.address.toLowerCase(), address.toLowerCase());
    assert.equal(log.topics[0], PING_TOPIC);
    assert.equal(log.args.value, 7n);
    await client.transport.getRpcClient().then((c) => c.close());
  });
});

/** Polls a condition without a socket. */
class TestWsClientWaiter {
  async until(pred: () => boolean, ms = 5000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > deadline) throw new Error("timed out");
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
