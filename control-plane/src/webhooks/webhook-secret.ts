import { decryptSecret, encryptSecret, keyCiphertextAad } from "../../../shared/src/crypto/api-key";

/** The stored copy of an endpoint's signing secret, sealed to its row (AES-GCM additional data = row id). */
export function sealWebhookSecret(secret: string, encryptionKey: Buffer, endpointId: string): string {
  return encryptSecret(secret, encryptionKey, keyCiphertextAad("webhook_endpoints", endpointId));
}

/**
 * The endpoint's signing secret, or throws: another KEY_ENCRYPTION_SECRET, a ciphertext copied from
 * another row, or anything but the row-bound `v2` form (webhook secrets never had the unbound `v1` one).
 */
export function openWebhookSecret(
  row: { id: string; secretCiphertext: string },
  encryptionKey: Buffer,
): string {
  if (!row.secretCiphertext.startsWith("v2.")) throw new Error("webhook secret ciphertext is not row-bound");
  return decryptSecret(row.secretCiphertext, encryptionKey, keyCiphertextAad("webhook_endpoints", row.id));
}
