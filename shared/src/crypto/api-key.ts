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

/**
 * Ciphertexts are `v2.<iv>.<tag>.<ciphertext>` (base64url): AES-256-GCM with `aad` as additional
 * authenticated data. `aad` names the row the ciphertext belongs to (see `keyCiphertextAad`), so a
 * ciphertext copied into another row fails authentication instead of revealing its key there.
 */
export function encryptSecret(plaintext: string, encryptionKey: Buffer, aad: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", encryptionKey, iv);
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const ct = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  const tag = cipher.getAuthTag();
  return ["v2", iv.toString("base64url"), tag.toString("base64url"), ct.toString("base64url")].join(".");
}

/**
 * Decrypts a `v2` ciphertext bound to `aad`, or a legacy `v1` one (written before row binding, no
 * additional data; `aad` is then not checked). Callers rewrite a `v1` row as `v2` (`isUnboundCiphertext`)
 * and, because `v1` proves nothing about its row, check the plaintext against the row's key hash.
 * Throws on a wrong key, a wrong `aad`, tampering or an unknown format.
 */
export function decryptSecret(sealed: string, encryptionKey: Buffer, aad: string): string {
  const [version, iv, tag, ct, extra] = sealed.split(".");
  if ((version !== "v1" && version !== "v2") || !iv || !tag || ct === undefined || extra !== undefined)
    throw new Error("unrecognised ciphertext format");
  // A full 16-byte tag only: GCM accepts truncated tags, which are easier to forge.
  const decipher = createDecipheriv("aes-256-gcm", encryptionKey, Buffer.from(iv, "base64url"), {
    authTagLength: 16,
  });
  if (version === "v2") decipher.setAAD(Buffer.from(aad, "utf8"));
  decipher.setAuthTag(Buffer.from(tag, "base64url"));
  return Buffer.concat([decipher.update(Buffer.from(ct, "base64url")), decipher.final()]).toString("utf8");
}

/** True for a legacy ciphertext not bound to its row (written before `v2`). */
export function isUnboundCiphertext(sealed: string): boolean {
  return sealed.startsWith("v1.");
}

/** The additional data binding a key (or webhook signing secret) ciphertext to its table and row id. */
export function keyCiphertextAad(
  table: "api_keys" | "dedicated_nodes" | "webhook_endpoints",
  rowId: string,
): string {
  return `rpc-gateway:${table}:${rowId}`;
}
