import assert from "node:assert/strict";
import { JsonRpcProvider, parseEther, Wallet } from "ethers";
import { createPublicClient, createWalletClient, http, parseEther as viemParseEther } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { foundry } from "viem/chains";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, startGateway } from "./harness";

/** anvil's well-known dev accounts #0 and #1 (test-only keys). */
const DEV_KEY_0 = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
const DEV_KEY_1 = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

describe("real clients through the data plane (anvil)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let gw: Gateway;
  let url: string;

  before(async () => {
    anvil = await startAnvil();
    let key = "";
    gw = await startGateway({}, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "anvil", httpUrl: anvil.httpUrl }]));
      key = await s.putKey();
    });
    url = `${gw.base}/eth/rpc?apikey=${key}`;
  });

  after(async () => {
    await gw?.stop();
    await anvil?.stop();
  });

  it("ethers v6 JsonRpcProvider reads blocks and sends a signed transaction", async () => {
    const provider = new JsonRpcProvider(url, undefined, { pollingInterval: 100 });
    try {
      const net = await provider.getNetwork();
      assert.equal(net.chainId, 31337n);
      const block = await provider.getBlock(0);
      assert.equal(block?.number, 0);
      const wallet = new Wallet(DEV_KEY_0, provider);
      const to = Wallet.createRandom().address;
      const tx = await wallet.sendTransaction({ to, value: parseEther("1.5") });
      const receipt = await tx.wait();
      assert.equal(receipt?.status, 1);
      assert.equal(await provider.getBalance(to, receipt!.blockNumber), parseEther("1.5"));
      const mined = await provider.getBlock(receipt!.blockNumber);
      assert.equal(mined?.hash, receipt!.blockHash);
    } finally {
      provider.destroy();
    }
  });

  it("viem http transport reads blocks and sends a signed transaction", async () => {
    const publicClient = createPublicClient({ chain: foundry, transport: http(url) });
    const account = privateKeyToAccount(DEV_KEY_1);
    const walletClient = createWalletClient({ account, chain: foundry, transport: http(url) });
    assert.equal(await publicClient.getChainId(), 31337);
    const genesis = await publicClient.getBlock({ blockNumber: 0n });
    assert.equal(genesis.number, 0n);
    const to = "0x000000000000000000000000000000000000dEaD" as const;
    const hash = await walletClient.sendTransaction({ to, value: viemParseEther("0.25") });
    const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 100 });
    assert.equal(receipt.status, "success");
    const balance = await publicClient.getBalance({ address: to, blockNumber: receipt.blockNumber });
    assert.ok(balance >= viemParseEther("0.25"));
  });

  it("viem batch transport (JSON-RPC batches) works too", async () => {
    const client = createPublicClient({ chain: foundry, transport: http(url, { batch: { batchSize: 10 } }) });
    const [chainId, block, gasPrice] = await Promise.all([
      client.getChainId(),
      client.getBlockNumber({ cacheTime: 0 }),
      client.getGasPrice(),
    ]);
    assert.equal(chainId, 31337);
    assert.equal(typeof block, "bigint");
    assert.equal(typeof gasPrice, "bigint");
  });
});
