import assert from "node:assert/strict";
import {
  batchScanner,
  F_OBJECT,
  F_OTHER_MEMBER,
  F_SAME_METHOD,
  loadNativeScan,
  M_METHOD,
  RECORD,
  type ScanBatchSpans,
  type ScanReply,
  scanBatchSpans,
  scanBatchSpansJs,
  scanReply,
  scanReplyJs,
} from "../../../../data-plane/src/rpc/batch-spans";
import { MAX_BATCH_SIZE } from "../../../../shared/src/jsonrpc/types";
import { BATCHES, el } from "../../../helpers/batch-fixtures";
import { mutate, prng } from "../../../helpers/json-fuzz";

const native = loadNativeScan().scan as ScanBatchSpans;
const nativeReply = loadNativeScan().scanReply as ScanReply;

/** Answers of nodes to batches: every call succeeded, and near misses of every kind. */
const REPLIES = [
  '[{"jsonrpc":"2.0","id":1,"result":"0x1"},{"jsonrpc":"2.0","id":2,"result":{"a":[1,"]"]}}]',
  ' [ {"id":"x","jsonrpc":"2.0","result":null} , {"result":[],"id":3} ] \n',
  "[]",
  '[{"jsonrpc":"2.0","id":1,"result":"0x1","error":null}]',
  '[{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x"}}]',
  '[{"jsonrpc":"2.0","id":1,"result":"err\\"or"},{"jsonrpc":"2.0","id":2,"result":"\\u0065rror"}]',
  '[{"jsonrpc":"2.0","id":1,"res\\u0075lt":1}]',
  '[{"jsonrpc":"2.0","id":1}]',
  '[{"jsonrpc":"2.0","id":1,"result":1},]',
  '[{"jsonrpc":"2.0","id":1,"result":1,}]',
  '[{"jsonrpc":"2.0","id":1,"result":1}] x',
  '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no batches"}}',
  '[1,{"result":1}]',
  '[{"jsonrpc":"2.0","id":1,"result":"é"}]',
];

/** The count and the records both scans give for `text`; records only where they are defined. */
function scan(fn: ScanBatchSpans, text: string | Buffer): { count: number; records: number[][] } {
  const out = new Int32Array(MAX_BATCH_SIZE * RECORD).fill(0x7eadbeef);
  const count = fn(typeof text === "string" ? Buffer.from(text) : text, out, MAX_BATCH_SIZE);
  const records: number[][] = [];
  for (let k = 0; k < Math.max(count, 0); k++) {
    const r = Array.from(out.subarray(k * RECORD, (k + 1) * RECORD));
    // A non-object element has only its flags.
    records.push((r[0]! & F_OBJECT) === 0 ? [r[0]!] : r);
  }
  return { count, records };
}

/** Containers nested deeper than `depth` anywhere in the text (strings skipped). */
function nestsDeeperThan(text: string, depth: number): boolean {
  let d = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "[" || c === "{") {
      if (++d > depth) return true;
    } else if (c === "]" || c === "}") d--;
  }
  return false;
}

/** The C scan gives what the JS one gives, but may give up on nesting past 512 (JSON.parse then reads). */
function sameScans(text: string | Buffer): { count: number } {
  const js = scan(scanBatchSpansJs, text);
  const c = scan(native, text);
  const label = JSON.stringify(text.toString()).slice(0, 300);
  if (c.count === -1 && js.count >= 0) {
    assert.ok(nestsDeeperThan(text.toString(), 512), `only the C scan gave up: ${label}`);
    return c;
  }
  assert.deepEqual(c, js, label);
  return js;
}

/** A valid string of `len` characters with `ch` (a JSON escape or raw character) at `at`. */
function stringWith(len: number, at: number, ch: string): string {
  return `"${"a".repeat(at)}${ch}${"b".repeat(Math.max(0, len - at - 1))}"`;
}

