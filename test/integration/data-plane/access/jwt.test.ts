import assert from "node:assert/strict";
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { hashApiKey } from "../../../../shared/src/crypto/api-key";
import type { AccessRecord, JwtKeyRecord } from "../../../../shared/src/redis/records";
import { eventually } from "../../../helpers/eventually";
import { evmNetwork } from "../../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "../harness";
import { call, RecordingUpstream } from "../limits/fixtures";
import { TestWsClient } from "../ws/ws-client";

/**
 * Apps that require JWTs, on the data plane over HTTP and WebSocket (real Redis, records as the control
 * plane publishes them): every reason a token is refused, the verdict cache (the same token is verified
 * once, counted on /metrics), WebSocket upgrades with the token in a header or `?jwt=`, and a session
 * closed when its token expires.
 */

type Pair = Awaited<ReturnType<typeof generateKeyPair>>;
const AUD = "https://rpc.example";
const now = () => Math.floor(Date.now() / 1000);

async function keyRecord(kid: string, alg: "RS256" | "ES256", pair: Pair): Promise<JwtKeyRecord> {
  return { kid, alg, jwk: (await exportJWK(pair.publicKey)) as Record<string, string> };
}

function sign(pair: Pair, alg: "RS256" | "ES256", claims: JWTPayload, kid?: string): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader(kid === undefined ? { alg } : { alg, kid })
    .sign(pair.privateKey);
}

// biome-ignore lint/suspicious/noExplicitAny: test convenience
function reasonOf(json: any): string | undefined {
  return json?.error?.data?.reason;
}

