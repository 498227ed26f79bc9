/**
 * A JSON reader that reads member names the way Go's encoding/json does when it decodes into a struct
 * (geth, erigon and bor decode JSON-RPC requests and eth_getLogs filters that way): a member matches a
 * field whose name is equal after folding (ASCII letters to upper case, every other character to the
 * upper case of its lower case, so `ſ` U+017F reads as `S` and the Kelvin sign U+212A as `K`), and when
 * several members match one field the last one wins. Objects keep every member, in order, repeats and all.
 *
 * Tests need it because anvil, the node that runs here, decodes strictly (serde: exact names), so it
 * would never show a request that a Go node reads differently from the gateway.
 */

export type GoValue = null | boolean | number | string | GoValue[] | GoObject;

export class GoObject {
  constructor(readonly members: readonly (readonly [string, GoValue])[]) {}
}

/** Parses JSON text (throws SyntaxError on anything JSON.parse would refuse). */
export function goParse(text: string): GoValue {
  const p = { text, i: 0 };
  const v = value(p);
  ws(p);
  if (p.i !== text.length) throw new SyntaxError(`trailing text at ${p.i}`);
  return v;
}

/** A name as Go's decoder compares it (see above). */
export function goFold(name: string): string {
  let out = "";
  for (const ch of name) {
    const c = ch.codePointAt(0)!;
    if (c < 0x80) {
      out += c >= 0x61 && c <= 0x7a ? String.fromCharCode(c - 0x20) : ch;
      continue;
    }
    // unicode.ToUpper(unicode.ToLower(r)): simple (one-character) mappings only.
    const lower = ch.toLowerCase();
    const l = [...lower].length === 1 ? lower : ch;
    const upper = l.toUpperCase();
    out += [...upper].length === 1 ? upper : l;
  }
  return out;
}

/** The value a Go struct field `name` gets from `o`: the last member whose folded name is name's. */
export function goField(o: GoValue | undefined, name: string): GoValue | undefined {
  if (!(o instanceof GoObject)) return undefined;
  const want = goFold(name);
  let found: GoValue | undefined;
  for (const [k, v] of o.members) if (goFold(k) === want) found = v;
  return found;
}

interface Cursor {
  readonly text: string;
  i: number;
}

function ws(p: Cursor): void {
  while (p.i < p.text.length && " \t\n\r".includes(p.text[p.i]!)) p.i++;
}

function value(p: Cursor): GoValue {
  ws(p);
  const c = p.text[p.i];
  if (c === "{") {
    p.i++;
    const members: [string, GoValue][] = [];
    ws(p);
    if (p.text[p.i] === "}") {
      p.i++;
      return new GoObject(members);
    }
    for (;;) {
      ws(p);
      if (p.text[p.i] !== '"') throw new SyntaxError(`key expected at ${p.i}`);
      const key = string(p);
      ws(p);
      if (p.text[p.i] !== ":") throw new SyntaxError(`colon expected at ${p.i}`);
      p.i++;
      members.push([key, value(p)]);
      ws(p);
      const d = p.text[p.i++];
      if (d === "}") return new GoObject(members);
      if (d !== ",") throw new SyntaxError(`comma expected at ${p.i - 1}`);
    }
  }
  if (c === "[") {
    p.i++;
    const items: GoValue[] = [];
    ws(p);
    if (p.text[p.i] === "]") {
      p.i++;
      return items;
    }
    for (;;) {
      items.push(value(p));
      ws(p);
      const d = p.text[p.i++];
      if (d === "]") return items;
      if (d !== ",") throw new SyntaxError(`comma expected at ${p.i - 1}`);
    }
  }
  if (c === '"') return string(p);
  // Literals and numbers: the longest run of their characters, checked by JSON.parse.
  const start = p.i;
  while (p.i < p.text.length && /[-+.0-9a-zA-Z]/.test(p.text[p.i]!)) p.i++;
  return JSON.parse(p.text.slice(start, p.i)) as GoValue;
}

function string(p: Cursor): string {
  const start = p.i++;
  for (;;) {
    const c = p.text[p.i++];
    if (c === undefined) throw new SyntaxError("unterminated string");
    if (c === "\\") p.i++;
    else if (c === '"') break;
  }
  return JSON.parse(p.text.slice(start, p.i)) as string;
}

/** A value as plain JSON data, objects with Go's reading of repeated names kept as exact-name last wins. */
export function goPlain(v: GoValue | undefined): unknown {
  if (v instanceof GoObject) {
    const o: Record<string, unknown> = {};
    for (const [k, x] of v.members) o[k] = goPlain(x);
    return o;
  }
  if (Array.isArray(v)) return v.map(goPlain);
  return v;
}
