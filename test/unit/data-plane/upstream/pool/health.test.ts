import assert from "node:assert/strict";
import { parseHead } from "../../../../../data-plane/src/upstream/pool/health";
import { ExchangeKind } from "../../../../../data-plane/src/upstream/upstream";
import { answerResult, openBreaker, Wire, wired } from "./fakes";

describe("upstream pool: health probes", () => {
  it("reads the head of an EVM and a Substrate probe answer", () => {
    assert.equal(parseHead('{"jsonrpc":"2.0","id":1,"result":"0x10"}', false), 16);
    assert.equal(parseHead('{"jsonrpc":"2.0","id":1,"result":{"number":"0x20"}}', true), 32);
    assert.equal(parseHead('{"jsonrpc":"2.0","id":1,"result":null}', true), undefined);
    assert.equal(parseHead("<html>", false), undefined);
  });

  it("sets every node's head in a round and reports its health", async () => {
    const p = wired([{}, {}]);
    p.wire.auto = (s) => answerResult(s, s.node === "u0" ? '"0x64"' : '"0x63"');
    await p.health.check();
    assert.deepEqual(
      p.u.map((u) => u.head),
      [100, 99],
    );
    assert.deepEqual(
      p.wire.sent.map((s) => s.kind),
      [ExchangeKind.Probe, ExchangeKind.Probe],
    );
    assert.deepEqual(p.metrics.of("health:").sort(), ["health:u0:true:100", "health:u1:true:99"]);
  });

  it("backs a node off on its rate-limit answer, and keeps its head on a garbage answer", async () => {
    const p = wired([{}, {}]);
    p.u[1]!.head = 7;
    p.wire.auto = (s) =>
      s.node === "u0"
        ? s.answer('{"jsonrpc":"2.0","id":1,"error":{"code":429,"message":"too many requests"}}')
        : s.answer("<html>");
    await p.health.check();
    assert.equal(p.u[0]!.backedOff(p.clock.now()), true);
    assert.equal(p.u[1]!.head, 7);
  });

  it("runs one probe of a node at a time, and none while its breaker's cooldown runs", async () => {
    const p = wired([{}]);
    const first = p.health.probe(p.u[0]!);
    assert.equal(await p.health.probe(p.u[0]!), false, "one is running");
    answerResult(p.wire.sent[0]!, '"0x5"');
    assert.equal(await first, true);
    openBreaker(p.u[0]!);
    assert.equal(await p.health.probe(p.u[0]!), false);
    assert.equal(p.wire.sent.length, 1);
    await Wire.settle();
  });

  it("snapshots each node's lag behind the network head", () => {
    const p = wired([{}, {}, {}]);
    p.u[0]!.head = 100;
    p.u[1]!.head = 97;
    const snap = p.health.snapshot();
    assert.equal(snap.head, 100);
    assert.deepEqual(
      snap.upstreams.map((u) => [u.id, u.lagBlocks]),
      [
        ["u0", 0],
        ["u1", 3],
        ["u2", null],
      ],
    );
    assert.deepEqual(
      p.health.describe().map((d) => d.id),
      ["u0", "u1", "u2"],
    );
  });
});
