import assert from "node:assert/strict";
import {
  readVerbatimReply,
  VerbatimRefusal,
  verbatimEligible,
} from "../../../../data-plane/src/forward/verbatim";
import { parseRpcBody, type RpcCall } from "../../../../data-plane/src/rpc/parse";
import { ReplyBody } from "../../../../data-plane/src/upstream/upstream";
import { ErrorCategory, GatewayError } from "../../../../shared/src/jsonrpc/errors";

/** A node's answer as the upstream exchange hands it over. */
function reply(text: string): ReplyBody {
  return new ReplyBody(Buffer.from(text));
}

function calls(text: string): RpcCall[] {
  const p = parseRpcBody(text);
  assert.ok(p.ok && p.batch);
  return p.items as RpcCall[];
}

/** What the transports do: the text goes verbatim when the parser says its syntax allows and the calls do. */
function eligible(text: string): boolean {
  const p = parseRpcBody(text);
  assert.ok(p.ok && p.batch);
  return p.verbatim && verbatimEligible(p.items as RpcCall[]);
}

describe("data-plane: verbatim batches", () => {
  it("eligible: plain batches; not: a repeated member, escapes in keys or ids, head-hint methods, odd ids, notifications only", () => {
    assert.ok(eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x1","latest"]}]'));
    assert.ok(
      eligible(
        '[{"jsonrpc":"2.0","id":"a","method":"eth_call","params":[{}]},{"jsonrpc":"2.0","method":"x_y"}]',
      ),
    );
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"admin_addPeer","method":"eth_chainId"}]'));
    // The scan knows the element's own members: "method" inside params is no repeat.
    assert.ok(eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["method",{"method":1}]}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{}],"params":[{}]}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{}],"params":[{}]}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"id":2,"method":"eth_call"}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"eth_call"}]'));
    // A member spelt with an escape is still that member (to JSON.parse and to nodes).
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_call","m\\u0065thod":"admin_addPeer"}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_c\\u0068ainId"}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}]'));
    // Range-checked filters (a repeated fromBlock inside them is read last-wins by the check) never go as is.
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x1"}]}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_newFilter","params":[{}]}]'));
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":" ETH_GETLOGS","params":[{}]}]'));
    for (const id of ["-1", "1.5", "1e3", "1E3", "10e-1", "-0", "1234567890123456", '"a\\"b"', '"\\u0061"']) {
      assert.ok(!eligible(`[{"jsonrpc":"2.0","id":${id},"method":"eth_chainId"}]`), id);
    }
    for (const id of ["0", "123456789012345", '"abc"', "null"]) {
      assert.ok(eligible(`[{"jsonrpc":"2.0","id":${id},"method":"eth_chainId"}]`), id);
    }
    assert.ok(!eligible('[{"jsonrpc":"2.0","method":"eth_chainId"}]'));
    // Not ASCII: parsed by JSON.parse, never verbatim (the bytes would not be the checked text's).
    assert.ok(!eligible('[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["é"]}]'));
  });

  it("reads a node's answer: fast path, errors by id, missing answers, refused batches, garbage", () => {
    const cs = calls(
      '[{"jsonrpc":"2.0","id":1,"method":"a_b"},{"jsonrpc":"2.0","id":"x","method":"a_b"},{"jsonrpc":"2.0","method":"a_b"}]',
    );
    const ok = readVerbatimReply(
      reply(' [{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":"x","result":2}]\n'),
      cs,
    );
    assert.ok(typeof ok === "object");
    assert.deepEqual(ok.categories, [ErrorCategory.Success, ErrorCategory.Success, ErrorCategory.Success]);
    // Every call succeeded: the node's bytes go to the client as they are.
    assert.ok(ok.body instanceof Uint8Array);
    assert.equal(
      Buffer.from(ok.body).toString(),
      ' [{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":"x","result":2}]\n',
    );
    const mixed = readVerbatimReply(
      reply(
        '[{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad"}},{"jsonrpc":"2.0","id":1,"result":1}]',
      ),
      cs,
    );
    assert.ok(typeof mixed === "object");
    assert.deepEqual(mixed.categories, [
      ErrorCategory.Success,
      ErrorCategory.ClientError,
      ErrorCategory.Success,
    ]);
    // An "error" member sends the answer the parsed way; "error" inside a result does not.
    const lookalike = readVerbatimReply(
      reply(
        '[{"jsonrpc":"2.0","id":1,"result":"horror"},{"jsonrpc":"2.0","id":"x","error":{"code":3,"message":"reverted"}}]',
      ),
      cs,
    );
    assert.ok(typeof lookalike === "object");
    assert.deepEqual(lookalike.categories, [
      ErrorCategory.Success,
      ErrorCategory.NodeError,
      ErrorCategory.Success,
    ]);
    // One answer missing (the fast path's count does not match): that call is a bad answer.
    const missing = readVerbatimReply(reply('[{"jsonrpc":"2.0","id":1,"result":1}]'), cs);
    assert.ok(typeof missing === "object");
    assert.equal(missing.categories[1], GatewayError.UpstreamBadResponse.category);
    assert.equal(
      readVerbatimReply(
        reply('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no batches"}}'),
        cs,
      ),
      VerbatimRefusal.BatchesRefused,
    );
    assert.equal(readVerbatimReply(reply("<html>"), cs), VerbatimRefusal.Invalid);
    assert.equal(
      readVerbatimReply(reply('[{"jsonrpc":"2.0","id":1,"result":1}'), cs),
      VerbatimRefusal.Invalid,
    );
    assert.equal(readVerbatimReply(reply("[1,2]"), cs), VerbatimRefusal.Invalid);
  });

  it("passes on only valid JSON: an answer that looks right but is not JSON is refused", () => {
    const cs = calls('[{"jsonrpc":"2.0","id":1,"method":"a_b"},{"jsonrpc":"2.0","id":2,"method":"a_b"}]');
    for (const bad of [
      '[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":2,"result":}]',
      '[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":2,"result":"0x1}]',
      '[{"jsonrpc":"2.0","id":1,"result":1}{"jsonrpc":"2.0","id":2,"result":2}]',
      '[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":2,"result":2},]',
    ]) {
      assert.equal(readVerbatimReply(reply(bad), cs), VerbatimRefusal.Invalid, bad);
    }
    // Valid, but not the fast path's shape: parsed, and the text passed on.
    for (const [text, cats] of [
      [
        '[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":2,"error":null,"result":2}]',
        ["success", "success"],
      ],
      [
        '[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":2}]',
        ["success", "upstream_bad_response"],
      ],
      [
        '[{"jsonrpc":"2.0","id":1,"result":"\u00e9"},{"jsonrpc":"2.0","id":2,"result":"é"}]',
        ["success", "success"],
      ],
    ] as const) {
      const r = readVerbatimReply(reply(text), cs);
      assert.ok(typeof r === "object", text);
      assert.equal(typeof r.body, "string", text);
      assert.equal(r.body, text);
      assert.deepEqual(
        r.categories,
        cats.map((c) =>
          c === "success" ? ErrorCategory.Success : GatewayError.UpstreamBadResponse.category,
        ),
        text,
      );
    }
  });
});
