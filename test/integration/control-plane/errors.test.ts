import assert from "node:assert/strict";
import { connect } from "node:net";
import { Writable } from "node:stream";
import pino from "pino";
import { code, GqlResult, Harness, startHarness } from "./harness";

describe("control-plane: error masking and logging", () => {
  let h: Harness;
  const lines: Record<string, unknown>[] = [];
  before(async () => {
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of chunk.toString().split("\n")) if (l.trim()) lines.push(JSON.parse(l));
        cb();
      },
    });
    h = await startHarness({}, { log: pino({ level: "error" }, sink) });
  });
  after(async () => {
    await h?.close();
  });

  it("masks a database failure to 'Internal server error' and logs the real cause", async () => {
    const u = await h.signUp();
    const workspaces = h.cp.services.workspaces as unknown as { callerWorkspaceId: () => Promise<string> };
    const original = workspaces.callerWorkspaceId;
    workspaces.callerWorkspaceId = async () => {
      await h.cp.dataSource.query("SELECT * FROM no_such_table_xyz");
      return "";
    };
    let r: GqlResult;
    try {
      r = await h.gql("{ apps { id } }", {}, u.token);
    } finally {
      workspaces.callerWorkspaceId = original;
    }
    assert.equal(r.errors![0]!.message, "Internal server error");
    assert.equal(code(r), "INTERNAL_SERVER_ERROR");
    assert.ok(!JSON.stringify(r).includes("no_such_table_xyz"), "no SQL in the response");
    await new Promise((res) => setTimeout(res, 20));
    assert.ok(JSON.stringify(lines).includes("no_such_table_xyz"), "the cause is logged");
    assert.ok(!JSON.stringify(lines).includes(u.token), "tokens never logged");
  });

  it("passes GraphQL validation errors and unknown-field errors through with their codes", async () => {
    const r = await h.gql("{ nope }");
    assert.equal(code(r), "GRAPHQL_VALIDATION_FAILED");
    const bad = await h.gql(`mutation { createApp(input: { name: "x", environment: STAGING }) { id } }`);
    assert.equal(code(bad), "GRAPHQL_VALIDATION_FAILED");
  });

  it("answers a non-JSON body with 400 and an unknown path with 404", async () => {
    const r = await fetch(h.cp.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{",
    });
    assert.equal(r.status, 400);
    assert.equal((await fetch(h.cp.url.replace("/graphql", "/other"))).status, 404);
    const big = await fetch(h.cp.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: `{ networks { slug } }`, pad: "x".repeat(1_100_000) }),
    });
    assert.equal(big.status, 413);
  });

  it("cuts off a client that dribbles its headers or never sends its body (408, socket closed); serves others", async () => {
    const slow = await startHarness({
      CONTROL_PLANE_HEADERS_TIMEOUT_MS: "600",
      CONTROL_PLANE_REQUEST_TIMEOUT_MS: "1200",
    });
    try {
      const port = new URL(slow.cp.url).port;
      const hold = (first: string) =>
        new Promise<{ ms: number; text: string }>((resolve, reject) => {
          const started = Date.now();
          let text = "";
          const s = connect(Number(port), "127.0.0.1", () => s.write(first));
          s.on("data", (d) => {
            text += d.toString();
          });
          s.on("error", reject);
          s.on("close", () => resolve({ ms: Date.now() - started, text }));
          // Never finishes the request; the test gives up far beyond the configured deadlines.
          setTimeout(() => s.destroy(new Error("server kept the socket open")), 10_000).unref();
        });
      const [headers, body] = await Promise.all([
        hold("POST /graphql HTTP/1.1\r\nHost: x\r\nX-Slow: "),
        hold(
          "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
        ),
      ]);
      for (const r of [headers, body]) {
        assert.ok(r.ms < 5000, `closed after ${r.ms} ms`);
        assert.match(r.text, /^HTTP\/1\.1 408 /, r.text);
      }
      const ok = await slow.gql("{ networks { slug } }");
      assert.ok(ok.data, JSON.stringify(ok));
    } finally {
      await slow.close();
    }
  });
});
