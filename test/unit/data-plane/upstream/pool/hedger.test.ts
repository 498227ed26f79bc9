import assert from "node:assert/strict";
import { ExchangeKind } from "../../../../../data-plane/src/upstream/upstream";
import { Wire, wired } from "./fakes";

const HEDGE = { enabled: true, minDelayMs: 10, maxDelayMs: 50, maxPercent: 100 };
const parse = (r: { text: string }) => r.text;

describe("upstream pool: hedged reads (fake clock)", () => {
  it("sends no copy while the first node answers within the hedge delay", async () => {
    const p = wired([{}, {}], { hedge: HEDGE });
    const r = p.failover.exchange("b", p.u[0], parse, ExchangeKind.Light, undefined, 1, true);
    p.clock.advance(49);
    p.clock.turn();
    assert.equal(p.wire.sent.length, 1);
    p.wire.sent[0]!.answer("first");
    const out = await r;
    assert.deepEqual(out.ok && out.upstream.id, "u0");
    assert.equal(p.clock.pendingTimers, 0, "the delay's timer is cleared");
    assert.deepEqual(p.metrics.of("hedge:"), [], "no copy, no hedge counted");
  });

  it("sends a copy to another node after the delay (in the check phase); the first answer wins and cancels the other", async () => {
    const p = wired([{}, {}], { hedge: HEDGE });
    const r = p.failover.exchange("b", p.u[0], parse, ExchangeKind.Light, undefined, 1, true, "tp");
    p.clock.advance(50);
    assert.equal(p.wire.sent.length, 1, "the timer only queues the copy for the check phase");
    p.clock.turn();
    assert.deepEqual(
      p.wire.sent.map((s) => [s.node, s.traceparent]),
      [
        ["u0", "tp"],
        ["u1", "tp"],
      ],
    );
    p.wire.sent[1]!.answer("copy");
    const out = await r;
    assert.deepEqual(out.ok && [out.value, out.upstream.id], ["copy", "u1"]);
    assert.equal(p.wire.sent[0]!.cancelled, true, "the slow exchange is cancelled");
    await Wire.settle();
    assert.deepEqual(p.metrics.of("hedge:"), ["hedge:won"]);
    assert.deepEqual(p.metrics.of("request:"), ["request:u1:ok", "request:u0:cancelled"]);
  });

  it("counts a copy that lost, and waits for the other when one fails", async () => {
    const p = wired([{}, {}], { hedge: HEDGE });
    const r = p.failover.exchange("b", p.u[0], parse, ExchangeKind.Light, undefined, 1, true);
    p.clock.advance(50);
    p.clock.turn();
    p.wire.sent[1]!.fail("unreachable");
    await Wire.settle();
    p.wire.sent[0]!.answer("late but fine");
    const out = await r;
    assert.deepEqual(out.ok && out.upstream.id, "u0");
    assert.deepEqual(p.metrics.of("hedge:"), ["hedge:lost"]);
  });

  it("sends no copy past HEDGE_MAX_PERCENT (capped)", async () => {
    const p = wired([{}, {}], { hedge: { ...HEDGE, maxPercent: 0 } });
    const r = p.failover.exchange("b", p.u[0], parse, ExchangeKind.Light, undefined, 1, true);
    p.clock.advance(50);
    p.clock.turn();
    assert.equal(p.wire.sent.length, 1);
    assert.deepEqual(p.metrics.of("hedge:"), ["hedge:capped"]);
    p.wire.sent[0]!.answer("x");
    await r;
  });

  it("never hedges a call that is not hedgeable, nor with one node", async () => {
    const p = wired([{}, {}], { hedge: HEDGE });
    const r = p.failover.exchange("b", p.u[0], parse, ExchangeKind.Light, undefined, 1, false);
    assert.equal(p.clock.pendingTimers, 0);
    p.wire.sent[0]!.answer("x");
    await r;
    const one = wired([{}], { hedge: HEDGE });
    const r1 = one.failover.exchange("b", undefined, parse, ExchangeKind.Light, undefined, 1, true);
    assert.equal(one.clock.pendingTimers, 0);
    one.wire.sent[0]!.answer("x");
    await r1;
  });
});
