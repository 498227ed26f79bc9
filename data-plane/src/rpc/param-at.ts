/**
 * One positional argument of a call: params[index], undefined when the params are no array or shorter.
 * A batch element the parser scanned reads it from the request text (ScannedCall.param, valueAt) instead
 * of building its whole params: routing reads the block argument of each state call of a batch
 * (upstream/capabilities.ts), which would otherwise cost a JSON.parse per element.
 */
export function paramAt(
  call: { readonly params: unknown; param?(index: number): unknown },
  index: number,
): unknown {
  if (call.param !== undefined) return call.param(index);
  const p = call.params;
  return Array.isArray(p) ? p[index] : undefined;
}

/** The value starting at `i` in `t`, which is valid JSON (the parser checked it). */
export function valueAt(t: string, i: number): unknown {
  // The string ends at its first quote: this one is "latest".
  if (t.startsWith(LATEST, i)) return "latest";
  const end = skipValue(t, i);
  // The usual block argument is a plain string ("latest", "0x1b4"): no JSON.parse for it.
  if (t.charCodeAt(i) === 0x22 && !hasBackslash(t, i + 1, end - 1)) {
    return t.slice(i + 1, end - 1);
  }
  return JSON.parse(t.slice(i, end));
}

const LATEST = '"latest"';

function hasBackslash(t: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (t.charCodeAt(i) === 0x5c) return true;
  return false;
}

/** Index just past the string starting at `i` (valid JSON: it ends at the first unescaped quote). */
function skipString(t: string, i: number): number {
  let q = t.indexOf('"', i + 1);
  for (;;) {
    // A quote is escaped when an odd number of backslashes precede it.
    let b = q - 1;
    while (t.charCodeAt(b) === 0x5c) b--;
    if ((q - 1 - b) % 2 === 0) return q + 1;
    q = t.indexOf('"', q + 1);
  }
}

/** Index just past the value starting at `i` (valid JSON). */
function skipValue(t: string, i: number): number {
  let depth = 0;
  for (;;) {
    const c = t.charCodeAt(i);
    if (c === 0x22) {
      i = skipString(t, i);
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
      i++;
    } else {
      i++;
      // A scalar (number, literal) or a separator: everything up to the next structural character.
      if (depth === 0) {
        while (i < t.length) {
          const d = t.charCodeAt(i);
          if (d === 0x2c || d === 0x5d || d === 0x7d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09)
            break;
          i++;
        }
        return i;
      }
      continue;
    }
    if (depth === 0) return i;
  }
}
