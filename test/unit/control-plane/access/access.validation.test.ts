import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { GraphQLError } from "graphql";
import {
  normaliseMethods,
  normaliseUserAgents,
  parsePublicKey,
  validCap,
  validClaim,
  validKid,
} from "../../../../control-plane/src/access/access.validation";

function refusedOn(field: string, fn: () => unknown, message?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof GraphQLError);
    assert.equal(err.extensions.code, "BAD_USER_INPUT");
    assert.equal(err.extensions.field, field);
    if (message) assert.match(err.message, message);
    return true;
  });
}

describe("control-plane: access rules and JWT key validation", () => {
  it("reads RSA and EC public keys from SPKI PEM, PKCS#1 PEM and JWK, inferring the algorithm", () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const ec = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const spki = rsa.publicKey.export({ type: "spki", format: "pem" }) as string;
    const pkcs1 = rsa.publicKey.export({ type: "pkcs1", format: "pem" }) as string;
    const fromSpki = parsePublicKey(spki);
    assert.equal(fromSpki.algorithm, "RS256");
    assert.deepEqual(Object.keys(fromSpki.jwk).sort(), ["e", "kty", "n"]);
    assert.deepEqual(parsePublicKey(pkcs1).jwk, fromSpki.jwk);
    const jwk = rsa.publicKey.export({ format: "jwk" });
    assert.deepEqual(
      parsePublicKey(JSON.stringify({ ...jwk, kid: "k", use: "sig", alg: "RS256" })).jwk,
      fromSpki.jwk,
    );
    const e = parsePublicKey(ec.publicKey.export({ type: "spki", format: "pem" }) as string, "ES256");
    assert.equal(e.algorithm, "ES256");
    assert.deepEqual(Object.keys(e.jwk).sort(), ["crv", "kty", "x", "y"]);
    assert.equal(parsePublicKey(JSON.stringify(ec.publicKey.export({ format: "jwk" }))).algorithm, "ES256");
  });

  it("refuses private keys, bad PEM / JWK, weak or unsupported keys, and a mismatched algorithm", () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const small = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const p384 = generateKeyPairSync("ec", { namedCurve: "P-384" });
    const ed = generateKeyPairSync("ed25519");
    refusedOn(
      "key",
      () => parsePublicKey(rsa.privateKey.export({ type: "pkcs8", format: "pem" }) as string),
      /private key/,
    );
    refusedOn(
      "key",
      () => parsePublicKey(JSON.stringify(rsa.privateKey.export({ format: "jwk" }))),
      /private key/,
    );
    refusedOn(
      "key",
      () => parsePublicKey("-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----"),
      /PEM/,
    );
    refusedOn("key", () => parsePublicKey("{ not json"), /JWK/);
    refusedOn("key", () => parsePublicKey('{"kty":"RSA","n":"abc"}'), /not a valid/);
    refusedOn("key", () => parsePublicKey('{"kty":"oct","k":"c2VjcmV0"}'), /kty "oct"/);
    refusedOn("key", () => parsePublicKey("ssh-rsa AAAAB3Nza..."), /PEM .* or a JWK/);
    refusedOn("key", () => parsePublicKey(""), /Paste a public key/);
    refusedOn(
      "key",
      () => parsePublicKey(small.publicKey.export({ type: "spki", format: "pem" }) as string),
      /2048 to 4096 bits \(this one: 1024\)/,
    );
    refusedOn(
      "key",
      () => parsePublicKey(p384.publicKey.export({ type: "spki", format: "pem" }) as string),
      /P-256/,
    );
    refusedOn(
      "key",
      () => parsePublicKey(ed.publicKey.export({ type: "spki", format: "pem" }) as string),
      /Only RSA/,
    );
    refusedOn(
      "algorithm",
      () => parsePublicKey(rsa.publicKey.export({ type: "spki", format: "pem" }) as string, "ES256"),
      /RS256 key, not ES256/,
    );
  });

  it("method lists: names or namespace_*, deduplicated case-insensitively, at most 200", () => {
    assert.deepEqual(normaliseMethods([" eth_call ", "ETH_CALL", "debug_*"]), ["eth_call", "debug_*"]);
    refusedOn("methods", () => normaliseMethods(["eth_call", "rm -rf"]), /"rm -rf" is not a method name/);
    refusedOn("methods", () => normaliseMethods(["*"]));
    refusedOn(
      "methods",
      () => normaliseMethods(Array.from({ length: 201 }, (_, i) => `m_${i}`)),
      /At most 200/,
    );
  });

  it("User-Agent patterns, caps, claims and kids", () => {
    assert.deepEqual(normaliseUserAgents([" MyWallet/* ", "MyWallet/*"]), ["MyWallet/*"]);
    refusedOn("userAgents", () => normaliseUserAgents(["*"]));
    refusedOn("userAgents", () => normaliseUserAgents(Array.from({ length: 21 }, (_, i) => `ua${i}`)));
    assert.equal(validCap("requestsPerSecond", null, 10), null);
    assert.equal(validCap("requestsPerSecond", 10, 10), 10);
    refusedOn("requestsPerSecond", () => validCap("requestsPerSecond", 0, 10));
    refusedOn("requestsPerDay", () => validCap("requestsPerDay", 11, 10));
    refusedOn("requestsPerDay", () => validCap("requestsPerDay", 1.5, 10));
    assert.equal(validClaim("jwtAudience", "  "), null);
    assert.equal(validClaim("jwtAudience", " https://rpc.example "), "https://rpc.example");
    refusedOn("jwtSubject", () => validClaim("jwtSubject", "x".repeat(257)));
    assert.equal(validKid(" key-1 "), "key-1");
    refusedOn("kid", () => validKid("has space"));
    refusedOn("kid", () => validKid(""));
  });
});
