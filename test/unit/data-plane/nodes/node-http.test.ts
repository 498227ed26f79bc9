import uWS from "uWebSockets.js";
import assert from "node:assert/strict";
import http from "node:http";
import pino from "pino";
import { PromMetrics } from "../../../../data-plane/src/metrics/metrics";
import type { NodeGateway } from "../../../../data-plane/src/nodes/node-gateway";
import { serveNodeHttp } from "../../../../data-plane/src/nodes/node-http";
import { HandlerGuard } from "../../../../data-plane/src/server/guard";

/** One POST; resolves with the status, or the error code when the connection ended without an answer. */
function post(port: number, path: string): Promise<{ status?: number; error?: string }> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: "127.0.0.1", port, path, method: "POST", headers: { "content-type": "application/json" } },
      (res) => {
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode }));
        res.on("error", (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
      },
    );
    req.on("error", (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    // A hang is the bug under test: give up well before mocha's timeout and say so.
    req.setTimeout(3_000, () => {
      resolve({ error: "HUNG" });
      req.destroy();
    });
    req.end('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}');
  });
}

/**
 * serveNodeHttp on a real uWS app (loopback) with a node gateway whose answer makes uWS's write throw
 * (a body uWS refuses). Before the fix the request was marked done before the write, the throw reached
 * the pipeline's 500 path, which returned early because done was set: the client waited forever.
 */
describe("data-plane/nodes/node-http (a write that throws)", () => {
  let app: uWS.TemplatedApp;
  let listen: uWS.us_listen_socket;
  let port: number;
  const tracker = {
    closing: false,
    begun: 0,
    ended: 0,
    begin() {
      this.begun++;
    },
    end() {
      this.ended++;
    },
  };
  const logs: Record<string, unknown>[] = [];
  let badBody = true;

  before(async () => {
    const logger = pino({ level: "error" }, { write: (s: string) => void logs.push(JSON.parse(s)) });
    const guard = new HandlerGuard(logger, new PromMetrics());
    const gateway = {
      authorize: async () => ({ ok: true }),
      // uWS accepts strings and buffers only: a plain object makes res.end throw mid-answer (status and
      // headers already written).
      handle: async () => ({ status: 200, body: badBody ? ({} as unknown as string) : '{"ok":1}' }),
    } as unknown as NodeGateway;
    app = uWS.App();
    app.any(
      "/nodes/:nodeId/:key",
      guard.http("node", (res, req) => serveNodeHttp(gateway, tracker, guard, 1 << 20, res, req, true)),
    );
    await new Promise<void>((resolve, reject) =>
      app.listen("127.0.0.1", 0, (s) => {
        if (s === false) return reject(new Error("listen failed"));
        listen = s;
        port = uWS.us_socket_local_port(s);
        resolve();
      }),
    );
  });

  after(() => {
    uWS.us_listen_socket_close(listen);
    (app as unknown as { close?: () => void }).close?.();
  });

  it("closes the connection (no hang), settles the request once, logs it, and keeps serving", async () => {
    const r = await post(port, "/nodes/n1/key");
    assert.equal(r.status, undefined, "no answer can follow a half-written one");
    assert.notEqual(r.error, "HUNG", "the request was left hanging");
    assert.deepEqual({ begun: tracker.begun, ended: tracker.ended }, { begun: 1, ended: 1 });
    assert.ok(
      logs.some((l) => l.handler === "node.send"),
      `the failed write is logged: ${JSON.stringify(logs)}`,
    );
    badBody = false;
    assert.deepEqual(await post(port, "/nodes/n1/key"), { status: 200 });
    assert.deepEqual({ begun: tracker.begun, ended: tracker.ended }, { begun: 2, ended: 2 });
  });
});
