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