async function metric(g: Gateway, name: string, labels = ""): Promise<number> {
  const text = await (await fetch(`${g.metricsBase}/metrics`)).text();
  const escaped = `${name}${labels}`.replace(/[{}"=]/g, (c) => `\\${c}`);
  const m = new RegExp(`^${escaped} (\\d+)$`, "m").exec(text);
  return m === null ? 0 : Number(m[1]);
}

describe("data plane: apps that require a JWT (HTTP and WebSocket)", function () {
  this.timeout(60_000);
  let up: RecordingUpstream;
  let g: Gateway;
  let rsa: Pair;
  let ec: Pair;
  let stranger: Pair;
  let key = "";
  let rules: AccessRecord;
  let url = "";
  let wsBase = "";

  before(async () => {
    rsa = await generateKeyPair("RS256");
    ec = await generateKeyPair("ES256");
    stranger = await generateKeyPair("RS256");
    rules = {
      methodMode: "DENY",
      methods: [],
      requestsPerSecond: null,
      requestsPerDay: null,
      userAgents: [],
      jwt: {
        keys: [await keyRecord("rsa-1", "RS256", rsa), await keyRecord("ec-1", "ES256", ec)],
        audience: AUD,
        subject: null,
      },
    };
    up = await new RecordingUpstream().start();
    // The failed-verification throttle has its own suite (jwt-hardening.test.ts).
    g = await startGateway({ JWT_NBF_LEEWAY_S: "5", JWT_MAX_FAILURES_PER_ADDRESS: "100000" }, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
      key = await s.putKey({ appId: "app-jwt", access: rules });
    });
    url = `${g.base}/eth/rpc?apikey=${key}`;
    wsBase = `ws://127.0.0.1:${g.port()}/eth/rpc?apikey=${key}`;
  });

  after(async () => {
    await g?.stop();
    await up?.stop();
  });

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  it("serves a request with a valid token by kid; without kid, an app with two keys refuses it (kid required)", async () => {
    const byKid = await post(
      url,
      call("eth_chainId"),
      bearer(await sign(rsa, "RS256", { aud: AUD, exp: now() + 60 }, "rsa-1")),
    );
    assert.equal(byKid.status, 200, byKid.text);
    assert.equal(byKid.json.result, "0x7a69");
    const noKid = await post(
      url,
      call("eth_chainId"),
      bearer(await sign(ec, "ES256", { aud: AUD, exp: now() + 60 })),
    );
    assert.equal(noKid.status, 401, noKid.text);
    assert.equal(reasonOf(noKid.json), "jwt_malformed");
    assert.match(noKid.json.error.message, /kid required: the app has 2 keys/);
  });

  it("refuses with 401 -32016 and a reason: none, malformed, unknown kid, wrong key, expired, not yet valid, wrong audience", async () => {
    const cases: [string, Record<string, string>][] = [
      ["jwt_missing", {}],
      ["jwt_missing", { authorization: "Basic dXNlcjpwYXNz" }],
      ["jwt_malformed", bearer("not-a-jwt")],
      ["jwt_unknown_key", bearer(await sign(rsa, "RS256", { aud: AUD, exp: now() + 60 }, "rsa-9"))],
      ["jwt_bad_signature", bearer(await sign(stranger, "RS256", { aud: AUD, exp: now() + 60 }, "rsa-1"))],
      ["jwt_malformed", bearer(await sign(stranger, "RS256", { aud: AUD, exp: now() + 60 }))],
      ["jwt_expired", bearer(await sign(rsa, "RS256", { aud: AUD, exp: now() - 30 }, "rsa-1"))],
      [
        "jwt_not_yet_valid",
        bearer(await sign(rsa, "RS256", { aud: AUD, exp: now() + 600, nbf: now() + 300 }, "rsa-1")),
      ],
      [
        "jwt_wrong_audience",
        bearer(await sign(rsa, "RS256", { aud: "https://elsewhere", exp: now() + 60 }, "rsa-1")),
      ],
      ["jwt_malformed", bearer(await sign(rsa, "RS256", { aud: AUD }, "rsa-1"))],
    ];
    const before = up.count("eth_chainId");
    for (const [reason, headers] of cases) {
      const r = await post(url, call("eth_chainId", 7), headers);
      assert.equal(r.status, 401, `${reason}: ${r.text}`);
      assert.equal(r.json.error.code, -32016);
      assert.equal(reasonOf(r.json), reason, r.text);
      assert.equal(r.json.id, null);
      assert.match(r.json.error.message, /^Unauthorized: JWT/);
    }
    assert.equal(up.count("eth_chainId"), before, "nothing refused was forwarded");
    // The message says which key or claim (beyond the row's text).
    const unknown = await post(
      url,
      call("eth_chainId"),
      bearer(await sign(rsa, "RS256", { aud: AUD, exp: now() + 60 }, "nope")),
    );
    assert.match(unknown.json.error.message, /kid "nope"/);
  });

  it("verifies a token once: 30 requests with it (10 at once) cost one verification (rpcgw_jwt_verifications_total)", async () => {
    const token = await sign(rsa, "RS256", { aud: AUD, exp: now() + 120, jti: "cache-test" }, "rsa-1");
    const okBefore = await metric(g, "rpcgw_jwt_verifications_total", '{result="ok"}');
    const hitsBefore = await metric(g, "rpcgw_jwt_cache_hits_total");
    const first = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post(url, call("lim_jwt", i), bearer(token))),
    );
    for (let i = 0; i < 20; i++)
      assert.equal((await post(url, call("lim_jwt", 100 + i), bearer(token))).status, 200);
    assert.ok(first.every((r) => r.status === 200));
    assert.equal(await metric(g, "rpcgw_jwt_verifications_total", '{result="ok"}'), okBefore + 1);
    assert.ok((await metric(g, "rpcgw_jwt_cache_hits_total")) >= hitsBefore + 20);
    // Another token is another verification.
    const other = await sign(rsa, "RS256", { aud: AUD, exp: now() + 120, jti: "other" }, "rsa-1");
    assert.equal((await post(url, call("lim_jwt", 999), bearer(other))).status, 200);
    assert.equal(await metric(g, "rpcgw_jwt_verifications_total", '{result="ok"}'), okBefore + 2);
  });

  it("a cached token is refused once it expires (no leeway on exp)", async () => {
    const exp = now() + 2;
    const token = await sign(ec, "ES256", { aud: AUD, exp }, "ec-1");
    assert.equal((await post(url, call("eth_chainId"), bearer(token))).status, 200);
    // Asked again and again until refused: served (from the cache) while valid, refused from exp on.
    const late = await eventually(
      async () => {
        const r = await post(url, call("eth_chainId"), bearer(token));
        if (r.status === 200) return undefined;
        return { r, answeredAtMs: Date.now() };
      },
      "the token's refusal",
      15_000,
      100,
    );
    assert.equal(late.r.status, 401);
    assert.equal(reasonOf(late.r.json), "jwt_expired");
    assert.ok(late.answeredAtMs >= exp * 1000, "not refused before exp");
  });

  it("CORS preflights allow the Authorization header", async () => {
    const r = await fetch(url, {
      method: "OPTIONS",
      headers: {
        origin: "https://dapp.example",
        "access-control-request-headers": "authorization, content-type",
      },
    });
    assert.equal(r.status, 204);
    assert.match(r.headers.get("access-control-allow-headers") ?? "", /\bauthorization\b/);
  });

  it("WebSocket: the token is checked at the upgrade (header or ?jwt=); missing or bad -> the HTTP refusal", async () => {
    await assert.rejects(TestWsClient.open(wsBase), (err: { status: number; body: unknown }) => {
      assert.equal(err.status, 401);
      assert.equal(reasonOf(err.body), "jwt_missing");
      return true;
    });
    const wrongAud = await sign(rsa, "RS256", { aud: "x", exp: now() + 60 }, "rsa-1");
    await assert.rejects(
      TestWsClient.open(`${wsBase}&jwt=${wrongAud}`),
      (err: { status: number; body: unknown }) => {
        assert.equal(err.status, 401);
        assert.equal(reasonOf(err.body), "jwt_wrong_audience");
        return true;
      },
    );
    const token = await sign(rsa, "RS256", { aud: AUD, exp: now() + 60 }, "rsa-1");
    const viaHeader = await TestWsClient.open(wsBase, bearer(token));
    const viaQuery = await TestWsClient.open(`${wsBase}&jwt=${encodeURIComponent(token)}`);
    try {
      assert.equal((await viaHeader.call("eth_chainId")).result, "0x7a69");
      assert.equal((await viaQuery.call("eth_chainId")).result, "0x7a69");
    } finally {
      viaHeader.close();
      viaQuery.close();
    }
  });

  it("WebSocket: the session is closed with 4003 when its token expires", async () => {
    const exp = now() + 2;
    const ws = await TestWsClient.open(`${wsBase}&jwt=${await sign(ec, "ES256", { aud: AUD, exp }, "ec-1")}`);
    assert.equal((await ws.call("eth_chainId")).result, "0x7a69");
    await ws.waitClosed(15_000);
    assert.equal(ws.closeCode, 4003);
    assert.equal(ws.closeReason, "jwt expired or refused");
    assert.ok(Date.now() >= exp * 1000, "not before the token expired");
  });

  it("WebSocket: an open session without a token is closed (4003) when the app starts requiring JWTs", async () => {
    let plain = "";
    const g2 = await startGateway({}, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
      plain = await s.putKey({ appId: "app-later" });
    });
    try {
      const ws = await TestWsClient.open(`ws://127.0.0.1:${g2.port()}/eth/rpc?apikey=${plain}`);
      assert.equal((await ws.call("eth_chainId")).result, "0x7a69");
      await g2.seeder.putKey({ appId: "app-later", access: rules }, plain);
      await g2.seeder.publish({ type: "key.upsert", keyHash: hashApiKey(plain) });
      await ws.waitClosed(5000);
      assert.equal(ws.closeCode, 4003);
    } finally {
      await g2.stop();
    }
  });
});
