import assert from "node:assert/strict";
import net from "node:net";
import type { RequestLog } from "../../../../data-plane/src/requestlog/recorder";
import type { NodeRecord } from "../../../../shared/src/redis/records";
import type { RequestLogRecord } from "../../../../shared/src/requestlog/contract";
import { type Anvil, startAnvil } from "../../../helpers/anvil";
import { eventually } from "../../../helpers/eventually";
import { evmNetwork } from "../../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "../harness";

const NODE_ID = "8c2e4f60-3d4e-4f70-8b12-c3d4e5f6a7b8";

/**
 * A dedicated node's HTTP endpoint is the same HTTP transport as the app endpoints (issue 25's drift):
 * the same Content-Type check, the slow-body timeout, the client address from X-Forwarded-For only from
 * TRUSTED_PROXIES, and X-Cache.
 */
describe("data plane: a dedicated node's HTTP endpoint is the app endpoints' HTTP transport", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let gw: Gateway;
  let nodeKey = "";
  let appKey = "";
  const log: RequestLogRecord[] = [];
  const requestLog: RequestLog = {
    wants: () => true,
    record: (r) => void log.push({ ...r }),
    flush: async () => {},
    close: async () => {},
  };
  const nodeUrl = () => `${gw.base}/nodes/${NODE_ID}/${encodeURIComponent(nodeKey)}`;
  const appUrl = () => `${gw.base}/eth/rpc?apikey=${appKey}`;
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" });

  before(async () => {
    anvil = await startAnvil();
    gw = await startGateway(
      // The peer (this process, 127.0.0.1) is a trusted proxy: X-Forwarded-For names the client.
      { TRUSTED_PROXIES: "127.0.0.1/32", BODY_TIMEOUT_MS: "200" },
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "u1", httpUrl: anvil.httpUrl }]));
        appKey = await s.putKey({ workspaceId: "ws-t", appId: "app-t" });
        nodeKey = await s.putKey({ kind: "node", appId: null, nodeId: NODE_ID, workspaceId: "ws-t" });
      },
      { requestLog },
    );
    const rec: NodeRecord = {
      nodeId: NODE_ID,
      workspaceId: "ws-t",
      protocol: "EVM",
      httpUrl: anvil.httpUrl,
      wsUrl: anvil.wsUrl,
      status: "SYNCED",
    };
    await gw.ns.redis.client().set(gw.seeder.names.node(NODE_ID), JSON.stringify(rec));
    await gw.seeder.publish({ type: "node.update", nodeId: NODE_ID });
  });

  after(async () => {
    await gw?.stop();
    await anvil?.stop();
  });

  it("the same Content-Type check: a look-alike media type is 415 on both, a parameter is fine", async () => {
    for (const url of [appUrl(), nodeUrl()]) {
      const bad = await post(url, body, { "content-type": "application/jsonl" });
      assert.equal(bad.status, 415, url);
      assert.equal(bad.json.error.data.reason, "unsupported_media_type");
      const ok = await post(url, body, { "content-type": "Application/JSON; charset=utf-8" });
      assert.equal(ok.status, 200, url);
    }
  });

  it("X-Cache on a cacheable single call (stored on its second sight, a hit on the third)", async () => {
    const seen: string[] = [];
    const genesis = JSON.stringify({
      jsonrpc: "2.0",
      id: 2,
      method: "eth_getBlockByNumber",
      params: ["0x0", false],
    });
    // The node's pool has seen anvil's head first (an eth_blockNumber through the endpoint feeds its head
    // tracking): before that, a block's answer is not known to be cacheable, on a slow machine included.
    const head = (await post(anvil.httpUrl, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })).json
      .result;
    await eventually(
      async () =>
        (await post(nodeUrl(), { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })).json.result === head,
      "the node's pool sees anvil's head",
    );
    for (let i = 0; i < 3; i++) seen.push((await post(nodeUrl(), genesis)).headers.get("x-cache") ?? "");
    assert.deepEqual(seen, ["MISS", "MISS", "HIT"]);
  });

  it("the client address comes from X-Forwarded-For when the peer is a trusted proxy (request log)", async () => {
    const r = await post(nodeUrl(), body, { "x-forwarded-for": "127.8.9.10" });
    assert.equal(r.status, 200);
    const id = r.headers.get("x-request-id")!;
    const rec = log.find((x) => x.requestId === id);
    assert.ok(rec, "no request-log record");
    assert.equal(rec.transport, "node");
    assert.equal(rec.clientIp, "127.8.9.0/24");
    // A dedicated node weighs every method 1 (docs/compute-units.md): the answer and the record say so.
    assert.equal(r.headers.get("x-compute-units"), "1");
    assert.equal(rec.computeUnits, 1);
  });

  it("a batch on the node endpoint reports its compute units: one per request object", async () => {
    const batch = JSON.stringify([
      { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] },
      { jsonrpc: "2.0", id: 2, method: "eth_blockNumber", params: [] },
      { jsonrpc: "2.0", id: 3, method: "eth_chainId", params: [] },
    ]);
    const r = await post(nodeUrl(), batch);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("x-compute-units"), "3");
  });

  it("a body that does not arrive in time: the connection is closed (slow-body timeout)", async () => {
    const port = gw.port();
    const closed = await new Promise<boolean>((resolve, reject) => {
      const sock = net.connect(port, "127.0.0.1", () => {
        const path = `/nodes/${NODE_ID}/${encodeURIComponent(nodeKey)}`;
        sock.write(
          `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
        );
      });
      let answer = "";
      sock.on("data", (d) => {
        answer += String(d);
      });
      sock.on("error", reject);
      sock.on("close", () => resolve(answer === ""));
    });
    assert.ok(closed, "closed without an answer");
    // The endpoint serves on.
    assert.equal((await post(nodeUrl(), body)).status, 200);
  });
});
