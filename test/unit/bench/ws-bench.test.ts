import uWS from "uWebSockets.js";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { buildCClient, CClient, runFloor } from "../../../bench/ws";
import { eventually } from "../../helpers/eventually";

/** A uWS server answering eth_subscribe like the gateway, and sending heads on demand. */
function startHeadServer(): Promise<{ port: number; heads(n: number): void; close(): void }> {
  const app = uWS.App();
  const socks = new Set<uWS.WebSocket<unknown>>();
  app.ws("/ok", {
    message: (ws, msg) => {
      if (Buffer.from(msg).toString().includes("eth_subscribe")) {
        ws.send('{"jsonrpc":"2.0","id":1,"result":"0x0123456789abcdef0123456789abcdef"}');
        socks.add(ws);
      }
    },
    close: (ws) => {
      socks.delete(ws);
    },
  });
  return new Promise((resolve, reject) => {
    app.listen("127.0.0.1", 0, (ls) => {
      if (!ls) return reject(new Error("listen failed"));
      resolve({
        port: uWS.us_socket_local_port(ls),
        heads(n) {
          for (let i = 0; i < n; i++) {
            // The reader stamps with CLOCK_REALTIME: Date.now() reads the same clock (truncated to the ms, so
            // never after the reader's read), where timeOrigin + now() drifts from it by some microseconds.
            const at = Date.now();
            const text = `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x0123456789abcdef0123456789abcdef","result":{"number":"0x${i.toString(16)}","emittedAtMs":${at}}}}`;
            for (const ws of socks) ws.send(text);
          }
        },
        close() {
          uWS.us_listen_socket_close(ls);
          for (const ws of socks) ws.close();
        },
      });
    });
  });
}

describe("bench: WebSocket C reader (bench/ws-client.c)", function () {
  this.timeout(30_000);
  let bin: string | undefined;

  before(() => {
    bin = buildCClient();
  });

  it("is built with gcc, or the bench falls back because gcc is missing", () => {
    if (bin === undefined)
      assert.notEqual(spawnSync("gcc", ["--version"]).status, 0, "gcc works but no build");
    else assert.match(bin, /ws-client$/);
  });

  it("subscribes its sockets, stamps the heads received while measuring, counts refused upgrades", async () => {
    assert.ok(bin !== undefined, "built");
    const server = await startHeadServer();
    const ok = new CClient(bin, server.port, "/ok?apikey=x", 5);
    const bad = new CClient(bin, server.port, "/nope", 2);
    try {
      assert.deepEqual(await ok.subscribed(), { ok: 5, failed: 0 });
      assert.deepEqual(await bad.subscribed(), { ok: 0, failed: 2 });
      // The reader takes stdin commands in order, and a report neither resets nor stamps anything: a report
      // after a command is the barrier that it took effect, and reports are polled to see heads arrive.
      const received = (n: number) =>
        eventually(async () => (await ok.report()).received === n, `the reader counting ${n} heads`);
      server.heads(1);
      await received(5);
      ok.measure(true);
      await ok.report();
      server.heads(3);
      await received(20);
      ok.measure(false);
      await ok.report();
      server.heads(1);
      await received(25);
      const r = await ok.report();
      assert.equal(r.received, 25, "every head counted");
      assert.equal(r.delays.length, 15, "only the heads received while measuring are stamped");
      for (const d of r.delays) assert.ok(d >= 0 && d < 5000, `delay ${d}`);
      assert.equal(r.closedEarly, 0);
    } finally {
      await ok.close();
      await bad.close();
      server.close();
    }
  });

  it("--floor: a C sender to the C reader over loopback, every head to every socket", async () => {
    assert.ok(bin !== undefined, "built");
    const f = await runFloor(bin, 20, 3);
    assert.equal(f.notificationsDelivered, 60);
    assert.ok(f.deliveryDelayMs.p50 >= 0 && f.deliveryDelayMs.max < 5000);
    assert.ok(f.fanoutMs.mean >= 0 && f.fanoutMs.max >= f.fanoutMs.mean);
    assert.ok(f.senderCpuMsPerHead.system >= 0 && f.readerCpuMsPerHead.user >= 0);
  });
});
