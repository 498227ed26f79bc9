import { nextRequestId } from "../rpc/respond";

/**
 * Longest client `X-Request-Id` kept. The id is stored in the request log, whose `request_id` column
 * and record contract hold at most this many characters (shared/src/requestlog/contract.ts).
 */
export const MAX_CLIENT_REQUEST_ID_LENGTH = 100;

/**
 * Whether a client's `X-Request-Id` can be the request's own id: 1..MAX_CLIENT_REQUEST_ID_LENGTH
 * visible ASCII characters (0x21..0x7e: no space, no control character, nothing non-ASCII). The id is
 * written back as a header and into logs, so nothing that could end a header line or hide in a log passes.
 */
export function isWellFormedRequestId(value: string): boolean {
  const n = value.length;
  if (n === 0 || n > MAX_CLIENT_REQUEST_ID_LENGTH) return false;
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

/**
 * The id of an HTTP request: the client's own `X-Request-Id` when well formed, so a client can find its
 * request in the request log under the id it already logged; otherwise (absent or malformed) a fresh one.
 */
export function requestIdFor(clientHeader: string): string {
  return isWellFormedRequestId(clientHeader) ? clientHeader : nextRequestId();
}
