import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { request } from "node:http";
import path from "node:path";
import { DEFAULT_CONSOLE_DIR } from "../../../../control-plane/src/console/static";
import { ADMIN_TOKEN, Harness, startHarness } from "../harness";

/** A raw HTTP request (fetch would normalise `..` and refuse some methods). */
function raw(
  port: number,
  method: string,
  p: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path: p }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

describe("control-plane: console static files at /console (needs `npm run build`)", () => {
  let h: Harness;
  let asset: string;

  before(async () => {
    const files = readdirSync(path.join(DEFAULT_CONSOLE_DIR, "assets"));
    asset = files.find((f) => f.endsWith(".js"))!;
    assert.ok(asset, `no built console in ${DEFAULT_CONSOLE_DIR}`);
    h = await startHarness();
  });
  after(async () => {
    await h?.close();
  });

  it("serves index.html for /console/ and every client-side route, never cached", async () => {
    for (const p of ["/console/", "/console/apps/123", "/console/usage", "/console/nodes/new?x=1"]) {
      const r = await raw(h.cp.port, "GET", p);
      assert.equal(r.status, 200, p);
      assert.equal(r.headers["content-type"], "text/html; charset=utf-8", p);
      assert.equal(r.headers["cache-control"], "no-cache", p);
      assert.match(r.body, /<div id="root"><\/div>/, p);
      assert.match(r.body, /\/console\/assets\/index-[\w-]+\.js/, "asset URLs carry the /console base");
    }
    const bare = await raw(h.cp.port, "GET", "/console");
    assert.equal(bare.status, 308);
    assert.equal(bare.headers.location, "/console/");
  });

  it("sends the CSP and the security headers with every /console answer: pages, assets, errors", async () => {
    const css = readdirSync(path.join(DEFAULT_CONSOLE_DIR, "assets")).find((f) => f.endsWith(".css"))!;
    for (const [method, p, status] of [
      ["GET", "/console/", 200],
      ["GET", "/console/apps/123", 200],
      ["GET", `/console/assets/${asset}`, 200],
      ["HEAD", `/console/assets/${css}`, 200],
      ["GET", "/console", 308],
      ["GET", "/console/assets/nope-123.js", 404],
      ["POST", "/console/", 405],
    ] as const) {
      const r = await raw(h.cp.port, method, p);
      assert.equal(r.status, status, `${method} ${p}`);
      const csp = String(r.headers["content-security-policy"]);
      const directives = new Map(
        csp.split(";").map((d) => {
          const [name, ...values] = d.trim().split(/\s+/);
          return [name!, values] as const;
        }),
      );
      // No inline script nor eval anywhere; only this origin's files; no framing.
      assert.deepEqual(directives.get("script-src"), ["'self'"], `${p}: ${csp}`);
      assert.deepEqual(directives.get("default-src"), ["'none'"]);
      assert.deepEqual(directives.get("connect-src"), ["'self'"]);
      assert.deepEqual(directives.get("frame-ancestors"), ["'none'"]);
      assert.deepEqual(directives.get("object-src"), ["'none'"]);
      assert.ok(!csp.includes("unsafe-inline") && !csp.includes("unsafe-eval"), csp);
      assert.equal(r.headers["x-content-type-options"], "nosniff", p);
      assert.equal(r.headers["x-frame-options"], "DENY", p);
      assert.equal(r.headers["referrer-policy"], "no-referrer", p);
      assert.equal(r.headers["cross-origin-opener-policy"], "same-origin", p);
    }
    // The build itself needs no exception: no inline <script> or <style> in index.html.
    const html = (await raw(h.cp.port, "GET", "/console/")).body;
    assert.doesNotMatch(html, /<script(?![^>]*\ssrc=)[^>]*>/, "an inline script in index.html");
    assert.doesNotMatch(html, /<style[\s>]/, "an inline style element in index.html");
  });

  it("serves hashed assets with their content type and a year-long immutable cache", async () => {
    const r = await raw(h.cp.port, "GET", `/console/assets/${asset}`);
    assert.equal(r.status, 200);
    assert.equal(r.headers["content-type"], "text/javascript; charset=utf-8");
    assert.equal(r.headers["cache-control"], "public, max-age=31536000, immutable");
    assert.equal(Number(r.headers["content-length"]), Buffer.byteLength(r.body));
    const css = readdirSync(path.join(DEFAULT_CONSOLE_DIR, "assets")).find((f) => f.endsWith(".css"))!;
    const c = await raw(h.cp.port, "HEAD", `/console/assets/${css}`);
    assert.equal(c.status, 200);
    assert.equal(c.headers["content-type"], "text/css; charset=utf-8");
    assert.equal(c.body, "");
  });

  it("404s a missing file, refuses paths outside the build and other methods; /graphql still works", async () => {
    assert.equal((await raw(h.cp.port, "GET", "/console/assets/nope-123.js")).status, 404);
    assert.equal((await raw(h.cp.port, "GET", "/console/%2e%2e/%2e%2e/package.json")).status, 404);
    assert.equal((await raw(h.cp.port, "GET", "/console/..%2f..%2fpackage.json")).status, 404);
    const post = await raw(h.cp.port, "POST", "/console/");
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, "GET, HEAD");
    assert.equal((await raw(h.cp.port, "GET", "/consoleX")).status, 404);
    const d = await h.ok<{ plans: { name: string }[] }>("{ plans { name } }", {}, ADMIN_TOKEN);
    assert.ok(d.plans.some((p) => p.name === "free"));
  });
});
