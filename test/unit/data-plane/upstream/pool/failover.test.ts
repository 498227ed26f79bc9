import assert from "node:assert/strict";
import { RATE_LIMITED } from "../../../../../data-plane/src/upstream/pool/wire";
import { ExchangeKind } from "../../../../../data-plane/src/upstream/upstream";
import { GatewayError } from "../../../../../shared/src/jsonrpc/errors";
import { openBreaker, Wire, wired } from "./fakes";

const parse = (r: { text: string }) => r.text;

describe("upstream pool: failover", () => {
  it("moves a failed exchange to another node, and books both", async () => {
    const p = wired([{}, {}]);
    for (const u of p.u) u.head = 10;
    p.wire.auto = (s) => (p.wire.sent.length === 1 ? s.fail("unreachable") : s.answer("fine"));
    const r = await p.failover.exchange("body", p.u[0], parse, ExchangeKind.Light, undefined, 1);
    assert.deepEqual(r.ok && [r.value, r.upstream.id], ["fine", "u1"]);
    assert.deepEqual(
      p.wire.sent.map((s) => s.node),
      ["u0", "u1"],
    );
    assert.deepEqual(p.metrics.of("request:"), ["request:u0:error", "request:u1:ok"]);
  });

  it("does not fail over what every node would refuse alike (too large)", async () => {
    const p = wired([{}, {}]);
    p.wire.auto = (s) => s.fail("too_large");
    const r = await p.failover.exchange("body", undefined, parse, ExchangeKind.Light, undefined, 1);
    assert.equal(r.ok, false);
    assert.equal(p.wire.sent.length, 1);
  });

  it("answers a heavy call's timeout at once, probes the node, and never fails it over", async () => {
    const p = wired([{}, {}]);
    p.wire.auto = (s) => (s.kind === ExchangeKind.Heavy ? s.fail("timeout") : undefined);
    const r = await p.failover.exchange("body", p.u[0], parse, ExchangeKind.Heavy, undefined, 1);
    assert.deepEqual(r, { ok: false, error: GatewayError.UpstreamTimeout });
    assert.deepEqual(p.probed, ["u0"], "a probe gives the verdict on the node");
    assert.equal(p.wire.sent.filter((s) => s.kind === ExchangeKind.Heavy).length, 1);
  });

  it("fails over a light call's timeout, up to UPSTREAM_MAX_ATTEMPTS nodes", async () => {
    const p = wired([{}, {}, {}], { maxAttempts: 2 });
    p.wire.auto = (s) => (s.kind === ExchangeKind.Light ? s.fail("timeout") : undefined);
    const r = await p.failover.exchange("body", undefined, parse, ExchangeKind.Light, undefined, 1);
    assert.deepEqual(r, { ok: false, error: GatewayError.UpstreamTimeout });
    assert.equal(p.wire.sent.filter((s) => s.kind === ExchangeKind.Light).length, 2);
    assert.equal(
      new Set(p.wire.sent.filter((s) => s.kind === ExchangeKind.Light).map((s) => s.node)).size,
      2,
    );
  });

  it("answers no_upstream when no node may be tried, and refuses a call no node can serve", async () => {
    const p = wired([{ archiveMode: "PRUNED" }]);
    p.u[0]!.head = 1_000;
    p.u[0]!.caps.recordProbe(900, 1_000);
    const r = await p.failover.exchange(
      "b",
      undefined,
      parse,
      ExchangeKind.Light,
      { block: 5, families: 0 },
      1,
    );
    assert.equal(!r.ok && r.error.reason, GatewayError.NoCapableUpstream.reason);
    openBreaker(p.u[0]!);
    const none = await p.failover.exchange("b", undefined, parse, ExchangeKind.Light, undefined, 1);
    assert.deepEqual(none, { ok: false, error: GatewayError.NoUpstream });
    assert.equal(p.wire.sent.length, 0, "nothing was sent");
  });

  it("backs a node off on its rate-limit answer and moves on", async () => {
    const p = wired([{}, {}]);
    p.wire.auto = (s) => s.answer(s.node);
    const r = await p.failover.exchange(
      "b",
      p.u[0],
      (x) => (x.text === "u0" ? RATE_LIMITED : x.text),
      ExchangeKind.Light,
      undefined,
      1,
    );
    assert.deepEqual(r.ok && r.value, "u1");
    assert.equal(p.u[0]!.backedOff(p.clock.now()), true);
    await Wire.settle();
  });
});
