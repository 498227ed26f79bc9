import assert from "node:assert/strict";
import {
  decryptSecret,
  deriveEncryptionKey,
  encryptSecret,
  generateApiKey,
  hashApiKey,
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
    const sealed = encryptSecret("my-key", k);
    assert.equal(decryptSecret(sealed, k), "my-key");
    assert.throws(() => decryptSecret(sealed, deriveEncryptionKey("s2")));
    const parts = sealed.split(".");
    parts[3] = Buffer.from("other").toString("base64url");
    assert.throws(() => decryptSecret(parts.join("."), k));
  });
});
