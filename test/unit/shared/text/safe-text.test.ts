import assert from "node:assert/strict";
import { safeField, safeText } from "../../../../shared/src/text/safe-text";

describe("shared: safeText", () => {
  it("returns printable ASCII within the bound as is (the same string)", () => {
    const s = "eth_getBlockByNumber";
    assert.equal(safeText(s, 100), s);
  });

  it("replaces U+0000, other C0/C1 controls and DEL, keeps U+FFFF and non-ASCII", () => {
    assert.equal(safeText("\u0000\uffff", 10), "\ufffd\uffff");
    assert.equal(safeText("a\tb\u007fc\u0085d", 10), "a\ufffdb\ufffdc\ufffdd");
    assert.equal(safeText("é€😀", 10), "é€😀");
  });

  it("replaces lone surrogates, keeps pairs, never cuts a pair in two", () => {
    assert.equal(safeText("\ud800", 5), "\ufffd");
    assert.equal(safeText("\udc00x", 5), "\ufffdx");
    assert.equal(safeText("a\ud800", 5), "a\ufffd");
    assert.equal(safeText("a😀", 2), "a", "the pair would not fit");
    assert.equal(safeText("a😀", 3), "a😀");
  });

  it("cuts to the bound; a non-string is empty", () => {
    assert.equal(safeText("x".repeat(100_000), 100).length, 100);
    assert.equal(safeText(42, 10), "");
    assert.equal(safeText(undefined, 10), "");
  });

  it("safeField keeps the original length only when the text changed", () => {
    assert.deepEqual(safeField("eth_call", 100), { text: "eth_call", originalLength: undefined });
    assert.deepEqual(safeField("\u0000", 100), { text: "\ufffd", originalLength: 1 });
    assert.equal(safeField("y".repeat(500), 100).originalLength, 500);
  });

  it("what it returns is valid UTF-8 text without NUL, for every 16-bit code unit", () => {
    let all = "";
    for (let c = 0; c < 0x10000; c++) all += String.fromCharCode(c);
    const out = safeText(all, 0x10000);
    const bytes = Buffer.from(out, "utf8");
    assert.ok(!bytes.includes(0));
    assert.equal(bytes.toString("utf8"), out, "round-trips: no lone surrogate was left");
  });
});
