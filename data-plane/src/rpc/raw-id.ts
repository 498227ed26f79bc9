/**
 * Recovers the exact source text of `id` members, which `JSON.parse` rounds when a number is beyond 2^53.
 * Only called for such ids (rare), on text `JSON.parse` already accepted, so it assumes valid JSON.
 *
 * For a top-level object: `[idText]`. For a top-level array: one entry per element (undefined when the
 * element is not an object or has no id). When a key repeats, the last one wins, as in `JSON.parse`.
 */
export function rawIds(text: string): (string | undefined)[] {
  let i = skipWs(text, 0);
  if (text.charCodeAt(i) === 0x7b /* { */) return [objectId(text, i)];
  const out: (string | undefined)[] = [];
  if (text.charCodeAt(i) !== 0x5b /* [ */) return out;
  i = skipWs(text, i + 1);
  if (text.charCodeAt(i) === 0x5d) return out;
  for (;;) {
    const end = skipValue(text, i);
    out.push(text.charCodeAt(i) === 0x7b ? objectId(text, i) : undefined);
    i = skipWs(text, end);
    if (text.charCodeAt(i) !== 0x2c /* , */) return out;
    i = skipWs(text, i + 1);
  }
}

function objectId(text: string, start: number): string | undefined {
  let i = skipWs(text, start + 1);
  let found: string | undefined;
  if (text.charCodeAt(i) === 0x7d) return undefined;
  for (;;) {
    const keyEnd = skipString(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipWs(text, keyEnd);
    i = skipWs(text, i + 1); // past ':'
    const valueEnd = skipValue(text, i);
    if (key === "id") found = text.slice(i, valueEnd);
    i = skipWs(text, valueEnd);
    if (text.charCodeAt(i) !== 0x2c) return found;
    i = skipWs(text, i + 1);
  }
}

function skipWs(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else return i;
  }
}

function skipString(text: string, i: number): number {
  i++;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) i += 2;
    else if (c === 0x22) return i + 1;
    else if (Number.isNaN(c)) return i;
    else i++;
  }
}

/** Index just past the value starting at `i`. */
function skipValue(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c === 0x22) return skipString(text, i);
  if (c === 0x7b || c === 0x5b) {
    let depth = 0;
    for (;;) {
      const d = text.charCodeAt(i);
      if (Number.isNaN(d)) return i;
      if (d === 0x22) {
        i = skipString(text, i);
        continue;
      }
      if (d === 0x7b || d === 0x5b) depth++;
      else if (d === 0x7d || d === 0x5d) {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
  }
  for (;;) {
    const d = text.charCodeAt(i);
    if (d === 0x2c || d === 0x7d || d === 0x5d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09)
      return i;
    if (Number.isNaN(d)) return i;
    i++;
  }
}
