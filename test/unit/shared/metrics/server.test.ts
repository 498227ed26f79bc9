import assert from "node:assert/strict";
import { createLogger } from "../../../../shared/src/log/logger";
import { serveMetrics } from "../../../../shared/src/metrics/server";

describe("the /metrics listener (shared/src/metrics/server.ts)", () => {
  const logger = createLogger("test", "silent");

  it("GET /metrics renders; another path 404, another method 405; a failed render is 500 and it keeps serving", async () => {
    let fail = false;
    const m = await serveMetrics({
      host: "127.0.0.1",
      port: 0,
      contentType: "text/plain; version=0.0.4",
      render: async () => {
        if (fail) throw new Error("registry broke");
        return "rpcgw_up 1\n";
      },
      logger,
    });
    const base = `http://127.0.0.1:${m.port}`;
    try {
      assert.equal(m.host, "127.0.0.1");
      const ok = await fetch(`${base}/metrics?x=1`);
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get("content-type"), "text/plain; version=0.0.4");
      assert.equal(await ok.text(), "rpcgw_up 1\n");
      const head = await fetch(`${base}/metrics`, { method: "HEAD" });
      assert.equal(head.status, 200);
      assert.equal(await head.text(), "");
      for (const p of ["/", "/metrics/", "/healthz", "/eth/rpc"])
        assert.equal((await fetch(`${base}${p}`)).status, 404, p);
      const post = await fetch(`${base}/metrics`, { method: "POST", body: "x" });
      assert.equal(post.status, 405);
      assert.equal(post.headers.get("allow"), "GET, HEAD");
      fail = true;
      const broken = await fetch(`${base}/metrics`);
      assert.equal(broken.status, 500);
      assert.ok(!(await broken.text()).includes("registry broke"), "the error stays in the log");
      fail = false;
      assert.equal((await fetch(`${base}/metrics`)).status, 200);
    } finally {
      await m.close();
    }
  });

  it("a process without metrics (NoopMetrics renders nothing) answers 404", async () => {
    const m = await serveMetrics({
      host: "127.0.0.1",
      port: 0,
      contentType: "text/plain",
      render: async () => undefined,
      logger,
    });
    try {
      assert.equal((await fetch(`http://127.0.0.1:${m.port}/metrics`)).status, 404);
    } finally {
      await m.close();
    }
  });

  it("a port already taken fails the start (the process then exits 1 with the reason)", async () => {
    const first = await serveMetrics({
      host: "127.0.0.1",
      port: 0,
      contentType: "t",
      render: async () => "",
      logger,
    });
    try {
      await assert.rejects(
        serveMetrics({
          host: "127.0.0.1",
          port: first.port,
          contentType: "t",
          render: async () => "",
          logger,
        }),
        /EADDRINUSE/,
      );
    } finally {
      await first.close();
    }
  });
});
