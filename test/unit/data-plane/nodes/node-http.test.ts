import uWS from "uWebSockets.js";
import assert from "node:assert/strict";
import http from "node:http";
import pino from "pino";
import { ConcurrencyLimiter } from "../../../../data-plane/src/limits/concurrency";
import { PromMetrics } from "../../../../data-plane/src/metrics/metrics";
import { serveNodeHttp } from "../../../../data-plane/src/nodes/node-http";
import type { GatewayContext } from "../../../../data-plane/src/pipeline/context";
import type { PipelineRequest } from "../../../../data-plane/src/pipeline/request";
import { NoopRequestLog } from "../../../../data-plane/src/requestlog/recorder";
import { HandlerGuard } from "../../../../data-plane/src/server/guard";
import { NO_TRACING } from "../../../../data-plane/src/telemetry/tracing";
import { NoopUsageRecorder } from "../../../../data-plane/src/usage";

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
 * serveNodeHttp on a real uWS app (loopback) with a node stage whose answer makes uWS's write throw (a
 * body uWS refuses). A request marked done before its write must not leave the client waiting forever
 * when the write throws.
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
    watchBody() {},
    unwatchBody() {},
  };
  const logs: Record<string, unknown>[] = [];
  let badBody = true;

  before(async () => {
    const logger = pino({ level: "error" }, { write: (s: string) => void logs.push(JSON.parse(s)) });
    const guard = new HandlerGuard(logger, new PromMetrics());
    const metrics = new PromMetrics();
    const deps = {
      metrics,
      usage: new NoopUsageRecorder(),
      requestLog: new NoopRequestLog(),
      limits: {
        admit: () => ({ ok: true, rate: { allowed: true, limit: 10, remaining: 9 } }),
        recordServed() {},
      },
      // Admission sets the request's tenant at the concurrency caps (its plan's caps, else these).
      flights: new ConcurrencyLimiter(10, 2),
    };
    const ctx = {
      config: { MAX_BODY_BYTES: 1 << 20 },
      logger,
      metrics,
      tracing: NO_TRACING,
      trustedProxies: [],
      policy: { check: () => undefined },
      nodes: {
        authorize: async () => ({
          ok: true,
          key: {
            hash: "k",
            record: { kind: "node", nodeId: "n1", workspaceId: "w", appId: null, plan: { name: "p" } },
          },
          node: {},
        }),
        serving: () => true,
        deps,
        stage: {
          // uWS accepts strings and buffers only: a plain object makes res.end throw mid-answer (status
          // and headers already written).
          prepare(req: PipelineRequest) {
            req.send(200, badBody ? ({} as unknown as string) : '{"ok":1}');
            return false;
          },
        },
      },
    } as unknown as GatewayContext;
    app = uWS.App();
    app.any(
      "/nodes/:nodeId/:key",
      guard.http("node", (res, req) => serveNodeHttp(ctx, tracker, res, req, true)),
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
      logs.some((l) => l.msg === "writing a response failed"),
      `the failed write is logged: ${JSON.stringify(logs)}`,
    );
    badBody = false;
    assert.deepEqual(await post(port, "/nodes/n1/key"), { status: 200 });
    assert.deepEqual({ begun: tracker.begun, ended: tracker.ended }, { begun: 2, ended: 2 });
  });
});
