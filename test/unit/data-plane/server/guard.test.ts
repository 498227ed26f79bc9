import uWS from "uWebSockets.js";
import assert from "node:assert/strict";
import pino from "pino";
import WebSocket from "ws";
import { PromMetrics } from "../../../../data-plane/src/metrics/metrics";
import { HandlerGuard } from "../../../../data-plane/src/server/guard";
import { eventually } from "../../../helpers/eventually";

/** A pino logger whose lines are kept in memory. */
function memoryLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "error" },
    { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  return { logger, lines };
}

async function exceptions(metrics: PromMetrics, handler: string): Promise<number> {
  const text = (await metrics.render()) ?? "";
  const m = new RegExp(
    `^rpcgw_handler_exceptions_total\\{handler="${handler.replace(".", "\\.")}"\\} (\\d+)$`,
    "m",
  ).exec(text);
  return m === null ? 0 : Number(m[1]);
}

/** Opens a client socket; resolves with the close code once the server closes it. */
function wsClosed(url: string, send?: string): Promise<{ code: number; opened: boolean }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    let opened = false;
    ws.on("open", () => {
      opened = true;
      if (send !== undefined) ws.send(send);
    });
    ws.on("close", (code) => resolve({ code, opened }));
    ws.on("error", (err) => {
      if (!opened) reject(err);
    });
  });
}

/**
 * The guard on a real uWS app (loopback): handlers that throw at every point, then a plain request on
 * the same server to show it still serves. Without the guard each of these ends the process.
 */
describe("data-plane/server/guard (HandlerGuard on a real uWS app)", () => {
  let app: uWS.TemplatedApp;
  let listen: uWS.us_listen_socket;
  let base: string;
  let metrics: PromMetrics;
  let logs: Record<string, unknown>[];

  before(async () => {
    metrics = new PromMetrics();
    const mem = memoryLogger();
    logs = mem.lines;
    const guard = new HandlerGuard(mem.logger, metrics);
    app = uWS.App();
    app.get(
      "/throw",
      guard.http("test.throw", () => {
        throw new Error("boom");
      }),
    );
    app.get(
      "/throw-after-on-aborted",
      guard.http("test.aborted", (res) => {
        res.onAborted(() => {});
        throw new TypeError("after onAborted");
      }),
    );
    app.get(
      "/throw-after-answer",
      guard.http("test.answered", (res) => {
        res.end("answered");
        throw new Error("after answering");
      }),
    );
    app.get(
      "/ok",
      guard.http("test.ok", (res) => {
        res.end("ok");
      }),
    );
    app.ws(
      "/ws-message",
      guard.ws("test.ws", {
        message: () => {
          throw new Error("message boom");
        },
      }),
    );
    app.ws(
      "/ws-open",
      guard.ws("test.ws", {
        open: () => {
          throw new Error("open boom");
        },
      }),
    );
    app.ws(
      "/ws-upgrade",
      guard.ws("test.ws", {
        upgrade: () => {
          throw new Error("upgrade boom");
        },
      }),
    );
    app.ws(
      "/ws-echo",
      guard.ws("test.ws", {
        message: (ws, msg) => {
          ws.send(msg, false);
        },
        close: () => {
          throw new Error("close boom");
        },
      }),
    );
    const port = await new Promise<number>((resolve, reject) =>
      app.listen("127.0.0.1", 0, (s) => {
        if (s === false) return reject(new Error("listen failed"));
        listen = s;
        resolve(uWS.us_socket_local_port(s));
      }),
    );
    base = `127.0.0.1:${port}`;
  });

  after(() => {
    uWS.us_listen_socket_close(listen);
  });

  it("answers a synchronous throw with 500 and the Service Error row, logs it with the request id, counts it, keeps serving", async () => {
    const res = await fetch(`http://${base}/throw`);
    assert.equal(res.status, 500);
    const body = (await res.json()) as {
      jsonrpc: string;
      id: null;
      error: { code: number; data: { category: string; reason: string; requestId: string } };
    };
    assert.equal(body.jsonrpc, "2.0");
    assert.equal(body.id, null);
    assert.equal(body.error.code, -32603);
    assert.equal(body.error.data.category, "Service Error");
    assert.equal(body.error.data.reason, "internal");
    assert.equal(res.headers.get("x-request-id"), body.error.data.requestId);
    const line = logs.find((l) => l.requestId === body.error.data.requestId);
    assert.ok(line, "logged with the request id");
    assert.equal(line.handler, "test.throw");
    assert.match(JSON.stringify(line.err), /boom/);
    assert.equal(await exceptions(metrics, "test.throw"), 1);
    assert.equal(await (await fetch(`http://${base}/ok`)).text(), "ok");
  });

  it("answers 500 when the handler threw after attaching onAborted (no answer written yet)", async () => {
    const res = await fetch(`http://${base}/throw-after-on-aborted`);
    assert.equal(res.status, 500);
    assert.equal(((await res.json()) as { error: { code: number } }).error.code, -32603);
    assert.equal(await exceptions(metrics, "test.aborted"), 1);
  });

  it("keeps the answer already written when the handler throws afterwards, and counts the throw", async () => {
    const res = await fetch(`http://${base}/throw-after-answer`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "answered");
    assert.equal(await exceptions(metrics, "test.answered"), 1);
    assert.equal(await (await fetch(`http://${base}/ok`)).text(), "ok");
  });

  it("closes only the socket whose message / open handler threw, with 1011; a throwing upgrade answers 500", async () => {
    assert.deepEqual(await wsClosed(`ws://${base}/ws-message`, "hi"), { code: 1011, opened: true });
    assert.equal(await exceptions(metrics, "test.ws.message"), 1);
    assert.equal((await wsClosed(`ws://${base}/ws-open`)).code, 1011);
    assert.equal(await exceptions(metrics, "test.ws.open"), 1);
    await assert.rejects(wsClosed(`ws://${base}/ws-upgrade`), /500/);
    assert.equal(await exceptions(metrics, "test.ws.upgrade"), 1);

    // Another socket on the same server still works; its throwing close handler is only counted.
    const echo = new WebSocket(`ws://${base}/ws-echo`);
    await new Promise((r) => echo.once("open", r));
    const reply = new Promise<string>((r) => echo.once("message", (d) => r(String(d))));
    echo.send("ping");
    assert.equal(await reply, "ping");
    echo.close(1000);
    await new Promise((r) => echo.once("close", r));
    await eventually(
      async () => (await exceptions(metrics, "test.ws.close")) > 0,
      "the close handler's exception counted",
    );
    assert.equal(await exceptions(metrics, "test.ws.close"), 1);
    assert.equal(await (await fetch(`http://${base}/ok`)).text(), "ok");
  });
});
