/**
 * Text from clients (a JSON-RPC method name, above all) made safe to store where every tenant's records go:
 * Postgres `text` refuses U+0000 ("invalid byte sequence for encoding UTF8: 0x00"), and one refused row
 * used to stall a whole ingestion stream. Both planes use this: the data plane before a record leaves it,
 * the worker again before it writes (defence in depth against entries written by anything else).
 */

/** What stands in for every character replaced. */
export const REPLACEMENT = "\uFFFD";

/**
 * Whether `s` needs no change for `maxLength`: at most that many UTF-16 code units, all printable ASCII
 * (the case of nearly every method name, checked without allocating).
 */
function isPlain(s: string, maxLength: number): boolean {
  if (s.length > maxLength) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

/** C0 controls (U+0000 included), DEL and C1 controls: never useful in a log, U+0000 refused by Postgres. */
function isControl(c: number): boolean {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f);
}

/**
 * `s` cut to at most `maxLength` UTF-16 code units (never between the two halves of a surrogate pair), with
 * every control character and every lone surrogate (which no UTF-8 text can hold) replaced by U+FFFD.
 * Anything else (non-ASCII letters, U+FFFF and other noncharacters, which UTF-8 and Postgres accept) is kept.
 * A value that is not a string becomes "".
 */
export function safeText(s: unknown, maxLength: number): string {
  if (typeof s !== "string") return "";
  if (isPlain(s, maxLength)) return s;
  let out = "";
  let n = 0;
  for (let i = 0; i < s.length && n < maxLength; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (d >= 0xdc00 && d <= 0xdfff) {
        // A whole pair, or nothing of it when only one unit is left.
        if (n + 2 > maxLength) break;
        out += s[i]! + s[i + 1]!;
        n += 2;
        i++;
        continue;
      }
      out += REPLACEMENT;
    } else if ((c >= 0xdc00 && c <= 0xdfff) || isControl(c)) {
      out += REPLACEMENT;
    } else {
      out += s[i]!;
    }
    n++;
  }
  return out;
}

/** A client's text as a record keeps it: the safe text, and the original length when it had to change. */
export interface SafeField {
  text: string;
  /** The original's length in UTF-16 code units, set only when `text` differs from it. */
  originalLength: number | undefined;
}

export function safeField(s: unknown, maxLength: number): SafeField {
  const text = safeText(s, maxLength);
  return { text, originalLength: text === s ? undefined : typeof s === "string" ? s.length : 0 };
}
