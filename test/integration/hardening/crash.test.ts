import assert from "node:assert/strict";
import { Redis } from "ioredis";
import WebSocket from "ws";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { NodeRecord } from "../../../shared/src/redis/records";
import { TEST_REDIS_URL } from "../../helpers/redis";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, sleep, startGateway } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";

const NODE_ID = "7a2b3c4d-1b2c-4d5e-8f90-a1b2c3d4e5f6";
const CALL = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };

/** Asserts the contract error object of `row` (status, code, category, reason), X-Request-Id = data.requestId. */
function assertErrorRow(
  r: { status: number; headers: Headers; json: unknown; text: string },
  row: ErrorRow,
  what: string,
): void {
  assert.equal(r.status, row.httpStatus, `${what}: ${r.text}`);
  const body = r.json as { jsonrpc: string; error: { code: number; data: Record<string, unknown> } };
  assert.equal(body.jsonrpc, "2.0", what);
  assert.equal(body.error.code, row.code, what);
  assert.equal(body.error.data.category, row.category, what);
  assert.equal(body.error.data.reason, row.reason, what);
  assert.equal(body.error.data.requestId, r.headers.get("x-request-id"), what);
}

/** Opens a socket; resolves with the refused upgrade's status, or with the close code and reason. */
function wsOutcome(
  url: string,
  send?: string | Buffer,
): Promise<{ status?: number; close?: number; reason?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on("unexpected-response", (_req, res) => {
      resolve({ status: res.statusCode });
      res.resume();
      ws.terminate();
    });
    ws.on("open", () => {
      if (send !== undefined) ws.send(send);
    });
    ws.on("close", (code, reason) => resolve({ close: code, reason: reason.toString() }));
    ws.on("error", (err) => {
      if (!/Unexpected server response/.test(err.message)) reject(err);
    });
  });
}

/**
 * Regression tests for issue 13 §1 and §7c on a real data plane (in process, real Redis, a stub upstream
 * on loopback). The first request below used to throw a URIError inside the uWS handler and end the
 * process (and with it `npm start`).
 */
