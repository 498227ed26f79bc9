import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";

/** Prefix of an app's API key (docs/contracts.md "API key format"). */
export const APP_KEY_PREFIX = "rpcg_";
/** Prefix of a dedicated node's endpoint key. */
export const NODE_KEY_PREFIX = "rpcn_";
const PREFIXES = [APP_KEY_PREFIX, NODE_KEY_PREFIX];
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** Random characters after the prefix: 43 base62 characters carry 256 bits. */
const RANDOM_CHARS = 43;
/** The checksum: CRC32 of prefix + random part, in 6 base62 characters (62^6 > 2^32), zero-padded. */
const CHECKSUM_CHARS = 6;
/** Length of a prefixed key: prefix (5) + random (43) + checksum (6). */
export const API_KEY_LENGTH = APP_KEY_PREFIX.length + RANDOM_CHARS + CHECKSUM_CHARS;
/** Keys made before the prefix: 32 random bytes as base64url. They keep working. */
const LEGACY_KEY_LENGTH = 43;
const BODY_RE = /^[0-9A-Za-z]+$/;

function base62(n: number, width: number): string {
  let out = "";
  for (let i = 0; i < width; i++) {
    out = BASE62[n % 62]! + out;
    n = Math.floor(n / 62);
  }
  return out;
}

function checksum(prefixAndRandom: string): string {
  return base62(crc32(prefixAndRandom), CHECKSUM_CHARS);
}

/** `n` uniformly random base62 characters (bytes >= 248 are dropped, so `% 62` has no bias). */
function randomBase62(n: number): string {
  let out = "";
  while (out.length < n) {
    for (const b of randomBytes(n)) {
      if (b < 248 && out.length < n) out += BASE62[b % 62];
    }
  }
  return out;
}

/**
 * API keys: a fixed prefix (`rpcg_` for app keys, `rpcn_` for dedicated-node keys), 43 random base62
 * characters (256 bits) and a 6-character CRC32 checksum, the shape GitHub's tokens have, so that secret
 * scanners can recognise a leaked key and tell it from random text without asking us. Stored as SHA-256
 * for lookup (a fast hash is right here: the key has full entropy, so there is nothing to brute-force)
 * plus an AES-256-GCM ciphertext so the console can show the key to workspace members.
 */
export function generateApiKey(prefix: string = APP_KEY_PREFIX): string {
  const body = prefix + randomBase62(RANDOM_CHARS);
  return body + checksum(body);
}

/**
 * True when `key` cannot be a key we issued although it claims the prefixed format: it starts with a
 * known prefix, is not a legacy 43-character key, and its length, alphabet or checksum is wrong. Such a
 * key is refused without a look-up. Anything else (legacy keys, unknown shapes) is looked up as before.
 */
export function malformedApiKey(key: string): boolean {
  if (key.length === LEGACY_KEY_LENGTH) return false;
  const prefix = key.slice(0, APP_KEY_PREFIX.length);
  if (!PREFIXES.includes(prefix)) return false;
  if (key.length !== API_KEY_LENGTH) return true;
  const body = key.slice(0, API_KEY_LENGTH - CHECKSUM_CHARS);
  if (!BODY_RE.test(key.slice(prefix.length))) return true;
  return checksum(body) !== key.slice(API_KEY_LENGTH - CHECKSUM_CHARS);
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