describe("data-plane rpc batch spans (C scan against the JS reference)", () => {
  it("the C scan is built and in use", () => {
    assert.equal(typeof native, "function", `addon: ${loadNativeScan().error}`);
    assert.equal(batchScanner.kind, "native");
    assert.equal(scanBatchSpans, native);
  });

  it("writes the records the JS scan writes, on every fixture and 20,000 random edits of them", function () {
    // CPU-bound: a machine shared with other work takes longer, and that is no failure.
    this.timeout(180_000);
    for (const b of BATCHES) sameScans(b);
    const rnd = prng(0x5ca11);
    let accepted = 0;
    for (let n = 0; n < 20_000; n++) {
      if (sameScans(mutate(BATCHES[Math.floor(rnd() * BATCHES.length)]!, rnd)).count >= 0) accepted++;
    }
    assert.ok(accepted > 1000, String(accepted));
  });

  it("reads strings 16 bytes a step without missing a quote, escape, control or non-ASCII byte at any offset", () => {
    // Every offset of the special byte within and around a 16-byte step, strings of 1 to 40 bytes, and the
    // string ending at the very end of the text (where the step falls back to one byte at a time).
    const specials = ['\\"', "\\\\", "\\n", "\\u00e9", "\\x", "\\u12", "\u0001", "\t", "\u007f", "é", '"'];
    let n = 0;
    for (const ch of specials)
      for (let len = 1; len <= 40; len++)
        for (let at = 0; at < len; at++) {
          const s = stringWith(len, at, ch);
          for (const text of [
            `[${el("1", "m", `,"params":[${s},"latest"]`)}]`,
            `[{"jsonrpc":"2.0","id":${s},"method":${s}}]`,
            `[1,${s}]`,
          ]) {
            sameScans(text);
            n++;
          }
        }
    assert.ok(n > 10_000);
  });

  it("gives up on bytes above 0x7f given as bytes, wherever they are", () => {
    const text = `[${el("1")}]`;
    for (let at = 0; at < text.length; at++) {
      const b = Buffer.from(text);
      b[at] = 0x80 + (at % 0x80);
      assert.equal(scan(native, b).count, -1, String(at));
      assert.equal(scan(scanBatchSpansJs, b).count, -1, String(at));
    }
  });

  it("marks an element whose method is the previous element's", () => {
    const text = `[${el("1", "a")},${el("2", "a")},${el("3", "ab")},5,${el("4", "ab")},${el("5", "ab")}]`;
    const { count, records } = sameScans(text) as ReturnType<typeof scan>;
    assert.equal(count, 6);
    assert.deepEqual(
      records.map((r) => (r[0]! & F_SAME_METHOD) !== 0),
      [false, true, false, false, false, true],
    );
    assert.ok(records[0]![1 + 2 * M_METHOD]! > 0);
  });

  it("marks an element with a member other than the four, however close its name is to one of them", () => {
    const text =
      `[${el("1", "a")},{"jsonrpc":"2.0","id":1,"method":"a","METHOD":"b"},{"Params":[],"jsonrpc":"2.0","id":2,"method":"a"},` +
      '{"jsonrpc":"2.0","method":"a","x":{"method":"b"}},{"jsonrpc":"2.0","id":3,"method":"a","params":[{"method":"b"}]},{}]';
    const { count, records } = sameScans(text) as ReturnType<typeof scan>;
    assert.equal(count, 6);
    assert.deepEqual(
      records.map((r) => (r[0]! & F_OTHER_MEMBER) !== 0),
      [false, true, true, true, false, false],
    );
  });

  it("stops at the batch limit, and on nesting past 512 gives up where the JS scan goes on", () => {
    const full = `[${Array(MAX_BATCH_SIZE).fill(el("1")).join(",")}]`;
    assert.equal(sameScans(full).count, MAX_BATCH_SIZE);
    assert.equal(
      sameScans(
        `[${Array(MAX_BATCH_SIZE + 1)
          .fill(el("1"))
          .join(",")}]`,
      ).count,
      -1,
    );
    const nested = (d: number) => `[${el("1", "a", `,"params":[${"[".repeat(d)}${"]".repeat(d)}]`)}]`;
    assert.equal(scan(native, nested(510)).count, 1);
    assert.equal(scan(native, nested(600)).count, -1);
    assert.equal(scan(scanBatchSpansJs, nested(600)).count, 1);
    assert.equal(scan(native, `${"[".repeat(100_000)}${"]".repeat(100_000)}`).count, -1);
  });

  it("reads a node's answer as the JS scan does, on answers and 20,000 random edits of them", function () {
    // CPU-bound: a machine shared with other work takes longer, and that is no failure.
    this.timeout(180_000);
    const counts = REPLIES.map((r) => nativeReply(Buffer.from(r)));
    assert.deepEqual(counts, [2, 2, 0, -1, -1, 2, -1, -1, -1, -1, -1, -1, -1, -1]);
    assert.deepEqual(
      REPLIES.map((r) => scanReplyJs(Buffer.from(r))),
      counts,
    );
    assert.equal(scanReply, nativeReply);
    const rnd = prng(0x2e91);
    let valid = 0;
    for (let n = 0; n < 20_000; n++) {
      const text = mutate(REPLIES[Math.floor(rnd() * 3)]!, rnd);
      const c = nativeReply(Buffer.from(text));
      assert.equal(c, scanReplyJs(Buffer.from(text)), JSON.stringify(text));
      // What the scan passes is JSON, an array of that many objects, each with a result and no error.
      if (c >= 0) {
        valid++;
        const v = JSON.parse(text) as Record<string, unknown>[];
        assert.equal(v.length, c, text);
        for (const o of v) assert.ok("result" in o && !("error" in o), text);
      }
    }
    assert.ok(valid > 500, String(valid));
  });

  it("refuses arguments it cannot read instead of throwing", () => {
    const call = native as unknown as (...a: unknown[]) => number;
    const out = new Int32Array(MAX_BATCH_SIZE * RECORD);
    assert.equal(call(), -1);
    assert.equal(call("[1]", out, 10), -1);
    assert.equal(call(Buffer.from("[1]"), new Uint8Array(10), 10), -1);
    // An output too small for maxElements records.
    assert.equal(call(Buffer.from("[1]"), new Int32Array(RECORD), 2), -1);
    assert.equal(call(Buffer.from("[1]"), out, -1), -1);
    assert.equal(call(Buffer.from("[1]"), out, 1), 1);
    const reply = nativeReply as unknown as (...a: unknown[]) => number;
    assert.equal(reply(), -1);
    assert.equal(reply('[{"result":1}]'), -1);
    assert.equal(reply(Buffer.from('[{"result":1}]')), 1);
  });
});
