import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { Redis } from "ioredis";
import type { NodeRecord } from "../../../../shared/src/redis/records";
import { type Anvil, startAnvil } from "../../../helpers/anvil";
import { eventually } from "../../../helpers/eventually";
import { TEST_REDIS_URL } from "../../../helpers/redis";
import { evmNetwork } from "../../../helpers/seed-redis";
import { type Gateway, post, type RpcResponse, startGateway } from "../harness";
import { TestWsClient } from "../ws/ws-client";

/**
 * Dedicated nodes, Safe or Unsafe, never run a method that makes the node reach past itself (issue 24):
 * a fork URL (`anvil_reset` with forking params, `anvil_setRpcUrl`, `hardhat_reset`), a peer, a new RPC
 * listener, a file on the host. A real anvil sits behind the node endpoint; a loopback TCP listener stands
 * for the address a tenant would make it connect to and counts every connection. The check that nothing
 * reached anvil: its chain (block number, fork metadata) is unchanged, and the listener saw no one.
 */
const NODE_ID = "7a2b3c4d-1b2c-4d5e-8f90-a1b2c3d4e5f7";

async function rpc(url: string, method: string, params?: unknown): Promise<RpcResponse> {
  return post(url, { jsonrpc: "2.0", id: 1, method, ...(params === undefined ? {} : { params }) });
}

