import assert from "node:assert/strict";
import { BY_HASH } from "../../../../../data-plane/src/upstream/empty-answer";
import { ReplyKind } from "../../../../../data-plane/src/upstream/reply";
import { answerResult, Wire, wired } from "./fakes";

const byNumber = { method: "eth_getBlockByNumber", params: ["0x64", false] };

describe("upstream pool: empty-answer retries", () => {
  it("asks the node with the highest head, not the one that answered null nor one above the network head", () => {
    const p = wired([{}, {}, {}, {}]);
    p.u[0]!.head = 100;
    p.u[1]!.head = 102;
    p.u[2]!.head = 101;
    p.u[3]!.head = 5_000;
    assert.equal(p.emptyRetry.target(100, p.u[0]!)?.id, "u1", "u3's head is an outlier no node confirms");
    assert.equal(p.emptyRetry.target(100, p.u[1]!)?.id, "u2");
    assert.equal(p.emptyRetry.target(103, p.u[0]!), undefined, "no node has the block");
    assert.equal(
      p.emptyRetry.target(BY_HASH, p.u[1]!),
      undefined,
      "a hash lookup: only a node ahead of the one asked",
    );
    assert.equal(p.emptyRetry.target(BY_HASH, p.u[0]!)?.id, "u1");
  });

  it("uses the second node's result, and counts it found", async () => {
    const p = wired([{}, {}]);
    p.u[0]!.head = 100;
    p.u[1]!.head = 100;
    p.wire.auto = (s) => answerResult(s, '{"number":"0x64"}');
    const first = { kind: ReplyKind.NullResult, tail: ',"result":null}' } as never;
    const r = await p.emptyRetry.retry(byNumber, undefined, first, p.u[0]!);
    assert.equal(r?.ok && r.reply.kind, ReplyKind.Result);
    assert.deepEqual(
      p.wire.sent.map((s) => s.node),
      ["u1"],
    );
    assert.deepEqual(p.metrics.of("emptyRetry:"), ["emptyRetry:found"]);
  });

  it("keeps the first null after a second null or a failed exchange", async () => {
    const p = wired([{}, {}]);
    p.u[0]!.head = 100;
    p.u[1]!.head = 100;
    const first = { kind: ReplyKind.NullResult, tail: ',"result":null}' } as never;
    p.wire.auto = (s) => answerResult(s, "null");
    const again = await p.emptyRetry.retry(byNumber, undefined, first, p.u[0]!);
    assert.equal(again?.ok && again.reply, first);
    p.wire.auto = (s) => s.fail("unreachable");
    const failed = await p.emptyRetry.retry(byNumber, undefined, first, p.u[0]!);
    assert.equal(failed?.ok && failed.reply, first);
    assert.deepEqual(p.metrics.of("emptyRetry:"), ["emptyRetry:empty", "emptyRetry:failed"]);
    await Wire.settle();
  });

  it("never retries a method whose null is an answer", () => {
    const p = wired([{}, {}]);
    for (const u of p.u) u.head = 100;
    const first = { kind: ReplyKind.NullResult, tail: ',"result":null}' } as never;
    assert.equal(
      p.emptyRetry.retry({ method: "eth_call", params: [{}, "latest"] }, undefined, first, p.u[0]!),
      undefined,
    );
  });
});
