import assert from "node:assert/strict";
import { scanState, scanValue, skipWs } from "../../../../data-plane/src/rpc/json-scan";
import { isAscii, mutate, prng } from "../../../helpers/json-fuzz";

/** Whether the scanner accepts `text` as one JSON value (with surrounding whitespace). */
function scans(text: string): boolean {
  const b = Buffer.from(text, "utf8");
  const start = skipWs(b, 0);
  const end = scanValue(b, start);
  return end >= 0 && skipWs(b, end) === b.length;
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

const VALID = [
  "0",
  "-0",
  "1e400",
  "-1.5e-3",
  "1.5E+3",
  "123456789012345678901234567890",
  '""',
  '"\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\uD800\\udfff"',
  '"\u007f"',
  "true",
  "false",
  "null",
  "[]",
  "{}",
  ' [ 1 , [ ] , { } , "a" ] ',
  '{"a":{"b":[1,{"c":null}]},"a":2}',
  '\t\n\r [{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x1"},"latest"]}]\r\n',
];

const INVALID = [
  "",
  " ",
  "[",
  "]",
  "[1,]",
  "[,1]",
  "[1 2]",
  "{,}",
  '{"a"}',
  '{"a":}',
  '{"a":1,}',
  '{"a" 1}',
  "{1:2}",
  "{'a':1}",
  "[01]",
  "[-]",
  "[--1]",
  "[1.]",
  "[.1]",
  "[1e]",
  "[1e+]",
  "[+1]",
  "[0x10]",
  "[NaN]",
  "[Infinity]",
  "[tru]",
  "[True]",
  "[nul]",
  "[nulll]",
  '["\\x"]',
  '["\\u12"]',
  '["\\u12G4"]',
  '["\\U0041"]',
  '["\t"]',
  '["\n"]',
  '["\u0000"]',
  '["\u001f"]',
  '["abc]',
  '["abc\\"]',
  "[1]x",
  "[1]\u0000",
  "[1] [2]",
  "\u000b[1]",
  "\u00a0[1]",
  "\ufeff[1]",
  "[\u000c1]",
  "1 2",
  `${"[".repeat(5000)}${"]".repeat(4999)}`,
];

describe("data-plane rpc json-scan", () => {
  it("accepts every valid value it is given and refuses every invalid one, as JSON.parse", () => {
    for (const t of VALID) {
      assert.ok(parses(t), `fixture not valid: ${JSON.stringify(t)}`);
      assert.ok(scans(t), JSON.stringify(t));
    }
    for (const t of INVALID) {
      assert.ok(!parses(t), `fixture not invalid: ${JSON.stringify(t)}`);
      assert.ok(!scans(t), JSON.stringify(t));
    }
  });

  it("every ASCII character inside a string and alone: accepted exactly when JSON.parse accepts", () => {
    for (let c = 0; c < 0x80; c++) {
      const ch = String.fromCharCode(c);
      for (const t of [`"${ch}"`, `[${ch}]`, `["a"${ch}]`, `"\\${ch}"`, `[1${ch}]`, `{"a"${ch}1}`]) {
        assert.equal(scans(t), parses(t), `${JSON.stringify(t)} (char ${c})`);
      }
    }
  });

  it("gives up on any non-ASCII byte, valid or not (the caller parses such a text itself)", () => {
    for (const t of ['"é"', '["😀"]', '{"a":"\u00a0"}', "[\u2028]"]) assert.ok(!scans(t), t);
    assert.equal(scanValue(Uint8Array.from([0x22, 0xff, 0x22]), 0), -1);
  });

  it("nesting costs heap, not stack: 500,000 levels open and close", () => {
    const depth = 500_000;
    assert.ok(scans(`${"[".repeat(depth)}${"]".repeat(depth)}`));
    assert.ok(scans(`${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`));
    assert.ok(!scans(`${"[".repeat(depth)}${"]".repeat(depth - 1)}}`));
  });

  it("tells whether a string held an escape", () => {
    scanState.escaped = false;
    assert.ok(scans('["abc",1,{"k":"v"}]'));
    assert.equal(scanState.escaped, false);
    assert.ok(scans('["a\\nc"]'));
    assert.equal(scanState.escaped, true);
  });

  it("mutated JSON (20,000 random edits of valid texts): accepted exactly when JSON.parse accepts", function () {
    // CPU-bound: a machine shared with other work takes longer, and that is no failure.
    this.timeout(180_000);
    const rnd = prng(0x5ca9);
    let accepted = 0;
    for (let n = 0; n < 20_000; n++) {
      const t = mutate(VALID[Math.floor(rnd() * VALID.length)]!, rnd);
      if (!isAscii(t)) continue;
      const ok = parses(t);
      if (ok) accepted++;
      assert.equal(scans(t), ok, JSON.stringify(t));
    }
    // Both outcomes were exercised.
    assert.ok(accepted > 1000 && accepted < 19_000, String(accepted));
  });
});
