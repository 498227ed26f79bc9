import assert from "node:assert/strict";
import type { RequestLog } from "../../../../data-plane/src/requestlog/recorder";
import type { RequestLogRecord } from "../../../../shared/src/requestlog/contract";
import { type Anvil, startAnvil } from "../../../helpers/anvil";
import { evmNetwork } from "../../../helpers/seed-redis";
import { type Gateway, post, sleep, startGateway } from "../harness";
import { TestWsClient } from "../ws/ws-client";

const NODE_ID = "7a1c2a4e-1b2c-4d5e-8f90-a1b2c3d4e5f6";
const WS_ID = "3b7d9c1e-2f4a-4b6c-8d0e-1f2a3b4c5d6e";

/** Every record the node endpoint hands over (100% sampling), in order. */
class CapturingLog implements RequestLog {
  records: RequestLogRecord[] = [];
  wants(): boolean {
    return true;
  }
  record(r: RequestLogRecord): void {
    this.records.push(r);
  }
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}

describe("data plane: request log on a dedicated node's endpoint (transport node)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let gw: Gateway;
  let key: string;
  const log = new CapturingLog();
  const url = () => `${gw.base}/nodes/${NODE_ID}/${encodeURIComponent(key)}`;
  const byId = (id: string) => log.records.filter((r) => r.requestId === id);

  before(async () => {
    anvil = await startAnvil();
    gw = await startGateway(
      {},
      async (s) => {
        await s.putNetwork(evmNetwork("eth-test", [{ id: "u1", httpUrl: anvil.httpUrl }]));
      },
      { requestLog: log },
    );
    key = await gw.seeder.putKey({
      kind: "node",
      appId: null,
      nodeId: NODE_ID,
      workspaceId: WS_ID,
      rpcMethods: "SAFE",
    });
    await gw.ns.redis.client().set(
      gw.seeder.names.node(NODE_ID),
      JSON.stringify({
        nodeId: NODE_ID,
        workspaceId: WS_ID,
        protocol: "EVM",
        httpUrl: anvil.httpUrl,
        wsUrl: anvil.wsUrl,
        status: "SYNCED",
      }),
    );
    await gw.seeder.publish({ type: "node.update", nodeId: NODE_ID });
    await sleep(100);
  });
  after(async () => {
    await gw?.stop();
    await anvil?.stop();
  });

  it("HTTP: each request object with the response's status, node network, truncated client address", async () => {
    const r = await post(url(), [
      { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
      { jsonrpc: "2.0", id: 2, method: "anvil_mine", params: [] },
    ]);
    assert.equal(r.status, 200);
    const recs = byId(r.headers.get("x-request-id")!);
    assert.deepEqual(
      recs.map((x) => [x.item, x.method, x.category, x.httpStatus]),
      [
        [0, "eth_chainId", "Success", 200],
        [1, "anvil_mine", "Client Error", 200],
      ],
    );
    for (const x of recs) {
      assert.equal(x.transport, "node");
      assert.equal(x.network, `node-${NODE_ID}`);
      assert.equal(x.workspaceId, WS_ID);
      assert.equal(x.appId, null);
      assert.equal(x.clientIp, "127.0.0.0/24");
      assert.ok(x.latencyMs >= 0);
    }
    const bad = await post(url(), "{nope");
    assert.equal(bad.status, 400);
    const [p] = byId(bad.headers.get("x-request-id")!);
    assert.equal(p!.httpStatus, 400);
    assert.equal(p!.category, "Client Error");
  });

  it("WebSocket: records with HTTP status 0 and the client's address", async () => {
    const before = log.records.length;
    const ws = await TestWsClient.open(
      `ws://127.0.0.1:${gw.port()}/nodes/${NODE_ID}/${encodeURIComponent(key)}`,
    );
    try {
      assert.equal((await ws.call("eth_chainId")).result, "0x7a69");
    } finally {
      ws.close();
    }
    const rec = log.records.slice(before).find((r) => r.method === "eth_chainId");
    assert.ok(rec, "no record for the WebSocket call");
    assert.equal(rec.transport, "node");
    assert.equal(rec.httpStatus, 0);
    assert.equal(rec.clientIp, "127.0.0.0/24");
  });
});
