import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * Webhook signatures in the Standard Webhooks form (https://www.standardwebhooks.com): the secret is
 * `whsec_` + base64 of 32 random bytes, the HMAC-SHA256 key is those bytes, the signed content is
 * `{webhook-id}.{webhook-timestamp}.{body}` and `webhook-signature` is `v1,` + base64 of the MAC (a
 * receiver accepts any of several space-separated signatures). The libraries published for that standard
 * verify these headers as they are.
 */
export const WEBHOOK_SECRET_PREFIX = "whsec_";

/** Receivers should refuse a `webhook-timestamp` further than this from their clock (replays). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export function generateWebhookSecret(): string {
  return `${WEBHOOK_SECRET_PREFIX}${randomBytes(32).toString("base64")}`;
}

function keyOf(secret: string): Buffer {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) throw new Error("not a whsec_ secret");
  return Buffer.from(secret.slice(WEBHOOK_SECRET_PREFIX.length), "base64");
}

/** `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`. */
export function signWebhook(
  secret: string,
  id: string,
  timestampSeconds: number | string,
  body: string,
): string {
  const mac = createHmac("sha256", keyOf(secret))
    .update(`${id}.${timestampSeconds}.${body}`, "utf8")
    .digest();
  return `v1,${mac.toString("base64")}`;
}

/** The three headers of one attempt (a fresh timestamp per attempt; the id stays the event's). */
export function webhookHeaders(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": signWebhook(secret, id, timestampSeconds, body),
  };
}

/**
 * A receiver's check (used by the tests; docs/webhooks.md shows the same steps): the timestamp is within
 * `toleranceSeconds` of `nowSeconds` and one of the `v1` signatures matches, compared in constant time.
 */
export function verifyWebhook(
  secret: string,
  headers: { id?: string; timestamp?: string; signature?: string },
  body: string,
  opts: { nowSeconds?: number; toleranceSeconds?: number } = {},
): boolean {
  const { id, timestamp, signature } = headers;
  if (!id || !timestamp || !signature || !/^\d+$/.test(timestamp)) return false;
  const now = opts.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestamp)) > (opts.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) return false;
  const expected = Buffer.from(signWebhook(secret, id, timestamp, body).slice(3), "base64");
  for (const part of signature.split(" ")) {
    const [version, value] = part.split(",", 2);
    if (version !== "v1" || !value) continue;
    const got = Buffer.from(value, "base64");
    if (got.length === expected.length && timingSafeEqual(got, expected)) return true;
  }
  return false;
}
