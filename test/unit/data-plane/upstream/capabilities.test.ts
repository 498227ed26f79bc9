import assert from "node:assert/strict";
import {
  blockOfArg,
  FAMILY_BIT,
  familyNames,
  familyOf,
  mergeNeeds,
  Serves,
  stateBlockOf,
  UpstreamCapabilities,
} from "../../../../data-plane/src/upstream/capabilities";
import { findOldestState } from "../../../../data-plane/src/upstream/state-probe";
import { ExchangeKind, Upstream } from "../../../../data-plane/src/upstream/upstream";
import type { UpstreamRecord } from "../../../../shared/src/redis/records";

const record = (extra: Partial<UpstreamRecord> = {}): UpstreamRecord => ({
  id: "u",
  httpUrl: "http://127.0.0.1:9",
  wsUrl: null,
  weight: 1,
  ...extra,
});

describe("data plane: what a call needs of its upstream", () => {
  it("reads the block argument of the state methods in every spelling nodes take", () => {
    const addr = "0x00000000000000000000000000000000000000aa";
    assert.equal(stateBlockOf("eth_getBalance", [addr, "0x5"]), 5);
    assert.equal(stateBlockOf("eth_getBalance", [addr, "0x0005"]), 5);
    assert.equal(stateBlockOf("eth_getBalance", [addr, "0X1f"]), 31);
    assert.equal(stateBlockOf("eth_getBalance", [addr, "12"]), 12);
    assert.equal(stateBlockOf("eth_getBalance", [addr, 7]), 7);
    assert.equal(stateBlockOf("eth_getBalance", [addr, "earliest"]), 0);
    assert.equal(stateBlockOf("eth_getBalance", [addr, "EARLIEST"]), 0);
    assert.equal(stateBlockOf("eth_getBalance", [addr, { blockNumber: "0x10" }]), 16);
    for (const head of ["latest", "pending", "safe", "finalized", undefined, null]) {
      assert.equal(stateBlockOf("eth_getBalance", [addr, head]), -1, String(head));
    }
    // A block hash names no height; garbage is the node's to answer.
    assert.equal(stateBlockOf("eth_getBalance", [addr, `0x${"ab".repeat(32)}`]), -1);
    assert.equal(stateBlockOf("eth_getBalance", [addr, { blockHash: `0x${"ab".repeat(32)}` }]), -1);
    for (const bad of ["0x", "0xzz", "-1", "1e3", -1, 1.5, true, [], "0x1ffffffffffffffff"]) {
      assert.equal(blockOfArg(bad), -1, JSON.stringify(bad));
    }
    assert.equal(stateBlockOf("eth_getStorageAt", [addr, "0x0", "0x9"]), 9);
    assert.equal(stateBlockOf("eth_call", [{ to: addr }, "0x9"]), 9);
    assert.equal(stateBlockOf("eth_call", [{ to: addr }]), -1);
    assert.equal(stateBlockOf("eth_getProof", [addr, [], "0x3"]), 3);
    assert.equal(stateBlockOf("trace_call", [{ to: addr }, ["trace"], "0x3"]), 3);
    // Re-executing a block needs its parent's state.
    assert.equal(stateBlockOf("debug_traceBlockByNumber", ["0x8", {}]), 7);
    assert.equal(stateBlockOf("trace_block", ["0x0"]), 0);
    // Other methods need no state; params that are not an array neither.
    assert.equal(stateBlockOf("eth_getBlockByNumber", ["0x1", false]), -1);
    assert.equal(stateBlockOf("eth_getBalance", { address: addr, block: "0x1" }), -1);
  });

  it("names the family of debug_* / trace_* in any case, and merges needs of calls sent together", () => {
    assert.equal(familyOf("debug_traceTransaction"), FAMILY_BIT.debug);
    assert.equal(familyOf("DEBUG_traceCall"), FAMILY_BIT.debug);
    assert.equal(familyOf("trace_block"), FAMILY_BIT.trace);
    for (const m of ["eth_call", "debug", "trace", "tracer_x", "d", ""]) assert.equal(familyOf(m), 0, m);
    assert.equal(familyNames(FAMILY_BIT.debug | FAMILY_BIT.trace), "debug_* and trace_*");
    assert.deepEqual(mergeNeeds({ block: 9, families: 0 }, { block: 4, families: FAMILY_BIT.trace }), {
      block: 4,
      families: FAMILY_BIT.trace,
    });
    assert.deepEqual(mergeNeeds({ block: -1, families: 1 }, { block: 4, families: 0 }), {
      block: 4,
      families: 1,
    });
    assert.equal(mergeNeeds(undefined, undefined), undefined);
  });
});

