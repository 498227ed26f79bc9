import { createPublicKey, type KeyObject } from "node:crypto";
import {
  isMethodPattern,
  isUserAgentPattern,
  METHOD_PATTERN_MAX,
  USER_AGENT_PATTERN_MAX,
} from "../../../shared/src/access/patterns";
import { badInput } from "../common/errors";

/**
 * What an app's access rules and JWT keys may hold, checked before anything is stored (the data plane
 * matches exactly these forms: shared/src/access/patterns.ts). Refusals are BAD_USER_INPUT naming the
 * input field.
 */

/** Entries in an app's method list (keeps key records small; a real allow-list is a few dozen). */
export const METHODS_MAX = 200;
/** User-Agent patterns per app. */
export const USER_AGENTS_MAX = 20;
/** The app's per-second cap: 1 .. this. */
export const REQUESTS_PER_SECOND_MAX = 1_000_000;
/** The app's per-second cap in compute units: 1 .. this. */
export const COMPUTE_UNITS_PER_SECOND_MAX = 1_000_000_000;
/** The app's daily cap: 1 .. this (GraphQL Int). */
export const REQUESTS_PER_DAY_MAX = 2_000_000_000;
/** Longest `aud` / `sub` an app may require. */
export const CLAIM_MAX = 256;
/** Longest key id. */
export const KID_MAX = 128;
/** Longest PEM or JWK text accepted (an RSA-8192 certificate fits). */
export const KEY_TEXT_MAX = 16_384;
/**
 * RSA moduli accepted for RS256 (bits), and the one public exponent (65537). The data plane verifies a
 * signature per uncached token: a larger modulus costs it more CPU per request than a request is worth,
 * a smaller one or an odd exponent (e = 3) is weak. The data plane ignores a published key outside these.
 */
export const RSA_MIN_BITS = 2048;
export const RSA_MAX_BITS = 4096;
export const RSA_EXPONENT = 65537n;

export type JwtAlgorithmName = "RS256" | "ES256";

/** Method entries: trimmed, each an exact name or `namespace_*`, no case-insensitive duplicates. */
export function normaliseMethods(raw: readonly string[]): string[] {
  if (raw.length > METHODS_MAX) throw badInput("methods", `At most ${METHODS_MAX} methods per app`);
  const out: string[] = [];
  const seen = new Set<string>();
  for (const r of raw) {
    const m = r.trim();
    if (!isMethodPattern(m)) {
      throw badInput(
        "methods",
        `${JSON.stringify(m.slice(0, METHOD_PATTERN_MAX))} is not a method name (eth_call) or a namespace pattern (debug_*)`,
      );
    }
    const k = m.toLowerCase();
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(m);
  }
  return out;
}

/** User-Agent patterns: trimmed, printable ASCII globs (`*` = any run), no duplicates. */
export function normaliseUserAgents(raw: readonly string[]): string[] {
  if (raw.length > USER_AGENTS_MAX)
    throw badInput("userAgents", `At most ${USER_AGENTS_MAX} User-Agent patterns per app`);
  const out: string[] = [];
  for (const r of raw) {
    const p = r.trim();
    if (!isUserAgentPattern(p)) {
      throw badInput(
        "userAgents",
        `User-Agent patterns are 1-${USER_AGENT_PATTERN_MAX} printable ASCII characters with * as a wildcard (not only *), e.g. MyWallet/*`,
      );
    }
    if (!out.includes(p)) out.push(p);
  }
  return out;
}

/** A cap: null clears it; otherwise an integer in 1..max. */
export function validCap(field: string, value: number | null, max: number): number | null {
  if (value === null) return null;
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw badInput(field, `${field} must be 1..${max} (or null for no cap)`);
  }
  return value;
}

/** A required `aud` / `sub`: null or blank clears it. */
export function validClaim(field: string, value: string | null): string | null {
  if (value === null) return null;
  const v = value.trim();
  if (v === "") return null;
  if (v.length > CLAIM_MAX || !/^[\x20-\x7e]+$/.test(v)) {
    throw badInput(field, `${field} must be 1-${CLAIM_MAX} printable ASCII characters`);
  }
  return v;
}