describe("hardening: requests that used to crash the data plane, oversized WebSocket frames", function () {
  this.timeout(60_000);
  let upstream: StubUpstream;
  let gw: Gateway;
  let redis: Redis;
  let appKey: string;
  let nodeKey: string;

  before(async () => {
    upstream = await new StubUpstream().start();
    gw = await startGateway({}, async (s) => {
      await s.putNetwork(evmNetwork("eth-test", [{ id: "u1", httpUrl: upstream.url }]));
    });
    redis = new Redis(TEST_REDIS_URL);
    appKey = await gw.seeder.putKey();
    nodeKey = await gw.seeder.putKey({ kind: "node", appId: null, nodeId: NODE_ID, rpcMethods: "UNSAFE" });
    const rec: NodeRecord = {
      nodeId: NODE_ID,
      workspaceId: "ws-test",
      protocol: "EVM",
      httpUrl: upstream.url,
      wsUrl: null,
      status: "SYNCED",
    };
    await redis.set(gw.seeder.names.node(NODE_ID), JSON.stringify(rec));
    await gw.seeder.publish({ type: "node.update", nodeId: NODE_ID });
    await sleep(100);
  });
  after(async () => {
    redis?.disconnect();
    await gw?.stop();
    await upstream?.stop();
  });

  const stillServes = async () => {
    const r = await post(`${gw.base}/eth-test/rpc?apikey=${appKey}`, CALL);
    assert.deepEqual(r.json, { jsonrpc: "2.0", id: 1, result: "0x7a69" });
    const n = await post(`${gw.base}/nodes/${NODE_ID}/${nodeKey}`, CALL);
    assert.deepEqual(n.json, { jsonrpc: "2.0", id: 1, result: "0x7a69" });
  };

  it("`POST /nodes/x/%` (the issue's curl) and other malformed percent-encodings in the node key get the 401 row; the process keeps serving", async () => {
    for (const nodeId of ["x", NODE_ID]) {
      for (const key of ["%", "%zz", "%C0%AF", "%E0%A4%A", "%ff%fe", `${nodeKey}%`]) {
        const url = `${gw.base}/nodes/${nodeId}/${key}`;
        assertErrorRow(await post(url, CALL), GatewayError.UnknownKey, `POST ${nodeId}/${key}`);
        // Other methods are refused before the key is looked at (405), still well formed.
        const g = await fetch(url);
        const text = await g.text();
        assertErrorRow(
          { status: g.status, headers: g.headers, text, json: JSON.parse(text) },
          GatewayError.MethodNotAllowed,
          `GET ${key}`,
        );
      }
    }
    await stillServes();
  });

  it("a WebSocket upgrade on the same paths is refused with 401, not a crash", async () => {
    for (const key of ["%", "%zz", "%C0%AF"]) {
      const o = await wsOutcome(`ws://127.0.0.1:${gw.port()}/nodes/x/${key}`);
      assert.equal(o.status, 401, key);
      const n = await wsOutcome(`ws://127.0.0.1:${gw.port()}/nodes/${NODE_ID}/${key}`);
      assert.equal(n.status, 401, key);
    }
    await stillServes();
  });

  it("WebSocket messages of 2 MB close that socket with 1009 on app and node endpoints; other sockets go on", async () => {
    const bystander = new WebSocket(`ws://127.0.0.1:${gw.port()}/eth-test/rpc?apikey=${appKey}`);
    await new Promise((r) => bystander.once("open", r));
    for (const size of [1024 * 1024 + 1, 2 * 1000 * 1000, 2 * 1024 * 1024 - 1]) {
      for (const path of [
        `/eth-test/rpc?apikey=${appKey}`,
        `/eth-test/public`,
        `/nodes/${NODE_ID}/${nodeKey}`,
      ]) {
        const o = await wsOutcome(`ws://127.0.0.1:${gw.port()}${path}`, "x".repeat(size));
        assert.deepEqual(o, { close: 1009, reason: "message too big" }, `${size} bytes on ${path}`);
      }
    }
    // Binary of the same size: the same rule.
    const b = await wsOutcome(`ws://127.0.0.1:${gw.port()}/eth-test/public`, Buffer.alloc(2 * 1024 * 1024));
    assert.equal(b.close, 1009);
    const reply = new Promise<string>((r) => bystander.once("message", (d) => r(String(d))));
    bystander.send(JSON.stringify(CALL));
    assert.deepEqual(JSON.parse(await reply), { jsonrpc: "2.0", id: 1, result: "0x7a69" });
    bystander.close();
    // Exactly MAX_BODY_BYTES is still a message (a parse error here, the socket stays open).
    const atCap = new WebSocket(`ws://127.0.0.1:${gw.port()}/eth-test/public`);
    await new Promise((r) => atCap.once("open", r));
    const parseError = new Promise<string>((r) => atCap.once("message", (d) => r(String(d))));
    atCap.send("x".repeat(gw.config.MAX_BODY_BYTES));
    assert.equal(JSON.parse(await parseError).error.code, -32700);
    atCap.close();
    await stillServes();
  });

  it("a frame over WS_MAX_FRAME_BYTES (default 2 MiB) is dropped by uWS at its header (1006, no close frame), as documented", async () => {
    // Default: a 16 MB frame is never buffered (the server would otherwise hold it per socket).
    const dropped = await wsOutcome(
      `ws://127.0.0.1:${gw.port()}/eth-test/public`,
      "x".repeat(16 * 1000 * 1000),
    );
    assert.equal(dropped.close, 1006);
    await stillServes();
    // An operator who raises the cap gets 1009 for messages up to it.
    const big = await startGateway({ WS_MAX_FRAME_BYTES: String(16 * 1024 * 1024) }, async (s) => {
      await s.putNetwork(evmNetwork("eth-test", [{ id: "u1", httpUrl: upstream.url }]));
    });
    try {
      for (const size of [16 * 1000 * 1000, 16 * 1024 * 1024]) {
        const o = await wsOutcome(`ws://127.0.0.1:${big.port()}/eth-test/public`, "x".repeat(size));
        assert.deepEqual(o, { close: 1009, reason: "message too big" }, `${size} bytes`);
      }
      const over = await wsOutcome(
        `ws://127.0.0.1:${big.port()}/eth-test/public`,
        "x".repeat(17 * 1024 * 1024),
      );
      assert.equal(over.close, 1006);
    } finally {
      await big.stop();
    }
  });
});
