/**
 * CORS preflight answers. A browser asks with `Access-Control-Request-Headers` which headers the real
 * request will carry, and refuses to send it unless each is listed in `Access-Control-Allow-Headers`.
 * SDKs add their own (`x-client-version`, `solana-client`, `x-api-key`...), so a fixed list breaks them:
 * the preflight echoes what was asked, when it is a well-formed list of header names, plus the headers
 * the gateway reads itself. Anything else gets the fixed list alone, which the browser then enforces.
 */

/** The headers the gateway itself reads on an RPC request; always allowed. */
export const GATEWAY_REQUEST_HEADERS = "apikey, authorization, content-type, x-request-id";

/** Longest `Access-Control-Request-Headers` value echoed (bytes); longer ones get the fixed list. */
export const MAX_REQUEST_HEADERS_LENGTH = 1024;
/** Most header names echoed from one preflight. */
export const MAX_REQUEST_HEADER_NAMES = 32;

const GATEWAY_NAMES = GATEWAY_REQUEST_HEADERS.split(", ");

/** RFC 9110 `tchar`: the characters a header name (a token) may contain. */
function isTokenChar(c: number): boolean {
  if (c >= 0x61 && c <= 0x7a) return true; // a-z
  if (c >= 0x41 && c <= 0x5a) return true; // A-Z
  if (c >= 0x30 && c <= 0x39) return true; // 0-9
  // ! # $ % & ' * + - . ^ _ ` | ~
  return (
    c === 0x21 ||
    (c >= 0x23 && c <= 0x27) ||
    c === 0x2a ||
    c === 0x2b ||
    c === 0x2d ||
    c === 0x2e ||
    c === 0x5e ||
    c === 0x5f ||
    c === 0x60 ||
    c === 0x7c ||
    c === 0x7e
  );
}

/**
 * The header names of an `Access-Control-Request-Headers` value, lower-cased, in order, without
 * duplicates; undefined when the value is too long, names too many headers, or is not a comma-separated
 * list of tokens (optional spaces and tabs around each).
 */
export function requestedHeaderNames(value: string): string[] | undefined {
  if (value.length > MAX_REQUEST_HEADERS_LENGTH) return undefined;
  const names: string[] = [];
  for (const part of value.split(",")) {
    const name = part.replace(/^[ \t]+|[ \t]+$/g, "");
    if (name === "") {
      // Empty list elements are allowed by the list syntax (`a, , b`); an all-empty value asks for nothing.
      continue;
    }
    for (let i = 0; i < name.length; i++) if (!isTokenChar(name.charCodeAt(i))) return undefined;
    const lower = name.toLowerCase();
    if (!names.includes(lower)) names.push(lower);
    if (names.length > MAX_REQUEST_HEADER_NAMES) return undefined;
  }
  return names;
}

/**
 * The `Access-Control-Allow-Headers` value for a preflight whose `Access-Control-Request-Headers` is
 * `requested` ("" when absent): the gateway's own headers, then the requested ones it does not already
 * list, or the gateway's own alone when the request is malformed or over the bounds.
 */
export function allowHeadersFor(requested: string): string {
  if (requested === "") return GATEWAY_REQUEST_HEADERS;
  const names = requestedHeaderNames(requested);
  if (names === undefined) return GATEWAY_REQUEST_HEADERS;
  let out = GATEWAY_REQUEST_HEADERS;
  for (const n of names) if (!GATEWAY_NAMES.includes(n)) out += `, ${n}`;
  return out;
}
