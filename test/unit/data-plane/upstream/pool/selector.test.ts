import assert from "node:assert/strict";
import { AT_HEAD } from "../../../../../data-plane/src/upstream/capabilities";
import { base, openBreaker } from "./fakes";

describe("upstream pool: selection", () => {
  it("leaves out a node that lags more than HEALTH_MAX_LAG_BLOCKS, or whose breaker is open", () => {
    const { selector, u } = base([{}, {}, {}], { maxLagBlocks: 5 });
    u[0]!.head = 100;
    u[1]!.head = 100;
    u[2]!.head = 94;
    assert.equal(selector.healthyCount(), 2);
    assert.deepEqual(
      selector.selectableAt(-1).map((x) => x.id),
      ["u0", "u1"],
    );
    openBreaker(u[1]!);
    assert.equal(selector.healthyCount(), 1, "breaker open");
    assert.equal(selector.select(undefined)?.id, "u0");
    assert.equal(selector.select([u[0]!]), undefined, "the only one left is excluded");
  });

  it("sends nothing to a backed-off node until the clock passes the back-off", () => {
    const { selector, u, clock } = base([{}]);
    clock.t = Date.now();
    u[0]!.backOff(1_000);
    assert.equal(selector.select(undefined), undefined);
    clock.advance(10_000);
    assert.equal(selector.select(undefined)?.id, "u0");
  });

  it("prefers the node with the lower tail latency of the two drawn", () => {
    let draws = 0;
    const { selector, u } = base([{}, {}], { random: () => (draws++ % 2 === 0 ? 0 : 0.99) });
    for (const x of u) x.head = 100;
    u[0]!.latencyEwmaMs = 400;
    u[1]!.latencyEwmaMs = 20;
    for (let i = 0; i < 20; i++) assert.equal(selector.select(undefined)?.id, "u1");
    u[0]!.latencyEwmaMs = 25;
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) seen.add(selector.select(undefined)!.id);
    assert.deepEqual([...seen], ["u0"], "within the tie: load decides, then the draw (the first drawn)");
  });

  it("a node with no recent answers is compared by the probes' medians: probes reading high do not steer every call away", () => {
    let draws = 0;
    // The first draw of each select alternates between u0 and u1 (the second draw is the other node).
    const { selector, u } = base([{}, {}], { random: () => [0.3, 0.7, 0.7, 0.3][draws++ % 4]! });
    for (const x of u) x.head = 100;
    // u0 serves the calls: a window of 2 ms answers. u1 has only been probed, and probes read higher than
    // calls (the gateway's own scheduling), which left its EWMA (probes count in it) far above u0's. Both
    // are probed alike: 10 ms, one probe held for 80 ms.
    for (let i = 0; i < 40; i++) u[0]!.latency.record(2, 0);
    u[0]!.latencyEwmaMs = 2;
    for (const x of u) for (const ms of [10, 11, 80, 10, 12]) x.probeLatency.record(ms);
    u[1]!.latencyEwmaMs = 25;
    const picked = { u0: 0, u1: 0 } as Record<string, number>;
    for (let i = 0; i < 40; i++) picked[selector.select(undefined)!.id]!++;
    assert.deepEqual(picked, { u0: 20, u1: 20 }, "a tie: the draw decides");
    // Slow on its probes too (three of five at 80 ms): it stays out of favour.
    for (let i = 0; i < 3; i++) u[1]!.probeLatency.record(80);
    for (let i = 0; i < 20; i++) assert.equal(selector.select(undefined)?.id, "u0");
  });

  it("reads what a call needs: the head, a block's state, a family once one is declared", () => {
    const { selector } = base([{}, {}]);
    assert.equal(selector.need({ method: "eth_blockNumber", params: [] }), AT_HEAD);
    assert.equal(selector.need({ method: "eth_chainId", params: [] }), undefined);
    assert.deepEqual(selector.need({ method: "eth_getBalance", params: ["0xaa", "0x10"] }), {
      block: 16,
      families: 0,
    });
    const fam = base([{ methodFamilies: ["trace"] }, {}]);
    assert.deepEqual(
      fam.selector.need({ method: "trace_block", params: ["0x10"] }),
      { block: 15, families: 2 },
      "a block's trace replays from its parent's state",
    );
  });

  it("routes a state read to a node that keeps the state, and refuses with the oldest block kept", () => {
    const { selector, u } = base([{ archiveMode: "ARCHIVE" }, { archiveMode: "PRUNED" }]);
    for (const x of u) x.head = 1_000;
    u[1]!.caps.recordProbe(900, 1_000);
    const old = { block: 0x10, families: 0 };
    for (let i = 0; i < 10; i++) assert.equal(selector.select(undefined, false, old)?.id, "u0");
    assert.equal(selector.capabilityRefusal(old), undefined, "u0 serves it");
    openBreaker(u[0]!);
    assert.equal(selector.select(undefined, false, old), undefined);
    const refusal = selector.capabilityRefusal(old);
    assert.match(refusal?.message ?? "", /no upstream serves the state at block 0x10/);
  });

  it("prefers a node at the served head for a head read", () => {
    const { selector, u, heads } = base([{}, {}, {}]);
    u[0]!.head = 100;
    u[1]!.head = 100;
    u[2]!.head = 98;
    heads.servedAt(heads.best());
    for (let i = 0; i < 30; i++) assert.notEqual(selector.select(undefined, false, AT_HEAD)?.id, "u2");
    assert.equal(selector.atHeadCount(), 2);
    assert.equal(selector.select([u[0]!, u[1]!], false, AT_HEAD)?.id, "u2", "behind, but never refused");
  });

  it("lists the nodes at or above a height, highest head first", () => {
    const { selector, u } = base([{}, {}, {}]);
    u[0]!.head = 98;
    u[1]!.head = 100;
    u[2]!.head = 99;
    assert.deepEqual(
      selector.selectableAt(99).map((x) => x.id),
      ["u1", "u2"],
    );
  });
});