describe("data plane: an upstream's state history", () => {
  it("AUTO is unknown until probed; block 1 served = archive (0), for good", () => {
    const c = new UpstreamCapabilities(record());
    assert.equal(c.archiveMode, "AUTO");
    assert.equal(c.servesState(0, 100), Serves.Unknown);
    c.recordProbe(0, 100);
    assert.equal(c.oldestServed(5_000), 0);
    assert.equal(c.servesState(0, 5_000), Serves.Yes);
  });

  it("a pruned window moves with the head, with a margin of max(2, window/8) blocks", () => {
    const c = new UpstreamCapabilities(record());
    c.recordProbe(40, 50); // window 10: margin 2
    assert.equal(c.oldestServed(50), 42);
    assert.equal(c.servesState(41, 50), Serves.No);
    assert.equal(c.servesState(42, 50), Serves.Yes);
    assert.equal(c.oldestServed(60), 52, "ten blocks later, ten blocks more are gone");
    assert.equal(c.estimatedOldest(60), 50);
    assert.equal(c.servesState(45, 60), Serves.No);
    c.recordProbe(1_000, 1_128); // geth's 128: margin 16
    assert.equal(c.oldestServed(1_128), 1_016);
    // A head older than the probe's (a node that went back): no negative move.
    assert.equal(c.oldestServed(1_100), 1_016);
  });

  it("ARCHIVE is taken at its word; PRUNED never counts as archive, even at block 0", () => {
    const a = new UpstreamCapabilities(record({ archiveMode: "ARCHIVE" }));
    assert.equal(a.wantsProbe, false);
    assert.equal(a.servesState(0, 10), Serves.Yes);
    const p = new UpstreamCapabilities(record({ archiveMode: "PRUNED" }));
    assert.equal(p.wantsProbe, true);
    assert.equal(p.servesState(0, 10), Serves.Unknown);
    p.recordProbe(0, 64); // a chain younger than the window: state from 0, but it will go
    assert.equal(p.oldestServed(64), 8);
    assert.equal(p.oldestServed(100), 44);
    // A record update keeps what was probed; switching to ARCHIVE overrides it.
    p.apply(record({ archiveMode: "ARCHIVE" }));
    assert.equal(p.oldestServed(100), 0);
    p.apply(record({ archiveMode: "AUTO" }));
    assert.equal(p.oldestServed(100), 0, "AUTO: the probe found block 0's state");
  });

  it("the budget is a token bucket of one second's worth, refilled continuously", () => {
    const c = new UpstreamCapabilities(record({ maxRequestsPerSecond: 10 }));
    let t = 1_000_000;
    assert.equal(c.overBudget(t), false);
    for (let i = 0; i < 10; i++) assert.equal(c.spend(1, t), false, `request ${i}`);
    assert.equal(c.overBudget(t), true);
    assert.equal(c.spend(1, t), true, "a request past the budget is reported as such");
    t += 250; // 2.5 tokens back, 1 owed
    assert.equal(c.overBudget(t), false);
    assert.equal(c.spend(20, t), false, "a batch takes what is left and more");
    t += 1_000;
    assert.equal(c.overBudget(t), true, "in debt for a while after a batch larger than the budget");
    t += 10_000;
    assert.equal(c.overBudget(t), false);
    // No budget: never over. A budget change resets the bucket.
    const none = new UpstreamCapabilities(record());
    assert.equal(none.spend(1_000_000, t), false);
    assert.equal(none.overBudget(t), false);
    c.spend(100, t);
    c.apply(record({ maxRequestsPerSecond: 50 }));
    assert.equal(c.overBudget(t), false);
  });

  it("families from the record; an empty list declares none", () => {
    assert.equal(new UpstreamCapabilities(record({ methodFamilies: ["trace", "debug"] })).families, 3);
    assert.equal(new UpstreamCapabilities(record({ methodFamilies: [] })).families, 0);
    assert.equal(new UpstreamCapabilities(record({ methodFamilies: null })).families, 0);
  });
});

