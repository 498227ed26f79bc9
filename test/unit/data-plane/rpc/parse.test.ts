import assert from "node:assert/strict";
import { paramAt } from "../../../../data-plane/src/rpc/param-at";
import {
  type BatchItem,
  isItemError,
  type ParseResult,
  parseRpcBody,
  parseViaJsonParse,
} from "../../../../data-plane/src/rpc/parse";
import { rawIds } from "../../../../data-plane/src/rpc/raw-id";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { BATCHES, el } from "../../../helpers/batch-fixtures";
import { mutate, prng } from "../../../helpers/json-fuzz";

/** A parse result as plain data (params read through the getter), to compare the two parsers. */
function plain(r: ParseResult): unknown {
  if (!r.ok) return { error: r.error.reason, idText: r.idText, limit: r.limit };
  const item = (it: BatchItem) =>
    isItemError(it)
      ? { error: it.error.reason, idText: it.idText }
      : { method: it.method, idText: it.idText, params: it.params };
  return r.batch ? { items: r.items.map(item) } : { call: item(r.call) };
}

/**
 * The scanning parser gives what the JSON.parse one gives, whatever the text: the same result, and the
 * same positional params when they are read from the text before the params are built.
 */
function sameAsJsonParse(text: string): ParseResult {
  const ref = parseViaJsonParse(text);
  const fresh = parseRpcBody(text);
  if (fresh.ok && fresh.batch && ref.ok && ref.batch) {
    fresh.items.forEach((it, i) => {
      const want = ref.items[i]!;
      if (isItemError(it) || isItemError(want)) return;
      const params = want.params;
      for (let k = 0; k < 4; k++) {
        const arg = Array.isArray(params) ? params[k] : undefined;
        assert.deepEqual(paramAt(it, k), arg, `${JSON.stringify(text)} item ${i} arg ${k}`);
      }
    });
  }
  const r = parseRpcBody(text);
  assert.deepEqual(plain(r), plain(ref), JSON.stringify(text));
  return r;
}

