import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { WebhookSender } from "../../../../control-plane/src/webhooks/webhook-sender";

/** A local server whose behaviour per path the tests choose; counts connections and requests per path. */
async function startServer(): Promise<{
  server: Server;
  port: number;
  connections: () => number;
  hits: Map<string, number>;
}> {
  let connections = 0;
  const hits = new Map<string, number>();
  const server = createServer((req, res) => {
    hits.set(req.url ?? "", (hits.get(req.url ?? "") ?? 0) + 1);
    if (req.url === "/redirect") res.writeHead(302, { location: "/target" }).end();
    else if (req.url === "/hang")
      return; // never answers
    else if (req.url === "/big") res.writeHead(200).end("é".repeat(100_000));
    else res.writeHead(204).end();
  });
  server.on("connection", () => connections++);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, port: (server.address() as AddressInfo).port, connections: () => connections, hits };
}

describe("webhooks: the sender (local server on 127.0.0.1)", function () {
  this.timeout(30_000);
  let srv: Awaited<ReturnType<typeof startServer>>;
  const strict = new WebhookSender({ allowPrivateAddresses: false, timeoutMs: 1000 });
  const open = new WebhookSender({ allowPrivateAddresses: true, timeoutMs: 1000 });

  before(async () => {
    srv = await startServer();
  });
  after(async () => {
    await strict.close();
    await open.close();
    srv.server.closeAllConnections();
    srv.server.close();
  });

  it("refuses loopback literals and names resolving to loopback without connecting", async () => {
    for (const url of [
      `http://127.0.0.1:${srv.port}/a`,
      `http://[::ffff:127.0.0.1]:${srv.port}/a`,
      `http://[::1]:${srv.port}/a`,
      `http://localhost:${srv.port}/a`,
    ]) {
      const o = await strict.send(url, {}, "{}");
      assert.equal(o.ok, false, url);
      assert.equal(o.permanent, true, url);
      assert.equal(o.statusCode, null);
      assert.match(o.error!, /^address refused: /, url);
    }
    assert.equal(srv.connections(), 0, "no connection for a refused address");
  });

  it("allowed: posts the body with the given headers; a 2xx is success", async () => {
    const o = await open.send(`http://localhost:${srv.port}/ok`, { "webhook-id": "evt_x" }, '{"a":1}');
    assert.equal(o.ok, true);
    assert.equal(o.statusCode, 204);
    assert.equal(o.error, null);
    assert.equal(srv.hits.get("/ok"), 1);
  });

  it("does not follow redirects: a 302 is a failed attempt and its target is never asked", async () => {
    const o = await open.send(`http://127.0.0.1:${srv.port}/redirect`, {}, "{}");
    assert.equal(o.ok, false);
    assert.equal(o.statusCode, 302);
    assert.equal(o.permanent, false);
    assert.equal(srv.hits.get("/target"), undefined);
  });

  it("times out an endpoint that never answers", async () => {
    const t0 = Date.now();
    const o = await open.send(`http://127.0.0.1:${srv.port}/hang`, {}, "{}");
    assert.equal(o.ok, false);
    assert.equal(o.error, "timed out after 1000 ms");
    assert.ok(Date.now() - t0 < 5_000);
    assert.equal(o.permanent, false);
  });

  it("keeps only a short excerpt of a large answer", async () => {
    const o = await open.send(`http://127.0.0.1:${srv.port}/big`, {}, "{}");
    assert.equal(o.ok, true);
    assert.ok(o.responseExcerpt!.length <= 256 && o.responseExcerpt!.startsWith("éé"));
  });

  it("connection refused is a retryable failure", async () => {
    const dead = createServer();
    await new Promise<void>((r) => dead.listen(0, "127.0.0.1", r));
    const port = (dead.address() as AddressInfo).port;
    await new Promise<void>((r) => dead.close(() => r()));
    const o = await open.send(`http://127.0.0.1:${port}/`, {}, "{}");
    assert.equal(o.ok, false);
    assert.equal(o.permanent, false);
    assert.match(o.error!, /ECONNREFUSED/);
  });
});