describe("data plane: the state probe's search", () => {
  /** An upstream keeping state from `oldest` up; counts the reads. */
  const node = (oldest: number) => {
    const asked: number[] = [];
    return {
      asked,
      ask: async (b: number) => {
        asked.push(b);
        return b >= oldest;
      },
    };
  };

  it("one read for a full-history node, about 2·log2(window) for a pruned one, exact", async () => {
    const archive = node(0);
    assert.equal(await findOldestState(20_000_000, archive.ask), 0);
    assert.deepEqual(archive.asked, [1]);
    for (const [head, oldest] of [
      [20_000_000, 20_000_000 - 128],
      [50, 40],
      [1_000, 2],
      [1_000, 1_000],
      [7, 6],
    ] as const) {
      const n = node(oldest);
      assert.equal(await findOldestState(head, n.ask), oldest, `${head}/${oldest}`);
      assert.ok(n.asked.length <= 3 + 2 * Math.ceil(Math.log2(head - oldest + 2)), `${n.asked.length} reads`);
    }
  });

  it("with last round's estimate as a guess: three reads when it still holds, exact when it does not", async () => {
    const same = node(1_000);
    assert.equal(await findOldestState(1_128, same.ask, 1_000), 1_000);
    assert.deepEqual(same.asked, [1, 1_000, 999]);
    const moved = node(1_050);
    assert.equal(await findOldestState(1_178, moved.ask, 1_000), 1_050);
    const grew = node(900);
    assert.equal(await findOldestState(1_128, grew.ask, 1_000), 900);
  });

  it("no verdict (unreachable, throttled, head state missing) gives none", async () => {
    assert.equal(await findOldestState(100, async () => undefined), undefined);
    assert.equal(await findOldestState(100, async (b) => (b === 1 ? false : undefined)), undefined);
    assert.equal(await findOldestState(100, async () => false), undefined, "not even the head's state");
    assert.equal(await findOldestState(0, async () => true), undefined, "nothing to probe at block 0");
  });
});

describe("data plane: the state probe's exchanges give no verdict on the node", () => {
  it("neither failures (5xx, unreachable, timeouts) nor slow answers reach the breaker or the latency EWMA", () => {
    const u = new Upstream(record(), {
      timeoutMs: 1_000,
      connections: 1,
      breakerThreshold: 2,
      breakerCooldownMs: 60_000,
    });
    for (const failure of ["bad", "unreachable", "timeout", undefined] as const) {
      for (let i = 0; i < 5; i++) {
        u.inFlight++;
        u.settle(900, false, ExchangeKind.Capability, failure);
      }
    }
    assert.equal(u.breakerOpen, false);
    assert.equal(u.consecutiveFailures, 0);
    assert.equal(u.errorRateEwma, 0);
    assert.equal(u.latencyEwmaMs, 0);
    assert.equal(u.inFlight, 0);
    // The same failures on a client call do count.
    u.inFlight += 2;
    u.settle(1, false, ExchangeKind.Light, "bad");
    u.settle(1, false, ExchangeKind.Light, "bad");
    assert.equal(u.breakerOpen, true);
    void u.close();
  });
});
