import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { NodeClient } from "../../../../data-plane/src/nodes/node-client";
import { categoryOfNodeError, GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { NodeRecord } from "../../../../shared/src/redis/records";

/** A loopback node whose answer text the test sets per request. */
async function stubNode(answer: (body: string) => { status: number; text: string }): Promise<Server> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString("utf8");
    });
    req.on("end", () => {
      const a = answer(body);
      res.writeHead(a.status, { "content-type": "application/json" }).end(a.text);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return server;
}

function node(server: Server): NodeRecord {
  return {
    nodeId: "n1",
    workspaceId: "w1",
    protocol: "EVM",
    httpUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    wsUrl: null,
    status: "SYNCED",
  } as NodeRecord;
}

describe("data-plane: dedicated node client", () => {
  let server: Server | undefined;
  let client: NodeClient;
  let reply: { status: number; text: string };
  let bodies: string[];

  beforeEach(async () => {
    bodies = [];
    reply = { status: 200, text: "[]" };
    server = await stubNode((b) => {
      bodies.push(b);
      return reply;
    });
    client = new NodeClient({ timeoutMs: 5_000, connections: 2, maxResponseBytes: 1024 });
  });
  afterEach(async () => {
    await client.close();
    const s = server;
    if (s !== undefined) await new Promise<void>((r) => s.close(() => r()));
  });

  it("sends one positional-id batch and splits the answer per call (out of order, missing, error, absent result)", async () => {
    reply = {
      status: 200,
      text: JSON.stringify([
        { jsonrpc: "2.0", id: 2, error: { code: -32000, message: "reverted" } },
        { jsonrpc: "2.0", id: 0, result: "0x1" },
        { jsonrpc: "2.0", id: 3 },
      ]),
    };
    const r = await client.batch(node(server!), [
      { method: "eth_chainId", params: undefined },
      { method: "eth_blockNumber", params: [] },
      { method: "eth_call", params: [{}] },
      { method: "x", params: [1] },
    ]);
    assert.deepEqual(JSON.parse(bodies[0]!), [
      { jsonrpc: "2.0", id: 0, method: "eth_chainId" },
      { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] },
      { jsonrpc: "2.0", id: 2, method: "eth_call", params: [{}] },
      { jsonrpc: "2.0", id: 3, method: "x", params: [1] },
    ]);
    assert.ok(r.ok);
    const [a, b, c, d] = r.results;
    assert.ok(a?.ok && a.reply.tail === ',"result":"0x1"}');
    assert.ok(b !== undefined && !b.ok && b.error === GatewayError.UpstreamBadResponse);
    assert.ok(c?.ok && c.reply.tail === ',"error":{"code":-32000,"message":"reverted"}}');
    assert.equal(c.reply.category, categoryOfNodeError(-32000), "the node's error code decides the category");
    assert.ok(d?.ok && d.reply.tail === ',"result":null}');
  });

  it("a one-call request answered with a whole-request error (id null) gets that error", async () => {
    reply = {
      status: 200,
      text: '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no batches"}}',
    };
    const r = await client.batch(node(server!), [{ method: "eth_chainId", params: [] }]);
    assert.ok(r.ok && r.results[0]?.ok);
    assert.match(r.results[0].reply.tail, /no batches/);
  });

  it("garbage, a 500 and an answer over the byte cap fail the exchange with their rows", async () => {
    reply = { status: 200, text: "<html>" };
    let r = await client.batch(node(server!), [{ method: "eth_chainId", params: [] }]);
    assert.ok(!r.ok && r.error === GatewayError.UpstreamBadResponse);
    reply = { status: 500, text: '{"jsonrpc":"2.0","id":0,"result":"0x1"}' };
    r = await client.batch(node(server!), [{ method: "eth_chainId", params: [] }]);
    assert.ok(!r.ok && r.error === GatewayError.UpstreamBadResponse);
    reply = { status: 200, text: `[{"jsonrpc":"2.0","id":0,"result":"${"a".repeat(2048)}"}]` };
    r = await client.batch(node(server!), [{ method: "eth_chainId", params: [] }]);
    assert.ok(!r.ok && r.error.reason === GatewayError.UpstreamResponseTooLarge.reason);
  });

  it("an unreachable node is upstream_unreachable; forget drops the node's client", async () => {
    const n = node(server!);
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    const r = await client.batch(n, [{ method: "eth_chainId", params: [] }]);
    assert.ok(!r.ok && r.error === GatewayError.UpstreamUnreachable);
    assert.equal(client.size, 1);
    client.forget("n1");
    assert.equal(client.size, 0);
  });
});
