import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, type RpcResponse, startGateway } from "./harness";

type Row = (typeof GatewayError)[keyof typeof GatewayError];

function assertError(r: RpcResponse, row: Row, id: unknown = null): void {
  assert.equal(r.status, row.httpStatus, r.text);
  assert.equal(r.json.jsonrpc, "2.0");
  assert.equal(r.json.id, id);
  assert.equal(r.json.error.code, row.code, r.text);
  assert.equal(r.json.error.data.category, row.category, r.text);
  assert.equal(r.json.error.data.reason, row.reason, r.text);
  assert.equal(r.json.error.data.requestId, r.headers.get("x-request-id"));
}

/** Asks again (each answer a new request) until one has `status`, which is returned. */
function untilStatus(send: () => Promise<RpcResponse>, status: number, what: string): Promise<RpcResponse> {
  return eventually(async () => {
    const r = await send();
    return r.status === status ? r : undefined;
  }, what);
}

describe("data plane over HTTP (anvil upstream)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let gw: Gateway;
  let key: string;
  let url: string;
  const keys: Record<string, string> = {};

  before(async () => {
    anvil = await startAnvil();
    gw = await startGateway(
      { TRUSTED_PROXIES: "127.0.0.1/32,::1/128", NEGATIVE_KEY_CACHE_TTL_MS: "2000" },
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "anvil-1", httpUrl: anvil.httpUrl }]));
        key = await s.putKey();
        keys.origins = await s.putKey({
          allowlist: { origins: ["https://app.example.com", "*.dapp.io"], ips: [] },
        });
        keys.ips = await s.putKey({ allowlist: { origins: [], ips: ["203.0.113.0/24", "2001:db8::/32"] } });
        keys.both = await s.putKey({
          allowlist: { origins: ["https://app.example.com"], ips: ["198.51.100.7"] },
        });
        keys.node = await s.putKey({ kind: "node", appId: null, nodeId: "node-1" });
        keys.expired = await s.putKey({ expiresAtMs: Date.now() - 1000 });
        keys.grace = await s.putKey({ expiresAtMs: Date.now() + 60_000 });
      },
    );
    url = `${gw.base}/eth/rpc?apikey=${key}`;
  });

  after(async () => {
    await gw?.stop();
    await anvil?.stop();
  });

  describe("endpoints and auth", () => {
    it("serves healthz, readyz and metrics", async () => {
      assert.equal((await fetch(`${gw.base}/healthz`)).status, 200);
      const ready = await fetch(`${gw.base}/readyz`);
      assert.equal(ready.status, 200);
      assert.ok(ready.headers.get("x-request-id"));
      await post(url, { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
      const metrics = await (await fetch(`${gw.metricsBase}/metrics`)).text();
      assert.match(metrics, /rpcgw_requests_total\{network="eth",category="Success"\} \d+/);
      assert.match(metrics, /rpcgw_request_duration_seconds_bucket/);
      assert.match(metrics, /rpcgw_upstream_healthy\{network="eth",upstream="anvil-1"\} 1/);
      assert.match(metrics, /rpcgw_cache_lookups_total/);
    });

    it("accepts the key in the query and in the apikey header, on /rpc and /jsonrpc", async () => {
      const body = { jsonrpc: "2.0", id: 7, method: "eth_chainId" };
      for (const r of [
        await post(url, body),
        await post(`${gw.base}/eth/rpc`, body, { apikey: key }),
        await post(`${gw.base}/eth/jsonrpc?apikey=${key}`, body),
      ]) {
        assert.equal(r.status, 200, r.text);
        assert.deepEqual(r.json, { jsonrpc: "2.0", id: 7, result: "0x7a69" });
        assert.ok(r.headers.get("x-request-id"));
      }
    });

    it("serves the public endpoint without a key", async () => {
      const r = await post(
        `${gw.base}/eth/public`,
        { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
        {
          origin: "https://anywhere.io",
        },
      );
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("access-control-allow-origin"), "*");
    });

    it("401 for a missing, unknown, expired or node key", async () => {
      const body = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
      assertError(await post(`${gw.base}/eth/rpc`, body), GatewayError.MissingKey);
      assertError(await post(`${gw.base}/eth/rpc?apikey=nope`, body), GatewayError.UnknownKey);
      assertError(
        await post(`${gw.base}/eth/rpc?apikey=${key.slice(0, -1)}x`, body),
        GatewayError.UnknownKey,
      );
      assertError(await post(`${gw.base}/eth/rpc?apikey=${keys.expired}`, body), GatewayError.UnknownKey);
      assertError(await post(`${gw.base}/eth/rpc?apikey=${keys.node}`, body), GatewayError.UnknownKey);
      const grace = await post(`${gw.base}/eth/rpc?apikey=${keys.grace}`, body);
      assert.equal(grace.status, 200);
    });

    it("a regenerated key: old key 401 after key.revoke, new key works at once", async () => {
      const oldKey = await gw.seeder.putKey();
      const body = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
      assert.equal((await post(`${gw.base}/eth/rpc?apikey=${oldKey}`, body)).status, 200);
      const newKey = await gw.seeder.putKey();
      await gw.seeder.deleteKey(oldKey);
      await gw.seeder.publish({ type: "key.revoke", keyHash: hashApiKey(oldKey) });
      await gw.seeder.publish({ type: "key.upsert", keyHash: hashApiKey(newKey) });
      assert.equal((await post(`${gw.base}/eth/rpc?apikey=${newKey}`, body)).status, 200);
      // How soon is the bench's concern; here, that the revoke is applied.
      await untilStatus(
        () => post(`${gw.base}/eth/rpc?apikey=${oldKey}`, body),
        401,
        "the old key's refusal",
      );
    });

    it("a key first seen as unknown works at once after key.upsert (negative cache cleared)", async () => {
      const body = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
      const plaintext = "later-created-key-0123456789";
      assert.equal((await post(`${gw.base}/eth/rpc?apikey=${plaintext}`, body)).status, 401);
      await gw.seeder.putKey({}, plaintext);
      await gw.seeder.publish({ type: "key.upsert", keyHash: hashApiKey(plaintext) });
      await untilStatus(() => post(`${gw.base}/eth/rpc?apikey=${plaintext}`, body), 200, "the new key");
    });

    it("an allowlist edit (key.upsert) applies at once", async () => {
      const plaintext = await gw.seeder.putKey();
      const u = `${gw.base}/eth/rpc?apikey=${plaintext}`;
      const body = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
      assert.equal((await post(u, body, { origin: "https://x.io" })).status, 200);
      await gw.seeder.putKey({ allowlist: { origins: ["https://y.io"], ips: [] } }, plaintext);
      await gw.seeder.publish({ type: "key.upsert", keyHash: hashApiKey(plaintext) });
      assertError(
        await untilStatus(() => post(u, body, { origin: "https://x.io" }), 403, "the new allowlist"),
        GatewayError.OriginNotAllowed,
      );
    });
    it("workspace.update and resync drop cached records (re-read from Redis)", async () => {
      const body = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
      for (const event of [
        { type: "workspace.update", workspaceId: "ws-events" },
        { type: "resync" },
      ] as const) {
        const plaintext = await gw.seeder.putKey({ workspaceId: "ws-events" });
        const u = `${gw.base}/eth/rpc?apikey=${plaintext}`;
        assert.equal((await post(u, body, { origin: "https://x.io" })).status, 200);
        await gw.seeder.putKey(
          { workspaceId: "ws-events", allowlist: { origins: ["https://y.io"], ips: [] } },
          plaintext,
        );
        assert.equal(
          (await post(u, body, { origin: "https://x.io" })).status,
          200,
          "served from the key cache",
        );
        await gw.seeder.publish(event);
        assertError(
          await untilStatus(() => post(u, body, { origin: "https://x.io" }), 403, `${event.type} applied`),
          GatewayError.OriginNotAllowed,
        );
      }
    });
  });

  describe("allowlists and CORS", () => {
    const body = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };

    it("origin allowlist: listed and wildcard origins pass with CORS headers, others 403", async () => {
      const u = `${gw.base}/eth/rpc?apikey=${keys.origins}`;
      const ok = await post(u, body, { origin: "https://app.example.com" });
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get("access-control-allow-origin"), "https://app.example.com");
      assert.equal((await post(u, body, { origin: "https://a.b.dapp.io" })).status, 200);
      const bad = await post(u, body, { origin: "https://evil.io" });
      assertError(bad, GatewayError.OriginNotAllowed);
      assert.equal(bad.headers.get("access-control-allow-origin"), null);
      assertError(await post(u, body), GatewayError.OriginNotAllowed);
      assertError(await post(u, body, { origin: "https://dapp.io" }), GatewayError.OriginNotAllowed);
    });

    it("IP allowlist via X-Forwarded-For from a trusted proxy (v4, v6, mapped)", async () => {
      const u = `${gw.base}/eth/rpc?apikey=${keys.ips}`;
      assert.equal((await post(u, body, { "x-forwarded-for": "203.0.113.9" })).status, 200);
      assert.equal((await post(u, body, { "x-forwarded-for": "10.0.0.1, 2001:db8::5" })).status, 200);
      assert.equal((await post(u, body, { "x-forwarded-for": "::ffff:203.0.113.200" })).status, 200);
      assertError(await post(u, body, { "x-forwarded-for": "198.51.100.1" }), GatewayError.IpNotAllowed);
      // Right-most untrusted hop decides: a spoofed left entry does not help.
      assertError(
        await post(u, body, { "x-forwarded-for": "203.0.113.9, 8.8.8.8" }),
        GatewayError.IpNotAllowed,
      );
      assertError(await post(u, body), GatewayError.IpNotAllowed);
    });

    it("origin OR IP when both kinds are listed", async () => {
      const u = `${gw.base}/eth/rpc?apikey=${keys.both}`;
      assert.equal((await post(u, body, { origin: "https://app.example.com" })).status, 200);
      assert.equal((await post(u, body, { "x-forwarded-for": "198.51.100.7" })).status, 200);
      assert.equal(
        (await post(u, body, { origin: "https://evil.io", "x-forwarded-for": "198.51.100.7" })).status,
        200,
      );
      assertError(
        await post(u, body, { origin: "https://evil.io", "x-forwarded-for": "198.51.100.8" }),
        GatewayError.OriginNotAllowed,
      );
    });

    it("answers CORS preflight for allowed origins and refuses listed-out ones", async () => {
      const pre = await fetch(`${gw.base}/eth/rpc?apikey=${keys.origins}`, {
        method: "OPTIONS",
        headers: {
          origin: "https://app.example.com",
          "access-control-request-method": "POST",
          "access-control-request-headers": "content-type, apikey",
        },
      });
      assert.equal(pre.status, 204);
      assert.equal(pre.headers.get("access-control-allow-origin"), "https://app.example.com");
      assert.match(pre.headers.get("access-control-allow-methods") ?? "", /POST/);
      const allowHeaders = pre.headers.get("access-control-allow-headers") ?? "";
      assert.match(allowHeaders, /apikey/);
      assert.match(allowHeaders, /content-type/);
      const refused = await fetch(`${gw.base}/eth/rpc?apikey=${keys.origins}`, {
        method: "OPTIONS",
        headers: { origin: "https://evil.io", "access-control-request-method": "POST" },
      });
      assert.equal(refused.status, 403);
      assert.equal(refused.headers.get("access-control-allow-origin"), null);
      const noKey = await fetch(`${gw.base}/eth/rpc`, {
        method: "OPTIONS",
        headers: { origin: "https://x.io" },
      });
      assert.equal(noKey.status, 204);
      assert.equal(noKey.headers.get("access-control-allow-origin"), "https://x.io");
    });
  });

  describe("error table", () => {
    it("404 unknown network or path, 405 non-POST, 415 wrong content type", async () => {
      assertError(await post(`${gw.base}/nope/rpc?apikey=${key}`, {}), GatewayError.NotFound);
      assertError(await post(`${gw.base}/eth/whatever?apikey=${key}`, {}), GatewayError.NotFound);
      assertError(await post(`${gw.base}/a/b/c`, {}), GatewayError.NotFound);
      const get = await fetch(url);
      const getJson = await get.json();
      assert.equal(get.status, 405);
      assert.equal(getJson.error.data.reason, GatewayError.MethodNotAllowed.reason);
      assert.equal(getJson.error.code, GatewayError.MethodNotAllowed.code);
      const put = await fetch(url, { method: "PUT", body: "{}" });
      assert.equal(put.status, 405);
      for (const ct of ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", ""]) {
        const r = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_chainId" }, { "content-type": ct });
        assertError(r, GatewayError.UnsupportedMediaType);
      }
      const ok = await post(
        url,
        { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
        {
          "content-type": "application/json; charset=utf-8",
        },
      );
      assert.equal(ok.status, 200);
    });

    it("400 parse error, invalid request, empty batch, batch over 100 with limit", async () => {
      assertError(await post(url, "{not json"), GatewayError.ParseError);
      assertError(await post(url, '{"jsonrpc":"2.0","id":1,"method":"eth_ch'), GatewayError.ParseError);
      assertError(
        await post(url, { jsonrpc: "1.0", id: 1, method: "eth_chainId" }),
        GatewayError.InvalidRequest,
        1,
      );
      assertError(await post(url, { jsonrpc: "2.0", id: 1, method: "" }), GatewayError.InvalidRequest, 1);
      assertError(await post(url, "42"), GatewayError.InvalidRequest);
      assertError(await post(url, "[]"), GatewayError.EmptyBatch);
      const el = { jsonrpc: "2.0", id: 1, method: "eth_chainId" };
      const big = await post(url, Array(101).fill(el));
      assertError(big, GatewayError.BatchTooLarge);
      assert.equal(big.json.error.data.limit, 100);
    });

    it("413 for a body over the cap, by Content-Length and while streaming; server stays up", async () => {
      const big = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["${"a".repeat(10 * 1024 * 1024)}"]}`;
      const r = await rawPost(gw.port(), `/eth/rpc?apikey=${key}`, big, false);
      assert.equal(r.status, 413, r.body);
      assert.equal(JSON.parse(r.body).error.data.reason, GatewayError.BodyTooLarge.reason);
      const chunked = await rawPost(gw.port(), `/eth/rpc?apikey=${key}`, big, true);
      assert.equal(chunked.status, 413, chunked.body.slice(0, 300));
      assert.equal(JSON.parse(chunked.body).error.code, GatewayError.BodyTooLarge.code);
      const after = await post(url, { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
      assert.equal(after.status, 200);
    });

    it("a body just under the cap is read", async () => {
      const pad = " ".repeat(1024 * 1024 - 100);
      const r = await post(url, `${pad}{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`);
      assert.equal(r.status, 200, r.text);
    });
  });

  describe("JSON-RPC semantics", () => {
    it("echoes string, number, null and huge ids exactly", async () => {
      for (const raw of [
        '"abc"',
        '"🦄 \\u0041"',
        "0",
        "-12",
        "null",
        "123456789012345678901234567890",
        "1.5",
      ]) {
        const r = await post(url, `{"jsonrpc":"2.0","id":${raw},"method":"eth_chainId"}`);
        assert.equal(r.status, 200);
        const idText = r.text.slice('{"jsonrpc":"2.0","id":'.length, r.text.indexOf(',"result"'));
        assert.equal(idText, raw === '"🦄 \\u0041"' ? '"🦄 A"' : raw);
      }
      const batch = await post(
        url,
        '[{"jsonrpc":"2.0","id":99999999999999999999999,"method":"eth_chainId"}]',
      );
      assert.ok(batch.text.includes('"id":99999999999999999999999,'), batch.text);
    });

    it("batch of 1 and of 100 answer in request order", async () => {
      const one = await post(url, [{ jsonrpc: "2.0", id: "x", method: "eth_chainId" }]);
      assert.equal(one.status, 200);
      assert.deepEqual(one.json, [{ jsonrpc: "2.0", id: "x", result: "0x7a69" }]);
      const hundred = Array.from({ length: 100 }, (_, i) => ({
        jsonrpc: "2.0",
        id: i % 2 === 0 ? i : `s${i}`,
        method: i % 3 === 0 ? "eth_chainId" : "eth_blockNumber",
      }));
      const r = await post(url, hundred);
      assert.equal(r.status, 200);
      assert.equal(r.json.length, 100);
      r.json.forEach((el: { id: unknown; result: unknown }, i: number) => {
        assert.equal(el.id, hundred[i]!.id);
        assert.ok(el.result !== undefined);
      });
    });

    it("mixed good, invalid and blocked elements get per-element answers in a 200", async () => {
      const r = await post(url, [
        { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
        { jsonrpc: "1.0", id: 2, method: "eth_chainId" },
        5,
        { jsonrpc: "2.0", id: 4, method: "author_rotateKeys" },
        { jsonrpc: "2.0", id: 5, method: "eth_getBalance", params: ["0xzz", "latest"] },
        { jsonrpc: "2.0", id: 6, method: "eth_notAMethod" },
      ]);
      assert.equal(r.status, 200);
      assert.equal(r.json.length, 6);
      assert.equal(r.json[0].result, "0x7a69");
      assert.equal(r.json[1].id, 2);
      assert.equal(r.json[1].error.data.reason, "invalid_request");
      assert.equal(r.json[2].id, null);
      assert.equal(r.json[2].error.code, -32600);
      assert.equal(r.json[3].error.code, -32601);
      assert.equal(r.json[3].error.data.reason, "method_blocked");
      assert.match(r.json[3].error.message, /author_rotateKeys is not available on shared nodes/);
      assert.equal(typeof r.json[4].error.code, "number");
      assert.equal(r.json[5].error.code, -32601);
    });

    it("notifications get no response object; all-notification batches get 204", async () => {
      const single = await post(url, { jsonrpc: "2.0", method: "eth_chainId" });
      assert.equal(single.status, 204);
      assert.equal(single.text, "");
      const batch = await post(url, [
        { jsonrpc: "2.0", method: "eth_chainId" },
        { jsonrpc: "2.0", method: "eth_blockNumber" },
      ]);
      assert.equal(batch.status, 204);
      const mixed = await post(url, [
        { jsonrpc: "2.0", method: "eth_chainId" },
        { jsonrpc: "2.0", id: 2, method: "eth_chainId" },
      ]);
      assert.deepEqual(mixed.json, [{ jsonrpc: "2.0", id: 2, result: "0x7a69" }]);
    });

    it("blocks unsafe methods per element with -32601 and a reason", async () => {
      for (const method of [
        "author_rotateKeys",
        "admin_nodeInfo",
        "debug_traceTransaction",
        "eth_sendTransaction",
        "anvil_setBalance",
        "personal_listAccounts",
      ]) {
        const r = await post(url, { jsonrpc: "2.0", id: 3, method, params: [] });
        assert.equal(r.status, 200);
        assert.equal(r.json.id, 3);
        assert.equal(r.json.error.code, GatewayError.MethodBlocked.code);
        assert.equal(r.json.error.data.category, GatewayError.MethodBlocked.category);
        assert.equal(r.json.error.data.reason, GatewayError.MethodBlocked.reason);
        assert.match(r.json.error.message, new RegExp(`^${method} is not available`));
      }
    });

    it("passes a node's JSON-RPC error through with its code", async () => {
      const r = await post(url, { jsonrpc: "2.0", id: 9, method: "eth_notAMethod", params: [] });
      assert.equal(r.status, 200);
      assert.equal(r.json.id, 9);
      assert.equal(r.json.error.code, -32601);
    });

    it("accepts unicode method names (forwarded; the node answers)", async () => {
      const r = await post(url, { jsonrpc: "2.0", id: 1, method: "ëth_😀" });
      assert.equal(r.status, 200);
      assert.ok(r.json.error, r.text);
    });

    it("keeps a keep-alive connection usable after early rejections", async () => {
      const agent = new (await import("node:http")).Agent({ keepAlive: true, maxSockets: 1 });
      const send = (path: string, headers: Record<string, string>, body: string) =>
        new Promise<number>((resolve, reject) => {
          const req = httpRequest(
            { host: "127.0.0.1", port: gw.port(), path, method: "POST", headers, agent },
            (res) => {
              res.resume();
              res.on("end", () => resolve(res.statusCode ?? 0));
            },
          );
          req.on("error", reject);
          req.end(body);
        });
      const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" });
      assert.equal(await send(`/eth/rpc?apikey=${key}`, { "content-type": "text/plain" }, body), 415);
      assert.equal(await send("/eth/rpc", { "content-type": "application/json" }, body), 401);
      assert.equal(await send(`/eth/rpc?apikey=${key}`, { "content-type": "application/json" }, body), 200);
      agent.destroy();
    });
  });
});

/**
 * POSTs over a raw socket and reads whatever the server answers, tolerating the server closing the
 * connection while the body is still being sent (which is what a 413 mid-body does).
 */
function rawPost(
  port: number,
  path: string,
  body: string,
  chunked: boolean,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const sock = connect(port, "127.0.0.1");
    let received = "";
    let settled = false;
    const settle = () => {
      if (settled) return;
      const at = received.indexOf("\r\n\r\n");
      const m = /content-length: (\d+)/i.exec(received.slice(0, at));
      if (at < 0 || m === null || received.length < at + 4 + Number(m[1])) return;
      settled = true;
      sock.destroy();
      resolve({ status: Number(received.slice(9, 12)), body: received.slice(at + 4, at + 4 + Number(m[1])) });
    };
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => {
      received += d;
      settle();
    });
    sock.on("error", () => undefined);
    sock.on("close", () => {
      if (!settled) resolve({ status: 0, body: `closed after: ${received}` });
    });
    const head = chunked
      ? `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`
      : `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    sock.write(head);
    const step = 64 * 1024;
    let i = 0;
    const pump = () => {
      while (i < body.length && !sock.destroyed) {
        const part = body.slice(i, i + step);
        i += step;
        const ok = sock.write(chunked ? `${part.length.toString(16)}\r\n${part}\r\n` : part);
        if (!ok) return void sock.once("drain", pump);
      }
      if (!sock.destroyed) sock.write(chunked ? "0\r\n\r\n" : "");
    };
    pump();
  });
}