describe("data plane: dedicated nodes never reach past themselves (real anvil)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let gw: Gateway;
  let redis: Redis;
  let unsafeKey = "";
  let safeKey = "";
  let lure: Server;
  let lureUrl = "";
  const lured: Socket[] = [];

  const direct = (method: string, params?: unknown) => rpc(anvil.httpUrl, method, params);
  const nodeUrl = (key: string) => `${gw.base}/nodes/${NODE_ID}/${encodeURIComponent(key)}`;
  const blockNumber = async () => Number((await direct("eth_blockNumber")).json.result);

  before(async () => {
    lure = createServer((s) => {
      lured.push(s);
      s.destroy();
    });
    await new Promise<void>((resolve) => lure.listen(0, "127.0.0.1", resolve));
    lureUrl = `http://127.0.0.1:${(lure.address() as { port: number }).port}/`;
    anvil = await startAnvil();
    gw = await startGateway({}, async (s) => {
      await s.putNetwork(evmNetwork("eth-test", [{ id: "u1", httpUrl: anvil.httpUrl }]));
    });
    redis = new Redis(TEST_REDIS_URL);
    unsafeKey = await gw.seeder.putKey({ kind: "node", appId: null, nodeId: NODE_ID, rpcMethods: "UNSAFE" });
    safeKey = await gw.seeder.putKey({ kind: "node", appId: null, nodeId: NODE_ID, rpcMethods: "SAFE" });
    const rec: NodeRecord = {
      nodeId: NODE_ID,
      workspaceId: "ws-test",
      protocol: "EVM",
      httpUrl: anvil.httpUrl,
      wsUrl: anvil.wsUrl,
      status: "SYNCED",
    };
    await redis.set(gw.seeder.names.node(NODE_ID), JSON.stringify(rec));
    await gw.seeder.publish({ type: "node.update", nodeId: NODE_ID });
    // The endpoint serves once the record is read (wait for it, not a fixed time).
    await eventually(
      async () => (await rpc(nodeUrl(unsafeKey), "eth_chainId")).status === 200,
      "the node endpoint serving",
      5_000,
    );
    // Some chain to lose: a reset would take it back to block 0.
    await direct("anvil_mine", ["0x5"]);
  });

  after(async () => {
    redis?.disconnect();
    await gw?.stop();
    await anvil?.stop();
    for (const s of lured) s.destroy();
    await new Promise<void>((resolve) => (lure ? lure.close(() => resolve()) : resolve()));
  });

  const forkParams = () => [{ forking: { jsonRpcUrl: lureUrl, blockNumber: 1 } }];
  const attacks = (): [string, unknown][] => [
    ["anvil_reset", forkParams()],
    ["anvil_reset", { forking: { jsonRpcUrl: lureUrl } }],
    ["ANVIL_RESET", forkParams()],
    ["hardhat_reset", forkParams()],
    ["anvil_setRpcUrl", [lureUrl]],
    ["hardhat_setRpcUrl", [lureUrl]],
    ["admin_addPeer", [`enode://${"a".repeat(128)}@127.0.0.1:30303`]],
    ["admin_addTrustedPeer", [`enode://${"a".repeat(128)}@127.0.0.1:30303`]],
    ["admin_startHTTP", ["0.0.0.0", 8545]],
    ["admin_startWS", ["0.0.0.0", 8546]],
    ["debug_writeMemProfile", ["/tmp/x"]],
  ];

  function assertBlocked(r: RpcResponse, method: string): void {
    assert.equal(r.status, 200, `${method}: ${r.text}`);
    assert.equal(r.json.error?.code, -32601, `${method}: ${r.text}`);
    // The gateway's row, not anvil's own "method not found" passed through.
    assert.equal(r.json.error.data?.reason, "method_blocked", `${method}: ${r.text}`);
  }

  it("refuses every connecting method over HTTP, single and batched, in Unsafe and in Safe mode", async () => {
    const height = await blockNumber();
    const before = (await direct("anvil_metadata")).json.result;
    for (const key of [unsafeKey, safeKey]) {
      for (const [method, params] of attacks()) {
        const r = await rpc(nodeUrl(key), method, params);
        assertBlocked(r, method);
        if (key === unsafeKey) assert.match(r.json.error.message, /not available on any endpoint/, method);
      }
      // A batch: a plain call first, then the forking reset, then another.
      const batch = await post(nodeUrl(key), [
        { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" },
        { jsonrpc: "2.0", id: 2, method: "anvil_reset", params: forkParams() },
        { jsonrpc: "2.0", id: 3, method: "anvil_setRpcUrl", params: [lureUrl] },
      ]);
      assert.equal(batch.status, 200);
      assert.equal(batch.json[0].result, `0x${height.toString(16)}`);
      assert.equal(batch.json[1].error.data.reason, "method_blocked");
      assert.equal(batch.json[2].error.data.reason, "method_blocked");
    }
    assert.equal(await blockNumber(), height, "anvil's chain is unchanged");
    assert.deepEqual((await direct("anvil_metadata")).json.result, before, "anvil's fork state is unchanged");
    assert.equal(lured.length, 0, "nothing connected to the address the requests named");
  });

  it("refuses them over WebSocket too, in both modes", async () => {
    const height = await blockNumber();
    for (const key of [unsafeKey, safeKey]) {
      const ws = await TestWsClient.open(
        `ws://127.0.0.1:${gw.port()}/nodes/${NODE_ID}/${encodeURIComponent(key)}`,
      );
      try {
        for (const [method, params] of attacks()) {
          const m = await ws.call(method, params);
          assert.equal(m.error?.code, -32601, `${method}: ${JSON.stringify(m)}`);
          assert.equal(m.error.data?.reason, "method_blocked", method);
        }
      } finally {
        ws.close();
      }
    }
    assert.equal(await blockNumber(), height);
    assert.equal(lured.length, 0);
  });

  it("Safe mode refuses debug_*; Unsafe passes the node's own dev methods (a plain reset, mining) to anvil", async () => {
    const safe = await rpc(nodeUrl(safeKey), "debug_traceTransaction", [`0x${"0".repeat(64)}`]);
    assertBlocked(safe, "debug_traceTransaction");
    assert.match(safe.json.error.message, /rpc-methods is Safe/);
    // Control: the endpoint does forward what stays within the node.
    const height = await blockNumber();
    assert.equal((await rpc(nodeUrl(unsafeKey), "evm_mine")).json.result, "0x0");
    assert.equal(await blockNumber(), height + 1);
    const plain = await rpc(nodeUrl(unsafeKey), "anvil_reset");
    assert.equal(plain.json.error, undefined, plain.text);
    assert.equal(await blockNumber(), 0, "a plain reset reached anvil");
    assert.equal(lured.length, 0);
    // And the gateway is still serving.
    assert.equal((await rpc(nodeUrl(unsafeKey), "eth_chainId")).json.result, "0x7a69");
  });
});
