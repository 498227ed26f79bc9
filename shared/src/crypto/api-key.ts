import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

/**
 * API keys: 32 random bytes as base64url (43 chars, 256 bits). Stored as SHA-256 for lookup (a fast hash
 * is right here: the key has full entropy, so there is nothing to brute-force) plus an AES-256-GCM
 * ciphertext so the console can show the key to workspace members.
 */
export function generateApiKey(): string {
  return randomBytes(32).toString("base64url");
}

export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** Derives the 32-byte AES key from the operator's `KEY_ENCRYPTION_SECRET` (any length). */
export function deriveEncryptionKey(secret: string): Buffer {
  return createHash("sha256").update(`rpc-gateway:key-encryption:${secret}`, "utf8").digest();
}

/** Returns `v1.<iv>.<tag>.<ciphertext>`, all base64url. */
export function encryptSecret(plaintext: string, encryptionKey: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", encryptionKey, iv);
  const ct = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  const tag = cipher.getAuthTag();
  return ["v1", iv.toString("base64url"), tag.toString("base64url"), ct.toString("base64url")].join(".");
}

export function decryptSecret(sealed: string, encryptionKey: Buffer): string {
  const [version, iv, tag, ct] = sealed.split(".");
  if (version !== "v1" || !iv || !tag || ct === undefined) throw new Error("unrecognised ciphertext format");
  const decipher = createDecipheriv("aes-256-gcm", encryptionKey, Buffer.from(iv, "base64url"));
  decipher.setAuthTag(Buffer.from(tag, "base64url"));
  return Buffer.concat([decipher.update(Buffer.from(ct, "base64url")), decipher.final()]).toString("utf8");
}