describe("data-plane rpc parse", () => {
  it("accepts a minimal request and keeps params absent", () => {
    const r = parseRpcBody('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}');
    assert.ok(r.ok && !r.batch);
    assert.equal(r.call.method, "eth_chainId");
    assert.equal(r.call.params, undefined);
    assert.equal(r.call.idText, "1");
  });

  it("echoes string, number, null ids as JSON text; absent id is a notification", () => {
    const cases: [string, string | undefined][] = [
      ['"abc"', '"abc"'],
      ['"a\\"b"', '"a\\"b"'],
      ["0", "0"],
      ["-7", "-7"],
      ["null", "null"],
    ];
    for (const [raw, want] of cases) {
      const r = parseRpcBody(`{"jsonrpc":"2.0","id":${raw},"method":"m"}`);
      assert.ok(r.ok && !r.batch, raw);
      assert.equal(r.call.idText, want);
    }
    const n = parseRpcBody('{"jsonrpc":"2.0","method":"m"}');
    assert.ok(n.ok && !n.batch);
    assert.equal(n.call.idText, undefined);
  });

  it("keeps huge and fractional numeric ids digit for digit", () => {
    for (const raw of ["123456789012345678901234567890", "1.50", "1e400", "-9007199254740993", "0.1"]) {
      const r = parseRpcBody(`{"method":"m","id": ${raw} ,"jsonrpc":"2.0","params":[{"id":5}]}`);
      assert.ok(r.ok && !r.batch, raw);
      assert.equal(r.call.idText, raw);
    }
    const b = parseRpcBody(
      '[{"jsonrpc":"2.0","id":1,"method":"a"},"x",{"jsonrpc":"2.0","params":{"id":"q"},"method":"b","id":99999999999999999999}]',
    );
    assert.ok(b.ok && b.batch);
    assert.equal((b.items[0] as { idText: string }).idText, "1");
    assert.ok(isItemError(b.items[1]!));
    assert.equal((b.items[2] as { idText: string }).idText, "99999999999999999999");
  });

  it("rawIds takes the last duplicate key and skips nested ids", () => {
    assert.deepEqual(rawIds('{"id":1,"x":{"id":2},"id":33333333333333333333}'), ["33333333333333333333"]);
    assert.deepEqual(rawIds('[1, {"a":[{"id":3}]}, {"id":"s\\"}"}]'), [undefined, undefined, '"s\\"}"']);
  });

  it("rejects bad JSON, wrong jsonrpc, bad method, bad params, bad id", () => {
    const expect = (body: string, row: typeof GatewayError.ParseError) => {
      const r = parseRpcBody(body);
      assert.ok(!r.ok, body);
      assert.equal(r.error, row, body);
    };
    expect("", GatewayError.ParseError);
    expect('{"jsonrpc":"2.0"', GatewayError.ParseError);
    expect("\u0000\u0001garbage", GatewayError.ParseError);
    expect('{"jsonrpc":"1.0","id":1,"method":"m"}', GatewayError.InvalidRequest);
    expect('{"id":1,"method":"m"}', GatewayError.InvalidRequest);
    expect('{"jsonrpc":"2.0","id":1,"method":""}', GatewayError.InvalidRequest);
    expect('{"jsonrpc":"2.0","id":1,"method":5}', GatewayError.InvalidRequest);
    expect('{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}', GatewayError.InvalidRequest);
    expect('{"jsonrpc":"2.0","id":1,"method":"m","params":null}', GatewayError.InvalidRequest);
    expect('{"jsonrpc":"2.0","id":{},"method":"m"}', GatewayError.InvalidRequest);
    expect('{"jsonrpc":"2.0","id":[1],"method":"m"}', GatewayError.InvalidRequest);
    expect('{"jsonrpc":"2.0","id":true,"method":"m"}', GatewayError.InvalidRequest);
    expect("5", GatewayError.InvalidRequest);
    expect('"str"', GatewayError.InvalidRequest);
    expect("null", GatewayError.InvalidRequest);
    expect("[]", GatewayError.EmptyBatch);
  });

  it("keeps the id of an invalid request when the id itself is valid", () => {
    const r = parseRpcBody('{"jsonrpc":"1.0","id":"x","method":"m"}');
    assert.ok(!r.ok);
    assert.equal(r.idText, '"x"');
  });

  it("caps batches at 100 with limit 100", () => {
    const el = '{"jsonrpc":"2.0","id":1,"method":"m"}';
    const ok = parseRpcBody(`[${Array(100).fill(el).join(",")}]`);
    assert.ok(ok.ok && ok.batch && ok.items.length === 100);
    const big = parseRpcBody(`[${Array(101).fill(el).join(",")}]`);
    assert.ok(!big.ok);
    assert.equal(big.error, GatewayError.BatchTooLarge);
    assert.equal(big.limit, 100);
  });

  it("accepts unicode method names and object params", () => {
    const r = parseRpcBody('{"jsonrpc":"2.0","id":1,"method":"ëth_😀","params":{"a":1}}');
    assert.ok(r.ok && !r.batch);
    assert.equal(r.call.method, "ëth_😀");
    assert.deepEqual(r.call.params, { a: 1 });
  });

  it("a batch scanned in its bytes reads as JSON.parse reads it: fixtures of every branch", () => {
    for (const b of BATCHES) sameAsJsonParse(b);
    // The same through bytes given by the caller, as the HTTP exchange gives them.
    for (const b of BATCHES) {
      assert.deepEqual(plain(parseRpcBody(b, Buffer.from(b))), plain(parseViaJsonParse(b)), b);
    }
  });

  it("a batch scanned in its bytes reads as JSON.parse reads it: 20,000 random edits of the fixtures", function () {
    // CPU-bound: a machine shared with other work takes longer, and that is no failure.
    this.timeout(180_000);
    const rnd = prng(0xba7c);
    let valid = 0;
    for (let n = 0; n < 20_000; n++) {
      const r = sameAsJsonParse(mutate(BATCHES[Math.floor(rnd() * BATCHES.length)]!, rnd));
      if (r.ok) valid++;
    }
    assert.ok(valid > 1000, String(valid));
  });

  it("says when the text may go upstream as it is: the four members only, none repeated, every id as written, ASCII", () => {
    const verbatim = (text: string) => {
      const r = parseRpcBody(text);
      assert.ok(r.ok && r.batch, text);
      return r.verbatim;
    };
    assert.ok(verbatim(`[${el("1")},${el('"x"')},${el("null")},{"jsonrpc":"2.0","method":"n"}]`));
    assert.ok(verbatim(`[${el("1", "a", ',"params":[{"method":"b","params":[],"id":3}]')}]`));
    assert.ok(verbatim(`[${el("1.5")},${el("99999999999999999999")}]`)); // echoed as written
    for (const id of ["1e3", "1.0", "-0", "1E2"]) assert.ok(!verbatim(`[${el(id)}]`), id);
    assert.ok(!verbatim('[{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}]'));
    assert.ok(!verbatim('[{"jsonrpc":"2.0","id":1,"method":"a","params":[],"params":[]}]'));
    assert.ok(!verbatim('[{"jsonrpc":"2.0","id":1,"id":1,"method":"a"}]'));
    assert.ok(!verbatim('[{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"a"}]'));
    assert.ok(!verbatim('[{"jsonrpc":"2.0","id":1,"method":"a","p\\u0061rams":[]}]'));
    // Go's decoder reads these as method / params / id (case folded, last wins): re-serialised, never sent as written.
    assert.ok(!verbatim('[{"jsonrpc":"2.0","id":1,"method":"a","METHOD":"b"}]'));
    assert.ok(!verbatim('[{"jsonrpc":"2.0","id":1,"method":"a","params":[],"Params":[1]}]'));
    assert.ok(!verbatim(`[${el("1")},{"jsonrpc":"2.0","id":2,"ID":3,"method":"a"}]`));
    assert.ok(!verbatim('[{"jsonrpc":"2.0","id":1,"method":"a","extra":true}]'));
    assert.ok(!verbatim('[{"jsonrpc":"2.0","id":"\\u0061","method":"a"}]'));
    assert.ok(!verbatim('[{"jsonrpc":"2.0","id":1,"method":"a","params":["é"]}]'));
  });

  it("reads a batch element's positional params from the text, as the parsed params hold them", () => {
    const r = parseRpcBody(
      '[{"jsonrpc":"2.0","id":1,"method":"a","params":[ {"to":"0x1","data":"\\"]"} , "latest" ,7,"0x1b4",{"blockNumber":"0x5"},"a\\u0062",[1,[2]]]},' +
        '{"jsonrpc":"2.0","id":2,"method":"a","params":{"x":1}},{"jsonrpc":"2.0","id":3,"method":"a"},{"jsonrpc":"2.0","id":4,"method":"a","params":[]}]',
    );
    assert.ok(r.ok && r.batch);
    const [a, b, c, d] = r.items as { params: unknown; param?(i: number): unknown }[];
    for (let i = 0; i < 9; i++) assert.deepEqual(paramAt(a!, i), (a!.params as unknown[])[i], String(i));
    for (const call of [b!, c!, d!]) for (let i = 0; i < 2; i++) assert.equal(paramAt(call, i), undefined);
    // Once the params are built (a range check read them), they are what paramAt reads.
    assert.deepEqual(paramAt(a!, 4), { blockNumber: "0x5" });
  });

  it("survives deeply nested arrays", () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const r = parseRpcBody(deep);
    assert.ok(r.ok && r.batch);
    assert.ok(isItemError(r.items[0]!));
  });
});
