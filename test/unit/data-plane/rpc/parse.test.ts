import assert from "node:assert/strict";
import { isItemError, parseRpcBody } from "../../../../data-plane/src/rpc/parse";
import { rawIds } from "../../../../data-plane/src/rpc/raw-id";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";

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

  it("survives deeply nested arrays", () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const r = parseRpcBody(deep);
    assert.ok(r.ok && r.batch);
    assert.ok(isItemError(r.items[0]!));
  });
});
