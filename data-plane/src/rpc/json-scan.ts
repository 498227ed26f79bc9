/**
 * A validating JSON scanner over the bytes of an ASCII text: finds where a value ends without building
 * it. It accepts only what `JSON.parse` accepts (ECMA-404: whitespace is only space, tab, LF, CR; strings
 * hold no raw control character and only the eight short escapes or `\u` with four hex digits; numbers
 * in the strict grammar, of any size), and gives up on any byte above 0x7f (the caller then parses the
 * text itself: those bytes are UTF-8, and the text's offsets are no longer the bytes'). Iterative, so
 * nesting depth costs heap (a byte per level), never the call stack: `[[[[...` cannot overflow it.
 *
 * Bytes rather than the string: a typed-array read is much cheaper than charCodeAt here (docs/benchmarks.md).
 *
 * Every function returns the index just past what it read, or -1 when it gives up (invalid JSON, or a
 * non-ASCII byte).
 */

const OBJECT = 1;
const ARRAY = 2;

/** Open containers of the value being skipped (grown on demand; only depth costs memory). */
let stack = new Uint8Array(64);

/** Index of the first byte at or after `i` that is not JSON whitespace. */
export function skipWs(b: Uint8Array, i: number): number {
  const n = b.length;
  while (i < n) {
    const c = b[i]!;
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
    i++;
  }
  return i;
}

/** The byte at `i`, -1 past the end. */
export function byteAt(b: Uint8Array, i: number): number {
  return i < b.length ? b[i]! : -1;
}

/**
 * What each byte is inside a string: 0 an ordinary character, 1 the closing quote, 2 a backslash, 3 one
 * the scan refuses (a control character: invalid JSON; 0x80 and above: UTF-8, the caller's to read).
 * One table load per byte instead of four comparisons: strings are most of a request's bytes.
 */
const IN_STRING = new Uint8Array(256);
for (let c = 0; c < 256; c++) IN_STRING[c] = c < 0x20 || c >= 0x80 ? 3 : c === 0x22 ? 1 : c === 0x5c ? 2 : 0;

/**
 * Set (never cleared here) when a string scanned holds a backslash escape: a caller clears it before
 * scanning what it wants to know about (its text then differs from its value).
 */
export const scanState = { escaped: false };

/** The string starting at `i` (its opening quote). */
export function scanString(b: Uint8Array, i: number): number {
  const n = b.length;
  i++;
  for (;;) {
    while (i < n && IN_STRING[b[i]!] === 0) i++;
    if (i >= n) return -1;
    const k = IN_STRING[b[i]!];
    if (k === 1) return i + 1;
    if (k !== 2) return -1; // a control character or a non-ASCII byte
    scanState.escaped = true;
    const e = byteAt(b, i + 1);
    if (e === 0x75 /* u */) {
      if (!isHex(byteAt(b, i + 2)) || !isHex(byteAt(b, i + 3))) return -1;
      if (!isHex(byteAt(b, i + 4)) || !isHex(byteAt(b, i + 5))) return -1;
      i += 6;
    } else if (
      e === 0x22 ||
      e === 0x5c ||
      e === 0x2f ||
      e === 0x62 ||
      e === 0x66 ||
      e === 0x6e ||
      e === 0x72 ||
      e === 0x74
    ) {
      i += 2;
    } else {
      return -1;
    }
  }
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66);
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** The number starting at `i`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`. */
export function scanNumber(b: Uint8Array, i: number): number {
  let c = byteAt(b, i);
  if (c === 0x2d /* - */) c = byteAt(b, ++i);
  if (c === 0x30) {
    c = byteAt(b, ++i);
  } else if (c >= 0x31 && c <= 0x39) {
    do c = byteAt(b, ++i);
    while (isDigit(c));
  } else {
    return -1;
  }
  if (c === 0x2e /* . */) {
    c = byteAt(b, ++i);
    if (!isDigit(c)) return -1;
    do c = byteAt(b, ++i);
    while (isDigit(c));
  }
  if (c === 0x65 || c === 0x45 /* e E */) {
    c = byteAt(b, ++i);
    if (c === 0x2b || c === 0x2d) c = byteAt(b, ++i);
    if (!isDigit(c)) return -1;
    do c = byteAt(b, ++i);
    while (isDigit(c));
  }
  return i;
}

/** An object key and its colon, from `i` (its opening quote) to the start of its value. */
function scanKey(b: Uint8Array, i: number): number {
  if (byteAt(b, i) !== 0x22) return -1;
  i = scanString(b, i);
  if (i < 0) return -1;
  i = skipWs(b, i);
  if (byteAt(b, i) !== 0x3a /* : */) return -1;
  return skipWs(b, i + 1);
}

/** Whether the bytes at `i` are `word` (ASCII); false when the text ends first. */
export function isWord(b: Uint8Array, i: number, word: string): boolean {
  if (i + word.length > b.length) return false;
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word.charCodeAt(k)) return false;
  return true;
}

/** The value starting at `i` (no whitespace before it), containers included. */
export function scanValue(b: Uint8Array, i: number): number {
  let depth = 0;
  for (;;) {
    const c = byteAt(b, i);
    if (c === 0x22) {
      i = scanString(b, i);
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const obj = c === 0x7b;
      i = skipWs(b, i + 1);
      if (byteAt(b, i) === (obj ? 0x7d : 0x5d)) {
        i++;
      } else {
        if (depth === stack.length) {
          const grown = new Uint8Array(depth * 2);
          grown.set(stack);
          stack = grown;
        }
        stack[depth++] = obj ? OBJECT : ARRAY;
        if (obj) {
          i = scanKey(b, i);
          if (i < 0) return -1;
        }
        continue; // a value starts at i
      }
    } else if (c === 0x2d || isDigit(c)) {
      i = scanNumber(b, i);
    } else if (c === 0x74 /* t */) {
      i = isWord(b, i, "true") ? i + 4 : -1;
    } else if (c === 0x66 /* f */) {
      i = isWord(b, i, "false") ? i + 5 : -1;
    } else if (c === 0x6e /* n */) {
      i = isWord(b, i, "null") ? i + 4 : -1;
    } else {
      return -1;
    }
    if (i < 0) return -1;
    // A value ended: close the containers it ends, or move on to the next member / element.
    for (;;) {
      if (depth === 0) return i;
      i = skipWs(b, i);
      const d = byteAt(b, i);
      const top = stack[depth - 1];
      if (d === 0x2c /* , */) {
        i = skipWs(b, i + 1);
        if (top === OBJECT) {
          i = scanKey(b, i);
          if (i < 0) return -1;
        }
        break;
      }
      if (d !== (top === OBJECT ? 0x7d : 0x5d)) return -1;
      depth--;
      i++;
    }
  }
}
