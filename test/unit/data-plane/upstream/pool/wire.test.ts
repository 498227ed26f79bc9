import assert from "node:assert/strict";
import {
  batchBody,
  IdSequence,
  isHeavy,
  isRateLimitTail,
  NOT_BAD,
  parseBatchReply,
  RATE_LIMITED,
  REFUSED,
  singleBody,
  singleCheck,
} from "../../../../../data-plane/src/upstream/pool/wire";
import { ReplyKind } from "../../../../../data-plane/src/upstream/reply";
import { INVALID_REPLY, ReplyBody } from "../../../../../data-plane/src/upstream/upstream";
import { GatewayError } from "../../../../../shared/src/jsonrpc/errors";

const body = (text: string) => new ReplyBody(Buffer.from(text));

describe("upstream pool: the wire (bodies, reply checks)", () => {
  it("writes a single call with the pool's id, reusing params already serialised", () => {
    assert.equal(
      singleBody(7, { method: "eth_chainId", params: undefined }, undefined),
      '{"jsonrpc":"2.0","id":7,"method":"eth_chainId"}',
    );
    assert.equal(
      singleBody(8, { method: "eth_getBalance", params: ["0xaa", "latest"] }, '["0xAA","latest"]'),
      '{"jsonrpc":"2.0","id":8,"method":"eth_getBalance","params":["0xAA","latest"]}',
      "the serialised params are used as given",
    );
  });

  it("writes a batch with consecutive ids and reads the answers back by id, in call order", () => {
    const calls = [
      { method: "eth_chainId", params: undefined },
      { method: "eth_getBalance", params: ["0xaa", "latest"] },
    ];
    const text = batchBody(40, calls, undefined);
    assert.deepEqual(
      (JSON.parse(text) as { id: number; method: string }[]).map((c) => [c.id, c.method]),
      [
        [40, "eth_chainId"],
        [41, "eth_getBalance"],
      ],
    );
    const out = parseBatchReply(
      '[{"jsonrpc":"2.0","id":41,"result":"0x5"},{"jsonrpc":"2.0","id":40,"result":"0x1"}]',
      40,
      2,
    );
    assert.ok(Array.isArray(out));
    const [a, b] = out as { ok: boolean; reply?: { tail: string } }[];
    assert.equal(a!.ok && a!.reply!.tail, ',"result":"0x1"}');
    assert.equal(b!.ok && b!.reply!.tail, ',"result":"0x5"}');
  });

  it("marks a batch answer's missing element bad, one error object REFUSED, and garbage undefined", () => {
    const out = parseBatchReply('[{"jsonrpc":"2.0","id":3,"result":"0x1"}]', 3, 2) as {
      ok: boolean;
      error?: unknown;
    }[];
    assert.equal(out[0]!.ok, true);
    assert.deepEqual(out[1], { ok: false, error: GatewayError.UpstreamBadResponse });
    assert.equal(
      parseBatchReply('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no batches"}}', 3, 2),
      REFUSED,
    );
    assert.equal(parseBatchReply("<html>", 3, 2), undefined);
    assert.equal(parseBatchReply('{"result":1}', 3, 2), undefined);
  });

  it("tells a node's rate-limit error from a per-request limit", () => {
    assert.equal(isRateLimitTail(',"error":{"code":429,"message":"slow down"}}'), true);
    assert.equal(
      isRateLimitTail(
        ',"error":{"code":-32005,"message":"daily request count exceeded, request rate limited"}}',
      ),
      true,
    );
    assert.equal(
      isRateLimitTail(',"error":{"code":-32005,"message":"query returned more than 10000 results"}}'),
      false,
    );
    assert.equal(isRateLimitTail(',"error":{"code":-32000,"message":"execution reverted"}}'), false);
  });

  it("checks a single answer: its id, a rate-limit error, garbage", () => {
    const check = singleCheck(5);
    const ok = check(body('{"jsonrpc":"2.0","id":5,"result":"0x1"}'));
    assert.ok(typeof ok === "object" && ok.kind === ReplyKind.Result);
    assert.equal(check(body('{"jsonrpc":"2.0","id":6,"result":"0x1"}')), INVALID_REPLY, "another id");
    assert.equal(
      check(body('{"jsonrpc":"2.0","id":5,"error":{"code":429,"message":"too many requests"}}')),
      RATE_LIMITED,
    );
    assert.equal(check(body("not json")), INVALID_REPLY);
    assert.notEqual(NOT_BAD, RATE_LIMITED);
  });

  it("counts heavy methods by name and prefix", () => {
    for (const m of [
      "eth_getLogs",
      "debug_traceTransaction",
      "trace_block",
      "arbtrace_block",
      "state_getKeysPaged",
    ]) {
      assert.equal(isHeavy(m), true, m);
    }
    for (const m of ["eth_call", "eth_blockNumber", "debugx"]) assert.equal(isHeavy(m), false, m);
  });

  it("hands out consecutive ids and wraps before leaving the small-integer range", () => {
    const ids = new IdSequence();
    assert.equal(ids.take(3), 1);
    assert.equal(ids.take(1), 4);
    (ids as unknown as { next: number }).next = 0x3fffffff;
    assert.equal(ids.take(1), 0x3fffffff);
    assert.equal(ids.take(1), 1, "wrapped");
  });
});
