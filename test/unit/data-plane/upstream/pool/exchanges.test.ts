import assert from "node:assert/strict";
import { ReplyKind } from "../../../../../data-plane/src/upstream/reply";
import { ExchangeKind } from "../../../../../data-plane/src/upstream/upstream";
import { GatewayError } from "../../../../../shared/src/jsonrpc/errors";
import { answerResult, Wire, wired } from "./fakes";

describe("upstream pool: single, batch and verbatim exchanges", () => {
  it("sends a single call with the pool's id and answers with the node's reply", async () => {
    const p = wired([{}]);
    p.wire.auto = (s) => answerResult(s, '"0x1"');
    const r = await p.exchanges.single({ method: "eth_chainId", params: [] }, "[]", undefined);
    assert.equal(r.ok && r.reply.tail, ',"result":"0x1"}');
    assert.equal(p.wire.sent[0]!.kind, ExchangeKind.Light);
    assert.equal(Wire.calls(p.wire.sent[0]!.body)[0]!.method, "eth_chainId");
  });

  it("sends a heavy call as a heavy exchange", async () => {
    const p = wired([{}]);
    p.wire.auto = (s) => answerResult(s, "[]");
    await p.exchanges.single({ method: "eth_getLogs", params: [{}] }, undefined, undefined);
    assert.equal(p.wire.sent[0]!.kind, ExchangeKind.Heavy);
  });

  it("sends a chunk as one batch and puts the answers back in call order", async () => {
    const p = wired([{}]);
    p.wire.auto = (s) => {
      const calls = Wire.calls(s.body);
      s.answer(JSON.stringify(calls.reverse().map((c) => ({ jsonrpc: "2.0", id: c.id, result: c.method }))));
    };
    const out = await p.exchanges.chunk([
      { method: "eth_a", params: [] },
      { method: "eth_b", params: [] },
    ]);
    assert.deepEqual(
      out.map((r) => r.ok && r.reply.tail),
      [',"result":"eth_a"}', ',"result":"eth_b"}'],
    );
  });

  it("notes a node that takes no batches, and moves the batch to another node", async () => {
    const p = wired([{}, {}]);
    p.wire.auto = (s) =>
      s.node === "u0"
        ? s.answer('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batches not supported"}}')
        : s.answer(JSON.stringify(Wire.calls(s.body).map((c) => ({ jsonrpc: "2.0", id: c.id, result: 1 }))));
    const out = await p.exchanges.chunk(
      [
        { method: "eth_a", params: [] },
        { method: "eth_b", params: [] },
      ],
      undefined,
      p.u[0],
    );
    assert.equal(p.exchanges.batchesRefused, true);
    assert.ok(out.every((r) => r.ok));
    assert.equal(p.u[0]!.consecutiveFailures, 0, "no penalty for the node");
  });

  it("fails every call of a chunk with the exchange's row", async () => {
    const p = wired([{}], { maxAttempts: 1 });
    p.wire.auto = (s) => (s.kind === ExchangeKind.Light ? s.fail("timeout") : undefined);
    const out = await p.exchanges.chunk([
      { method: "eth_a", params: [] },
      { method: "eth_b", params: [] },
    ]);
    assert.deepEqual(out, [
      { ok: false, error: GatewayError.UpstreamTimeout },
      { ok: false, error: GatewayError.UpstreamTimeout },
    ]);
  });

  it("retries a null a lagging node gave inside a chunk on the node ahead", async () => {
    const p = wired([{}, {}]);
    p.u[0]!.head = 100;
    p.u[1]!.head = 100;
    p.wire.auto = (s) => {
      const calls = Wire.calls(s.body);
      if (s.body.startsWith("[")) {
        s.answer(JSON.stringify(calls.map((c) => ({ jsonrpc: "2.0", id: c.id, result: null }))));
      } else answerResult(s, '{"number":"0x64"}');
    };
    const out = await p.exchanges.chunk(
      [{ method: "eth_getBlockByNumber", params: ["0x64", false] }],
      undefined,
      p.u[0],
    );
    assert.equal(out[0]!.ok && out[0]!.reply.kind, ReplyKind.Result);
  });

  it("sends one call to one node alone, with no failover", async () => {
    const p = wired([{}, {}]);
    p.wire.auto = (s) => s.fail("unreachable");
    const r = await p.exchanges.on(p.u[1]!, {
      method: "eth_getTransactionCount",
      params: ["0xaa", "latest"],
    });
    assert.equal(r.ok, false);
    assert.deepEqual(
      p.wire.sent.map((s) => s.node),
      ["u1"],
    );
  });

  it("passes a verbatim batch's answer bytes through when every call succeeded", async () => {
    const p = wired([{}]);
    const text =
      '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_gasPrice"}]';
    const answer = '[{"jsonrpc":"2.0","id":1,"result":"0x1"},{"jsonrpc":"2.0","id":2,"result":"0x2"}]';
    p.wire.auto = (s) => s.answer(answer);
    const calls = [
      { method: "eth_chainId", params: undefined, idText: "1" },
      { method: "eth_gasPrice", params: undefined, idText: "2" },
    ] as never;
    const r = await p.exchanges.verbatim(text, calls);
    assert.ok(r.ok);
    assert.equal(Buffer.from(r.value.body as Uint8Array).toString("utf8"), answer);
    assert.equal(p.wire.sent[0]!.body, text, "the client's own text went upstream");
  });
});