export function validKid(raw: string): string {
  const kid = raw.trim();
  if (kid.length < 1 || kid.length > KID_MAX || !/^[\x21-\x7e]+$/.test(kid)) {
    throw badInput("kid", `The key id (kid) must be 1-${KID_MAX} printable ASCII characters without spaces`);
  }
  return kid;
}

/** A validated public key: its algorithm and its public JWK (no private members, no `kid`/`alg`/`use`). */
export interface ParsedPublicKey {
  algorithm: JwtAlgorithmName;
  jwk: Record<string, string>;
}

/**
 * Reads a public key given as PEM (SPKI `PUBLIC KEY`, PKCS#1 `RSA PUBLIC KEY` or an X.509 `CERTIFICATE`) or
 * as a JWK (JSON object), and checks it can sign `algorithm` (inferred from the key when not given):
 * RS256 = RSA of at least 2048 bits, ES256 = EC P-256. Private keys are refused outright (a JWK with `d`,
 * a PEM `PRIVATE KEY`): the gateway must never hold one, and its owner should treat it as leaked.
 */
export function parsePublicKey(raw: string, algorithm?: JwtAlgorithmName | null): ParsedPublicKey {
  const text = raw.trim();
  if (text === "") throw badInput("key", "Paste a public key: PEM (-----BEGIN PUBLIC KEY-----) or a JWK");
  if (text.length > KEY_TEXT_MAX) throw badInput("key", `A key is at most ${KEY_TEXT_MAX} characters`);
  let key: KeyObject;
  if (text.startsWith("{")) {
    let jwk: Record<string, unknown>;
    try {
      jwk = JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw badInput("key", "The key is neither PEM nor valid JWK JSON");
    }
    if (jwk === null || typeof jwk !== "object" || Array.isArray(jwk)) {
      throw badInput("key", "A JWK is a JSON object");
    }
    if ("d" in jwk || "p" in jwk || "q" in jwk) {
      throw badInput(
        "key",
        "This is a private key: register the public key only (and treat this one as leaked)",
      );
    }
    if (jwk.kty !== "RSA" && jwk.kty !== "EC") {
      throw badInput(
        "key",
        `JWK kty ${JSON.stringify(jwk.kty)} is not supported (RSA for RS256, EC P-256 for ES256)`,
      );
    }
    try {
      key = createPublicKey({ key: jwk as import("node:crypto").JsonWebKey, format: "jwk" });
    } catch {
      throw badInput("key", "The JWK is not a valid RSA or EC public key");
    }
  } else if (text.startsWith("-----BEGIN ")) {
    if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)) {
      throw badInput(
        "key",
        "This is a private key: register the public key only (and treat this one as leaked)",
      );
    }
    try {
      key = createPublicKey(text);
    } catch {
      throw badInput("key", "The PEM does not hold a valid public key or certificate");
    }
  } else {
    throw badInput("key", "Paste a public key: PEM (-----BEGIN PUBLIC KEY-----) or a JWK");
  }
  let inferred: JwtAlgorithmName;
  if (key.asymmetricKeyType === "rsa") {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < RSA_MIN_BITS || bits > RSA_MAX_BITS)
      throw badInput("key", `RSA keys must have ${RSA_MIN_BITS} to ${RSA_MAX_BITS} bits (this one: ${bits})`);
    const e = key.asymmetricKeyDetails?.publicExponent;
    if (e !== RSA_EXPONENT)
      throw badInput("key", `RSA keys must have the public exponent 65537 (this one: ${e ?? "unknown"})`);
    inferred = "RS256";
  } else if (key.asymmetricKeyType === "ec" && key.asymmetricKeyDetails?.namedCurve === "prime256v1") {
    inferred = "ES256";
  } else {
    throw badInput("key", "Only RSA (RS256) and EC P-256 (ES256) keys are supported");
  }
  if (algorithm != null && algorithm !== inferred) {
    throw badInput("algorithm", `The key is a ${inferred} key, not ${algorithm}`);
  }
  const exported = key.export({ format: "jwk" }) as Record<string, unknown>;
  const jwk: Record<string, string> = {};
  for (const m of inferred === "RS256" ? ["kty", "n", "e"] : ["kty", "crv", "x", "y"]) {
    const v = exported[m];
    if (typeof v !== "string") throw badInput("key", "The key could not be read as a JWK");
    jwk[m] = v;
  }
  return { algorithm: inferred, jwk };
}
