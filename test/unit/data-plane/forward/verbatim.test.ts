import assert from "node:assert/strict";
import {
  readVerbatimReply,
  VerbatimRefusal,
  verbatimEligible,
} from "../../../../data-plane/src/forward/verbatim";
import { parseRpcBody, type RpcCall } from "../../../../data-plane/src/rpc/parse";
import { ErrorCategory, GatewayError } from "../../../../shared/src/jsonrpc/errors";

function calls(text: string): RpcCall[] {
  const p = parseRpcBody(text);
  assert.ok(p.ok && p.batch);
  return p.items as RpcCall[];
}

const eligible = (text: string) => verbatimEligible(text, calls(text));

describe("data-plane: verbatim batches", () => {
  it("eligible: plain batches; not: repeated method, repeated params of a range-checked call, \\u, head-hint methods, odd ids, notifications only", () => {
    assert.ok(eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x1","latest"]}]'));
    assert.ok(
      eligible(
        '[{"jsonrpc":"2.0","id":"a","method":"eth_call","params":[{}]},{"jsonrpc":"2.0","method":"x_y"}]',
      ),
    );
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"admin_addPeer","method":"eth_chainId"}]'));
    // "method" inside params counts too: the safe direction (usual path).
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["method","\\"method\\""]}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{}],"params":[{}]}]'));
    assert.ok(eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{}],"params":[{}]}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_c\\u0068ainId"}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}]'));
    for (const id of ["-1", "1.5", "1e3", "1234567890123456", '"a\\"b"']) {
      assert.ok(!eligible(`[{"jsonrpc":"2.0","id":${id},"method":"eth_chainId"}]`), id);
    }
    for (const id of ["0", "123456789012345", '"abc"', "null"]) {
      assert.ok(eligible(`[{"jsonrpc":"2.0","id":${id},"method":"eth_chainId"}]`), id);
    }
    assert.ok(!eligible('[{"jsonrpc":"2.0","method":"eth_chainId"}]'));
  });

  it("reads a node's answer: fast path, errors by id, missing answers, refused batches, garbage", () => {
    const cs = calls(
      '[{"jsonrpc":"2.0","id":1,"method":"a_b"},{"jsonrpc":"2.0","id":"x","method":"a_b"},{"jsonrpc":"2.0","method":"a_b"}]',
    );
    const ok = readVerbatimReply(
      ' [{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":"x","result":2}]\n',
      cs,
    );
    assert.ok(typeof ok === "object");
    assert.deepEqual(ok.categories, [ErrorCategory.Success, ErrorCategory.Success, ErrorCategory.Success]);
    const mixed = readVerbatimReply(
      '[{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad"}},{"jsonrpc":"2.0","id":1,"result":1}]',
      cs,
    );
    assert.ok(typeof mixed === "object");
    assert.deepEqual(mixed.categories, [
      ErrorCategory.Success,
      ErrorCategory.ClientError,
      ErrorCategory.Success,
    ]);
    // One answer missing (the fast path's count does not match): that call is a bad answer.
    const missing = readVerbatimReply('[{"jsonrpc":"2.0","id":1,"result":1}]', cs);
    assert.ok(typeof missing === "object");
    assert.equal(missing.categories[1], GatewayError.UpstreamBadResponse.category);
    assert.equal(
      readVerbatimReply('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no batches"}}', cs),
      VerbatimRefusal.BatchesRefused,
    );
    assert.equal(readVerbatimReply("<html>", cs), VerbatimRefusal.Invalid);
    assert.equal(readVerbatimReply('[{"jsonrpc":"2.0","id":1,"result":1}', cs), VerbatimRefusal.Invalid);
    assert.equal(readVerbatimReply("[1,2]", cs), VerbatimRefusal.Invalid);
  });
});
