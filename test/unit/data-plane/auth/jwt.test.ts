import assert from "node:assert/strict";
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { bearerToken, CompiledJwt, type JwtCheck, JwtVerifier } from "../../../../data-plane/src/auth/jwt";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { JwtKeyRecord } from "../../../../shared/src/redis/records";

type Pair = Awaited<ReturnType<typeof generateKeyPair>>;

async function publicRecord(kid: string, alg: "RS256" | "ES256", pair: Pair): Promise<JwtKeyRecord> {
  const jwk = (await exportJWK(pair.publicKey)) as Record<string, string>;
  return { kid, alg, jwk };
}

const now = () => Math.floor(Date.now() / 1000);

async function sign(
  pair: Pair,
  alg: "RS256" | "ES256",
  claims: JWTPayload,
  header: { kid?: string } = {},
): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg, ...header }).sign(pair.privateKey);
}

async function settle(r: JwtCheck | Promise<JwtCheck>): Promise<JwtCheck> {
  return r instanceof Promise ? await r : r;
}

function reason(r: JwtCheck): string {
  return r.ok ? "ok" : r.row.reason;
}

describe("data-plane: app JWT verification (jose) and its verdict cache", () => {
  let rsa: Pair;
  let rsa2: Pair;
  let ec: Pair;
  let config: CompiledJwt;

  before(async () => {
    rsa = await generateKeyPair("RS256", { extractable: true });
    rsa2 = await generateKeyPair("RS256", { extractable: true });
    ec = await generateKeyPair("ES256", { extractable: true });
    config = new CompiledJwt({
      keys: [await publicRecord("rsa-1", "RS256", rsa), await publicRecord("ec-1", "ES256", ec)],
      audience: "https://rpc.example",
      subject: null,
    });
  });

  const good = () => ({ aud: "https://rpc.example", exp: now() + 600 });

  it("accepts RS256 and ES256 tokens selected by kid; without one only when the app has a single key", async () => {
    const v = new JwtVerifier({ maxEntries: 100, nbfLeewaySeconds: 30 });
    const exp = now() + 600;
    const r1 = await settle(
      v.check(config, "app", await sign(rsa, "RS256", { ...good(), exp }, { kid: "rsa-1" })),
    );
    assert.deepEqual(r1, { ok: true, expiresAtMs: exp * 1000 });
    assert.equal(
      reason(await settle(v.check(config, "app", await sign(ec, "ES256", good(), { kid: "ec-1" })))),
      "ok",
    );
    // Two keys: a token without kid is refused before any signature check (kid required).
    const noKid = await settle(v.check(config, "app", await sign(ec, "ES256", good())));
    assert.equal(reason(noKid), "jwt_malformed");
    assert.match(noKid.ok ? "" : (noKid.message ?? ""), /kid required: the app has 2 keys/);
    assert.equal(
      reason(await settle(v.check(config, "app", await sign(rsa, "RS256", good())))),
      "jwt_malformed",
    );
    const single = new CompiledJwt({
      keys: [await publicRecord("rsa-1", "RS256", rsa)],
      audience: "https://rpc.example",
      subject: null,
    });
    assert.equal(reason(await settle(v.check(single, "app", await sign(rsa, "RS256", good())))), "ok");
  });

  it("refuses with a reason: missing, malformed, unknown kid, bad signature, expired, nbf, aud, sub", async () => {
    const v = new JwtVerifier({ maxEntries: 100, nbfLeewaySeconds: 30 });
    const check = async (token: string, c = config) => settle(v.check(c, "app", token));
    assert.equal(reason(await check("")), "jwt_missing");
    assert.equal(reason(await check("not.a.jwt")), "jwt_malformed");
    assert.equal(reason(await check("abc")), "jwt_malformed");
    const unknownKid = await check(await sign(rsa, "RS256", good(), { kid: "nope" }));
    assert.equal(reason(unknownKid), "jwt_unknown_key");
    assert.match((unknownKid as { message: string }).message, /kid "nope"/);
    // Another key's signature under a registered kid, and without a kid.
    assert.equal(
      reason(await check(await sign(rsa2, "RS256", good(), { kid: "rsa-1" }))),
      "jwt_bad_signature",
    );
    assert.equal(reason(await check(await sign(rsa2, "RS256", good()))), "jwt_malformed", "kid required");
    // A tampered payload.
    const t = (await sign(rsa, "RS256", good(), { kid: "rsa-1" })).split(".");
    const forged = Buffer.from(
      JSON.stringify({ aud: "https://rpc.example", exp: now() + 9999, admin: true }),
    ).toString("base64url");
    assert.equal(reason(await check(`${t[0]}.${forged}.${t[2]}`)), "jwt_bad_signature");
    assert.equal(
      reason(await check(await sign(rsa, "RS256", { ...good(), exp: now() - 5 }, { kid: "rsa-1" }))),
      "jwt_expired",
    );
    // exp gets no leeway even though nbf does (30 s here): 1 s in the past is expired.
    assert.equal(
      reason(await check(await sign(rsa, "RS256", { ...good(), exp: now() - 1 }, { kid: "rsa-1" }))),
      "jwt_expired",
    );
    assert.equal(
      reason(await check(await sign(rsa, "RS256", { ...good(), nbf: now() + 120 }, { kid: "rsa-1" }))),
      "jwt_not_yet_valid",
    );
    assert.equal(
      reason(await check(await sign(rsa, "RS256", { ...good(), nbf: now() + 10 }, { kid: "rsa-1" }))),
      "ok",
      "nbf within the leeway",
    );
    assert.equal(
      reason(await check(await sign(rsa, "RS256", { ...good(), aud: "https://other" }, { kid: "rsa-1" }))),
      "jwt_wrong_audience",
    );
    assert.equal(
      reason(
        await check(
          await sign(rsa, "RS256", { ...good(), aud: ["x", "https://rpc.example"] }, { kid: "rsa-1" }),
        ),
      ),
      "ok",
      "aud as an array containing the app's",
    );
    const noExp = await check(await sign(rsa, "RS256", { aud: "https://rpc.example" }, { kid: "rsa-1" }));
    assert.equal(reason(noExp), "jwt_malformed");
    assert.match((noExp as { message: string }).message, /no exp claim/);
    const subConfig = new CompiledJwt({
      keys: [await publicRecord("rsa-1", "RS256", rsa)],
      audience: null,
      subject: "svc-a",
    });
    assert.equal(
      reason(await check(await sign(rsa, "RS256", { exp: now() + 60, sub: "svc-b" }), subConfig)),
      "jwt_wrong_subject",
    );
    assert.equal(
      reason(await check(await sign(rsa, "RS256", { exp: now() + 60, sub: "svc-a" }), subConfig)),
      "ok",
    );
    // alg none and HS256 (an old alg-confusion trick) are refused before any key is used.
    const none = `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from(JSON.stringify(good())).toString("base64url")}.`;
    assert.equal(reason(await check(none)), "jwt_malformed");
    const hs = await new SignJWT(good()).setProtectedHeader({ alg: "HS256" }).sign(new Uint8Array(32));
    assert.equal(reason(await check(hs)), "jwt_malformed");
    // A kid whose key is the other algorithm.
    assert.equal(reason(await check(await sign(rsa, "RS256", good(), { kid: "ec-1" }))), "jwt_bad_signature");
  });

  it("verifies a token once: later checks, and checks while the first runs, are cache hits", async () => {
    const v = new JwtVerifier({ maxEntries: 100, nbfLeewaySeconds: 30 });
    const token = await sign(rsa, "RS256", good(), { kid: "rsa-1" });
    const first = await Promise.all(Array.from({ length: 20 }, () => settle(v.check(config, "app", token))));
    assert.ok(first.every((r) => r.ok));
    assert.equal(v.stats().verifications.get("ok"), 1, "20 concurrent checks, one verification");
    const again = v.check(config, "app", token);
    assert.ok(!(again instanceof Promise), "a cached verdict is answered synchronously");
    assert.equal((again as JwtCheck).ok, true);
    assert.equal(v.stats().verifications.get("ok"), 1);
    assert.ok(v.stats().cacheHits >= 1);
    // Another app, or other settings (keys re-published), verify again.
    await settle(v.check(config, "other-app", token));
    assert.equal(v.stats().verifications.get("ok"), 2);
    const republished = new CompiledJwt({
      keys: [await publicRecord("rsa-1", "RS256", rsa)],
      audience: "https://rpc.example",
      subject: null,
    });
    await settle(v.check(republished, "app", token));
    assert.equal(v.stats().verifications.get("ok"), 3);
    // A refusal is remembered too (no signature check per retry of a bad token).
    const bad = await sign(rsa2, "RS256", good(), { kid: "rsa-1" });
    await settle(v.check(config, "app", bad));
    await settle(v.check(config, "app", bad));
    assert.equal(v.stats().verifications.get("jwt_bad_signature"), 1);
  });

  it("a cached token stops being accepted when it expires (verdicts live until exp)", async () => {
    let clockMs = Date.now();
    const v = new JwtVerifier({ maxEntries: 100, nbfLeewaySeconds: 0, nowMs: () => clockMs });
    const exp = Math.floor(clockMs / 1000) + 2;
    const token = await sign(rsa, "RS256", { aud: "https://rpc.example", exp }, { kid: "rsa-1" });
    assert.equal(reason(await settle(v.check(config, "app", token))), "ok");
    clockMs = exp * 1000 - 1;
    assert.equal(
      reason(await settle(v.check(config, "app", token))),
      "ok",
      "served from the cache until exp",
    );
    assert.equal(v.stats().verifications.get("ok"), 1);
    clockMs = exp * 1000;
    assert.equal(reason(await settle(v.check(config, "app", token))), "jwt_expired");
  });

  it("the cache is bounded (least recently used out)", async () => {
    const v = new JwtVerifier({ maxEntries: 3, nbfLeewaySeconds: 30 });
    for (let i = 0; i < 6; i++)
      await settle(
        v.check(config, "app", await sign(ec, "ES256", { ...good(), jti: String(i) }, { kid: "ec-1" })),
      );
    assert.equal(v.size, 3);
  });

  it("reads Bearer tokens from Authorization values", () => {
    assert.equal(bearerToken("Bearer abc.def.ghi"), "abc.def.ghi");
    assert.equal(bearerToken("bearer   abc.def.ghi "), "abc.def.ghi");
    assert.equal(bearerToken("Basic dXNlcjpwYXNz"), "");
    assert.equal(bearerToken(""), "");
    assert.equal(bearerToken("Bearer "), "");
    assert.equal(GatewayError.JwtMissing.httpStatus, 401);
  });
});
