import assert from "node:assert/strict";
import { createCipheriv, randomBytes } from "node:crypto";
import {
  decryptSecret,
  deriveEncryptionKey,
  encryptSecret,
  generateApiKey,
  hashApiKey,
  isUnboundCiphertext,
  keyCiphertextAad,
} from "../../../../shared/src/crypto/api-key";

describe("shared/crypto api-key", () => {
  it("generates distinct 256-bit url-safe keys", () => {
    const a = generateApiKey();
    const b = generateApiKey();
    assert.notEqual(a, b);
    assert.match(a, /^[A-Za-z0-9_-]{43}$/);
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
