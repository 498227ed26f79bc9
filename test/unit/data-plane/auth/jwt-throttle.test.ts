import assert from "node:assert/strict";
import { generateKeyPairSync, randomBytes, sign } from "node:crypto";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { CompiledJwt, type JwtCheck, JwtVerifier, jwkAcceptable } from "../../../../data-plane/src/auth/jwt";
import { isThrottled, JwtFailureThrottle } from "../../../../data-plane/src/auth/jwt-throttle";

async function settle(r: JwtCheck | Promise<JwtCheck>): Promise<JwtCheck> {
  return r instanceof Promise ? await r : r;
}

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");

const reason = (r: JwtCheck) => (r.ok ? "ok" : r.row.reason);

/** An RSA public JWK of exactly `bits` bits (a random odd modulus: enough to be read, never to verify). */
function rsaJwk(bits: number, e = "AQAB"): { kty: string; n: string; e: string } {
  const n = randomBytes(bits / 8);
  n[0]! |= 0x80;
  n[n.length - 1]! |= 1;
  return { kty: "RSA", n: n.toString("base64url"), e };
}

describe("data-plane: JWT verification cost (key sizes, kid, failed-check throttle)", () => {
  it("accepts RSA 2048..4096 bits with e = 65537 and EC P-256 only", () => {
    assert.equal(jwkAcceptable("RS256", rsaJwk(2048)), true);
    assert.equal(jwkAcceptable("RS256", rsaJwk(4096)), true);
    assert.equal(jwkAcceptable("RS256", rsaJwk(1024)), false);
    assert.equal(jwkAcceptable("RS256", rsaJwk(2040)), false);
    assert.equal(jwkAcceptable("RS256", rsaJwk(4104)), false);
    assert.equal(jwkAcceptable("RS256", rsaJwk(8192)), false);
    assert.equal(jwkAcceptable("RS256", rsaJwk(2048, "Aw")), false, "e = 3");
    assert.equal(jwkAcceptable("RS256", { kty: "RSA", e: "AQAB" }), false);
    // A leading zero byte does not count towards the size.
    const padded = Buffer.concat([Buffer.alloc(1), Buffer.from(rsaJwk(1024).n, "base64url")]);
    assert.equal(jwkAcceptable("RS256", { kty: "RSA", e: "AQAB", n: padded.toString("base64url") }), false);
    const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ format: "jwk" });
    assert.equal(jwkAcceptable("ES256", ec), true);
    assert.equal(jwkAcceptable("ES256", { ...ec, crv: "P-384" }), false);
    assert.equal(jwkAcceptable("RS256", ec), false);
  });

  it("a published key outside the rules is ignored: a token it signed is an unknown key, checked by nothing", async () => {
    const weak = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const e3 = generateKeyPairSync("rsa", { modulusLength: 2048, publicExponent: 3 });
    const config = new CompiledJwt({
      keys: [
        { kid: "weak", alg: "RS256", jwk: (await exportJWK(weak.publicKey)) as Record<string, string> },
        { kid: "e3", alg: "RS256", jwk: (await exportJWK(e3.publicKey)) as Record<string, string> },
        { kid: "huge", alg: "RS256", jwk: rsaJwk(8192) },
      ],
      audience: null,
      subject: null,
    });
    assert.equal(config.keys.length, 0);
    const v = new JwtVerifier({ maxEntries: 100, nbfLeewaySeconds: 0 });
    const exp = Math.floor(Date.now() / 1000) + 60;
    for (const [kid, key] of [
      ["weak", weak.privateKey],
      ["e3", e3.privateKey],
    ] as const) {
      // Signed by hand: jose will not sign with a 1024-bit key.
      const input = `${b64({ alg: "RS256", kid })}.${b64({ exp })}`;
      const token = `${input}.${sign("sha256", Buffer.from(input), key).toString("base64url")}`;
      assert.equal(reason(await settle(v.check(config, "app", token))), "jwt_unknown_key", kid);
    }
    assert.equal(v.stats().verifications.get("ok"), undefined);
  });

  it("throttle: counts failures per address and per app in fixed windows; a success takes its count back", () => {
    let t = 10_000;
    const th = new JwtFailureThrottle({
      windowMs: 1_000,
      maxFailuresPerAddress: 3,
      maxFailuresPerApp: 5,
      now: () => t,
    });
    for (let i = 0; i < 3; i++) assert.ok(!isThrottled(th.begin("app", "a")));
    const r = th.begin("app", "a");
    assert.ok(isThrottled(r) && r.scope === "address" && r.limit === 3 && r.retryAfterMs === 1_000);
    // Another address still gets the app's remaining 2, then the app is throttled for everyone.
    const ok = th.begin("app", "b");
    assert.ok(!isThrottled(ok));
    th.succeeded(ok);
    assert.ok(!isThrottled(th.begin("app", "b")));
    assert.ok(!isThrottled(th.begin("app", "c")));
    const app = th.begin("app", "d");
    assert.ok(isThrottled(app) && app.scope === "app" && app.limit === 5);
    assert.ok(!isThrottled(th.begin("other-app", "d")), "other apps are not held");
    t += 400;
    const later = th.begin("app", "d");
    assert.ok(isThrottled(later) && later.retryAfterMs === 600);
    t += 600;
    assert.ok(!isThrottled(th.begin("app", "a")), "a new window");
    assert.equal(th.refused, 3);
  });

  it("verifier: past the threshold a new bad token gets 429 jwt_throttled before any check; verified tokens still pass", async () => {
    const rsa = await generateKeyPair("RS256", { extractable: true });
    const stranger = await generateKeyPair("RS256", { extractable: true });
    const config = new CompiledJwt({
      keys: [{ kid: "k", alg: "RS256", jwk: (await exportJWK(rsa.publicKey)) as Record<string, string> }],
      audience: null,
      subject: null,
    });
    const v = new JwtVerifier({
      maxEntries: 1000,
      nbfLeewaySeconds: 0,
      throttle: new JwtFailureThrottle({
        windowMs: 60_000,
        maxFailuresPerAddress: 5,
        maxFailuresPerApp: 100,
      }),
    });
    const exp = Math.floor(Date.now() / 1000) + 600;
    const good = await new SignJWT({ exp })
      .setProtectedHeader({ alg: "RS256", kid: "k" })
      .sign(rsa.privateKey);
    assert.equal(reason(await settle(v.check(config, "app", good, "10.0.0.1"))), "ok");
    const bad = (i: number) =>
      new SignJWT({ exp, jti: String(i) })
        .setProtectedHeader({ alg: "RS256", kid: "k" })
        .sign(stranger.privateKey);
    // Ten distinct bad tokens sent at once: at most five are checked.
    const results = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => settle(v.check(config, "app", await bad(i), "10.0.0.9"))),
    );
    const reasons = results.map(reason).sort();
    assert.deepEqual(reasons, [...Array(5).fill("jwt_bad_signature"), ...Array(5).fill("jwt_throttled")]);
    const throttled = results.find((r) => reason(r) === "jwt_throttled")!;
    assert.ok(!throttled.ok && throttled.row.httpStatus === 429 && throttled.retryAfterMs! > 0);
    assert.equal(v.stats().verifications.get("jwt_bad_signature"), 5, "five signature checks, no more");
    // The token verified before is served from the cache, from the flooding address too.
    assert.equal(reason(await settle(v.check(config, "app", good, "10.0.0.9"))), "ok");
    // A new good token from another address is checked and accepted.
    const fresh = await new SignJWT({ exp, jti: "x" })
      .setProtectedHeader({ alg: "RS256", kid: "k" })
      .sign(rsa.privateKey);
    assert.equal(reason(await settle(v.check(config, "app", fresh, "10.0.0.2"))), "ok");
  });
});
