import { DataSource } from "typeorm";
import {
  decryptSecret,
  encryptSecret,
  hashApiKey,
  isUnboundCiphertext,
  keyCiphertextAad,
} from "../../../shared/src/crypto/api-key";
import { Logger } from "../../../shared/src/log/logger";
import { keyUnreadable } from "./errors";

/** Tables holding a key as `key_hash` (SHA-256 hex, the data plane's lookup) + `key_ciphertext`. */
export type KeyTable = "api_keys" | "dedicated_nodes";

/** The stored copy of a key, sealed to its row (AES-GCM additional data = table + row id). */
export function sealKey(key: string, encryptionKey: Buffer, table: KeyTable, rowId: string): string {
  return encryptSecret(key, encryptionKey, keyCiphertextAad(table, rowId));
}

export interface OpenedKey {
  key: string;
  /** The row still holds a legacy (v1, unbound) ciphertext: the caller should rewrite it with `rebound`. */
  rebound: string | null;
}

/**
 * Opens a row's stored key, or throws KEY_UNREADABLE. Two checks: the AES-GCM tag over the row's id (v2),
 * and the plaintext's SHA-256 against the row's `key_hash`, which is what binds a legacy v1 ciphertext
 * (no additional data) to its row: a ciphertext copied from another row never yields this row's key.
 */
export function openKey(
  row: { id: string; keyHash: string; keyCiphertext: string },
  encryptionKey: Buffer,
  table: KeyTable,
): OpenedKey {
  let key: string;
  try {
    key = decryptSecret(row.keyCiphertext, encryptionKey, keyCiphertextAad(table, row.id));
  } catch {
    throw keyUnreadable(table === "api_keys" ? "app" : "dedicated node");
  }
  if (hashApiKey(key) !== row.keyHash) throw keyUnreadable(table === "api_keys" ? "app" : "dedicated node");
  return {
    key,
    rebound: isUnboundCiphertext(row.keyCiphertext) ? sealKey(key, encryptionKey, table, row.id) : null,
  };
}

/**
 * Rewrites one row's legacy ciphertext as its bound form. Compare-and-set on the old ciphertext: a key
 * regenerated meanwhile (new ciphertext) is left alone. Returns whether the row was rewritten.
 */
export async function storeRebound(
  ds: DataSource,
  table: KeyTable,
  rowId: string,
  oldCiphertext: string,
  rebound: string,
): Promise<boolean> {
  const [, affected] = (await ds.query(
    `UPDATE ${table} SET key_ciphertext = $1 WHERE id = $2 AND key_ciphertext = $3`,
    [rebound, rowId, oldCiphertext],
  )) as [unknown, number];
  return affected === 1;
}

/** Rows read per batch by `rebindLegacyKeyCiphertexts`. */
const REBIND_BATCH_ROWS = 500;

/**
 * At control-plane start: rewrites every legacy (v1, written before row binding) key ciphertext as a v2
 * one bound to its row. Idempotent and safe with several control planes starting at once (compare-and-set
 * per row). A row that does not open (another KEY_ENCRYPTION_SECRET, or altered) is left as it is and
 * counted; it answers KEY_UNREADABLE until its key is regenerated.
 */
export async function rebindLegacyKeyCiphertexts(
  ds: DataSource,
  encryptionKey: Buffer,
  log: Logger,
): Promise<{ rebound: number; unreadable: number }> {
  let rebound = 0;
  let unreadable = 0;
  for (const table of ["api_keys", "dedicated_nodes"] as const) {
    let after = "00000000-0000-0000-0000-000000000000";
    for (;;) {
      const rows = (await ds.query(
        `SELECT id, key_hash, key_ciphertext FROM ${table}
         WHERE key_ciphertext LIKE 'v1.%' AND id > $1 ORDER BY id LIMIT ${REBIND_BATCH_ROWS}`,
        [after],
      )) as { id: string; key_hash: string; key_ciphertext: string }[];
      if (rows.length === 0) break;
      const ids: string[] = [];
      const olds: string[] = [];
      const news: string[] = [];
      for (const r of rows) {
        try {
          const opened = openKey(
            { id: r.id, keyHash: r.key_hash, keyCiphertext: r.key_ciphertext },
            encryptionKey,
            table,
          );
          if (opened.rebound) {
            ids.push(r.id);
            olds.push(r.key_ciphertext);
            news.push(opened.rebound);
          }
        } catch {
          unreadable++;
        }
      }
      if (ids.length > 0) {
        // One statement per batch; compare-and-set on the old ciphertext as in `storeRebound`.
        const [, affected] = (await ds.query(
          `UPDATE ${table} t SET key_ciphertext = v.new
           FROM (SELECT unnest($1::uuid[]) AS id, unnest($2::text[]) AS old, unnest($3::text[]) AS new) v
           WHERE t.id = v.id AND t.key_ciphertext = v.old`,
          [ids, olds, news],
        )) as [unknown, number];
        rebound += affected;
      }
      after = rows[rows.length - 1]!.id;
    }
  }
  if (rebound > 0) log.info({ rebound }, "key ciphertexts bound to their rows (v1 -> v2)");
  if (unreadable > 0)
    log.error(
      { unreadable },
      "stored key ciphertexts that do not decrypt with KEY_ENCRYPTION_SECRET (regenerate those keys)",
    );
  return { rebound, unreadable };
}
