/** Random but reproducible JSON texts for the parser tests: valid ones edited into near misses. */

/** Deterministic PRNG (mulberry32), so a failure names a reproducible case. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Characters that make JSON (and break it) most often, and a few that never belong outside strings. */
const ALPHABET = '{}[],:"\\ 0123456789.eE+-tfnrul/bxX\t\n\r\u000b\u0000\u001f\u007fa';

/** `text` with 1-3 random edits: a deleted, inserted, replaced or duplicated piece. */
export function mutate(text: string, rnd: () => number): string {
  let t = text;
  const edits = 1 + Math.floor(rnd() * 3);
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(rnd() * (t.length + 1));
    const ch = ALPHABET[Math.floor(rnd() * ALPHABET.length)]!;
    const kind = Math.floor(rnd() * 4);
    if (kind === 0) t = t.slice(0, at) + t.slice(at + 1);
    else if (kind === 1) t = t.slice(0, at) + ch + t.slice(at);
    else if (kind === 2) t = t.slice(0, at) + ch + t.slice(at + 1);
    else {
      const len = Math.floor(rnd() * 12);
      t = t.slice(0, at) + t.slice(at, at + len) + t.slice(at);
    }
  }
  return t;
}

export function isAscii(t: string): boolean {
  for (let i = 0; i < t.length; i++) if (t.charCodeAt(i) > 0x7f) return false;
  return true;
}

/**
 * Another spelling of member name `name` that a node decoding with Go's encoding/json reads as the same
 * member (test/helpers/go-json.ts): letters in other cases, `ſ` (U+017F) for s, the Kelvin sign (U+212A)
 * for k, sometimes a character written as a \u escape on top. Never `name` itself.
 */
export function goAlias(name: string, rnd: () => number): string {
  let out = "";
  for (const ch of name) {
    const r = rnd();
    if ((ch === "s" || ch === "S") && r < 0.35) out += "\u017f";
    else if ((ch === "k" || ch === "K") && r < 0.35) out += "\u212a";
    else if (r < 0.5) out += ch === ch.toLowerCase() ? ch.toUpperCase() : ch.toLowerCase();
    else out += ch;
  }
  if (out === name) out = name.toUpperCase() === name ? name.toLowerCase() : name.toUpperCase();
  return out;
}

/** A JSON object's text from members given as [name, value JSON text] (names may repeat). */
export function objectText(members: readonly (readonly [string, string])[], rnd?: () => number): string {
  return `{${members.map(([k, v]) => `${keyText(k, rnd)}:${v}`).join(",")}}`;
}

/** A name as a JSON string, one of its characters written as a \u escape now and then. */
function keyText(name: string, rnd?: () => number): string {
  const text = JSON.stringify(name);
  if (rnd === undefined || rnd() >= 0.15 || name.length === 0) return text;
  const at = Math.floor(rnd() * name.length);
  const ch = name.charCodeAt(at);
  const esc = `\\u${ch.toString(16).padStart(4, "0")}`;
  return `"${JSON.stringify(name.slice(0, at)).slice(1, -1)}${esc}${JSON.stringify(name.slice(at + 1)).slice(1, -1)}"`;
}

/**
 * `members` with one of them shadowed: the member named `name` given again, before or after the
 * original, under a spelling a Go node reads as the same name (goAlias), or under its own name (a plain
 * repeat), with the value `value` (JSON text).
 */
export function shadowMember(
  members: readonly (readonly [string, string])[],
  name: string,
  value: string,
  rnd: () => number,
): [string, string][] {
  const out = members.map(([k, v]) => [k, v] as [string, string]);
  const at = out.findIndex(([k]) => k === name);
  const alias = rnd() < 0.2 ? name : goAlias(name, rnd);
  const where = at < 0 || rnd() < 0.7 ? out.length : at;
  out.splice(where, 0, [alias, value]);
  return out;
}
