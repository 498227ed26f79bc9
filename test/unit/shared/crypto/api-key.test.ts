import assert from "node:assert/strict";
import { createCipheriv, randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";
import {
  API_KEY_LENGTH,
  decryptSecret,
  deriveEncryptionKey,
  encryptSecret,
  generateApiKey,
  hashApiKey,
  isUnboundCiphertext,
  keyCiphertextAad,
  malformedApiKey,
  NODE_KEY_PREFIX,
} from "../../../../shared/src/crypto/api-key";

describe("shared/crypto api-key", () => {
  it("generates distinct prefixed keys: rpcg_ (apps) or rpcn_ (nodes), 43 base62, a CRC32 check", () => {
    const a = generateApiKey();
    const b = generateApiKey();
    assert.notEqual(a, b);
    assert.match(a, /^rpcg_[0-9A-Za-z]{49}$/);
    assert.equal(a.length, API_KEY_LENGTH);
    assert.match(generateApiKey(NODE_KEY_PREFIX), /^rpcn_[0-9A-Za-z]{49}$/);
    // The check is the CRC32 of prefix + random part, as 6 base62 digits (0-9A-Za-z order).
    const body = a.slice(0, -6);
    let n = crc32(body);
    let check = "";
    for (let i = 0; i < 6; i++) {
      check = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[n % 62] + check;
      n = Math.floor(n / 62);
    }
    assert.equal(a.slice(-6), check);
    // Uniform characters: over 200 keys every base62 character shows up.
    const seen = new Set(Array.from({ length: 200 }, () => generateApiKey().slice(5, 48)).join(""));
    assert.equal(seen.size, 62);
  });

  it("tells a key with a wrong checksum or shape from ours; legacy and foreign keys are left to the look-up", () => {
    for (let i = 0; i < 100; i++) {
      assert.equal(malformedApiKey(generateApiKey()), false);
      assert.equal(malformedApiKey(generateApiKey(NODE_KEY_PREFIX)), false);
    }
    const k = generateApiKey();
    const flip = (s: string, at: number) => s.slice(0, at) + (s[at] === "a" ? "b" : "a") + s.slice(at + 1);
    assert.equal(malformedApiKey(flip(k, 10)), true, "a changed random character");
    assert.equal(malformedApiKey(flip(k, k.length - 1)), true, "a changed check character");
    assert.equal(malformedApiKey(`rpcn_${k.slice(5)}`), true, "the other prefix");
    assert.equal(malformedApiKey(k.slice(0, -1)), true, "too short");
    assert.equal(malformedApiKey(`${k}x`), true, "too long");
    assert.equal(malformedApiKey(`${k.slice(0, 20)}-${k.slice(21)}`), true, "not base62");
    // Legacy keys (43 base64url characters), even one that happens to start like a prefixed key.
    assert.equal(malformedApiKey(randomBytes(32).toString("base64url")), false);
    assert.equal(malformedApiKey(`rpcg_${randomBytes(32).toString("base64url").slice(0, 38)}`), false);
    assert.equal(malformedApiKey("something-else"), false);
  });

  it("hashes with SHA-256 hex", () => {
    assert.equal(hashApiKey("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it("round-trips through AES-GCM and rejects tampering or the wrong secret", () => {
    const k = deriveEncryptionKey("s1");
    const sealed = encryptSecret("my-key", k, "row-1");
    assert.match(sealed, /^v2\./);
    assert.equal(decryptSecret(sealed, k, "row-1"), "my-key");
    assert.throws(() => decryptSecret(sealed, deriveEncryptionKey("s2"), "row-1"));
    const parts = sealed.split(".");
    parts[3] = Buffer.from("other").toString("base64url");
    assert.throws(() => decryptSecret(parts.join("."), k, "row-1"));
  });

  it("binds a ciphertext to its row: another row's additional data does not decrypt it", () => {
    const k = deriveEncryptionKey("s1");
    const a = keyCiphertextAad("api_keys", "11111111-1111-4111-8111-111111111111");
    const b = keyCiphertextAad("api_keys", "22222222-2222-4222-8222-222222222222");
    const n = keyCiphertextAad("dedicated_nodes", "11111111-1111-4111-8111-111111111111");
    const sealed = encryptSecret("key-of-a", k, a);
    assert.equal(decryptSecret(sealed, k, a), "key-of-a");
    assert.throws(() => decryptSecret(sealed, k, b), /unable to authenticate/i);
    assert.throws(() => decryptSecret(sealed, k, n), /unable to authenticate/i, "same id, other table");
    assert.equal(isUnboundCiphertext(sealed), false);
  });

  it("still opens legacy v1 ciphertexts (no additional data) and flags them for rewriting", () => {
    const k = deriveEncryptionKey("s1");
    // The v1 format exactly as written before row binding.
    const iv = randomBytes(12);
    const c = createCipheriv("aes-256-gcm", k, iv);
    const ct = Buffer.concat([c.update("old-key", "utf8"), c.final()]);
    const v1 = [
      "v1",
      iv.toString("base64url"),
      c.getAuthTag().toString("base64url"),
      ct.toString("base64url"),
    ].join(".");
    assert.equal(isUnboundCiphertext(v1), true);
    assert.equal(decryptSecret(v1, k, "any-row"), "old-key");
    assert.throws(() => decryptSecret(v1, deriveEncryptionKey("s2"), "any-row"));
  });

  it("refuses unknown versions, extra parts and truncated tags", () => {
    const k = deriveEncryptionKey("s1");
    const sealed = encryptSecret("my-key", k, "r");
    const [, iv, tag, ct] = sealed.split(".");
    assert.throws(() => decryptSecret(["v3", iv, tag, ct].join("."), k, "r"), /unrecognised/);
    assert.throws(() => decryptSecret(`${sealed}.x`, k, "r"), /unrecognised/);
    const short = Buffer.from(tag!, "base64url").subarray(0, 4).toString("base64url");
    assert.throws(() => decryptSecret(["v2", iv, short, ct].join("."), k, "r"));
  });
});
