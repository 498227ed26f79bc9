import assert from "node:assert/strict";
import { NoopMetrics } from "../../../../data-plane/src/metrics/metrics";
import { AT_HEAD, mergeNeeds } from "../../../../data-plane/src/upstream/capabilities";
import { NetworkPool } from "../../../../data-plane/src/upstream/network-pool";
import type { Upstream } from "../../../../data-plane/src/upstream/upstream";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { UpstreamRecord } from "../../../../shared/src/redis/records";

/** Records what the pool reports about capabilities. */
class CapMetrics extends NoopMetrics {
  routing: string[] = [];
  overBudget: string[] = [];
  override capabilityRouting(_network: string, need: string, outcome: "routed" | "refused"): void {
    this.routing.push(`${need}:${outcome}`);
  }
  override upstreamOverBudget(_network: string, upstream: string, requests: number): void {
    this.overBudget.push(`${upstream}:${requests}`);
  }
}

const ADDR = "0x00000000000000000000000000000000000000aa";

/**
 * A pool over upstreams that are never connected (port 9 on loopback: a call that does reach the network
 * fails at once). Heads and probe results are set by hand, as health checks and state probes would.
 */
function pool(records: Partial<UpstreamRecord>[], metrics = new CapMetrics()) {
  const p = new NetworkPool(
    {
      slug: "eth",
      name: "eth",
      protocol: "EVM",
      chainId: 1,
      allowDebug: true,
      upstreams: records.map((r, i) => ({
        id: `u${i}`,
        httpUrl: `http://127.0.0.1:9/${i}`,
        wsUrl: null,
        weight: 1,
        ...r,
      })),
    },
    {
      timeoutMs: 1_000,
      connections: 1,
      breakerThreshold: 3,
      breakerCooldownMs: 60_000,
      maxAttempts: 3,
      maxLagBlocks: 5,
      coalesceMax: 1,
    },
    metrics,
  );
  const ups = (p as unknown as { upstreams: Upstream[] }).upstreams;
  for (const u of ups) u.head = 50;
  return { p, ups, metrics };
}

/** Which upstream ids `select` picks over many tries. */
function picks(
  p: NetworkPool,
  need?: { block: number; families: number; head?: boolean },
  exclude?: Upstream[],
): Set<string> {
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const u = p.select(exclude, false, need);
    seen.add(u?.id ?? "none");
  }
  return seen;
}

describe("data plane: selection by what each upstream can serve", () => {
  let closers: NetworkPool[] = [];
  afterEach(async () => {
    await Promise.all(closers.map((p) => p.close()));
    closers = [];
  });
  const make = (...args: Parameters<typeof pool>) => {
    const r = pool(...args);
    closers.push(r.p);
    return r;
  };

  it("old state goes only to the upstreams that keep it; recent state and plain calls to every one", () => {
    const { p, ups } = make([{ archiveMode: "ARCHIVE" }, {}]);
    ups[1]!.caps.recordProbe(40, 50); // pruned: serves 42.. with the margin
    const at = (b: string) => p.need({ method: "eth_getBalance", params: [ADDR, b] });
    assert.deepEqual(picks(p, at("0x5")), new Set(["u0"]));
    assert.deepEqual(picks(p, at("earliest")), new Set(["u0"]));
    assert.deepEqual(picks(p, at("0x2a")), new Set(["u0", "u1"]));
    assert.equal(at("latest"), AT_HEAD, "a head tag needs no state, only prefers the served head");
    assert.deepEqual(picks(p), new Set(["u0", "u1"]));
    // Failover stays within the capable ones: with u0 tried, nothing is left for block 5.
    assert.deepEqual(picks(p, at("0x5"), [ups[0]!]), new Set(["none"]));
  });

  it("an upstream not probed yet is tried after the ones known to serve the block, never refused", () => {
    const { p, ups } = make([{}, {}, {}]);
    ups[0]!.caps.recordProbe(0, 50); // archive, found by the probe
    ups[1]!.caps.recordProbe(45, 50); // pruned
    // ups[2]: not probed yet
    const need = { block: 3, families: 0 };
    assert.deepEqual(picks(p, need), new Set(["u0"]));
    assert.deepEqual(picks(p, need, [ups[0]!]), new Set(["u2"]), "the unknown one, after the known archive");
    ups[0]!.recordFailure("unreachable");
    ups[0]!.recordFailure("unreachable");
    ups[0]!.recordFailure("unreachable");
    assert.deepEqual(picks(p, need), new Set(["u2"]), "the archive node's breaker is open");
  });

  it("families route only once some upstream declares them", () => {
    const plain = make([{}, {}]);
    assert.equal(plain.p.need({ method: "debug_traceCall", params: [{}, "latest"] }), AT_HEAD);
    const { p } = make([{ methodFamilies: ["debug"] }, {}, { methodFamilies: ["debug", "trace"] }]);
    const debug = p.need({ method: "debug_traceTransaction", params: ["0x1"] });
    const trace = p.need({ method: "trace_block", params: ["latest"] });
    assert.deepEqual(picks(p, debug), new Set(["u0", "u2"]));
    assert.deepEqual(picks(p, trace), new Set(["u2"]));
    assert.deepEqual(picks(p, p.need({ method: "eth_chainId", params: [] })), new Set(["u0", "u1", "u2"]));
  });

  it("a head read prefers the upstreams at the served head, before budget; with none there, the highest; never refused", () => {
    const { p, ups } = make([{ maxRequestsPerSecond: 1 }, {}, {}]);
    ups[1]!.head = 48;
    ups[2]!.head = 49;
    const latest = p.need({ method: "eth_call", params: [{ to: ADDR }, "latest"] });
    assert.equal(latest, AT_HEAD);
    assert.equal(p.need({ method: "eth_call", params: [{ to: ADDR }] }), AT_HEAD, "no block: the head");
    assert.deepEqual(p.need({ method: "eth_call", params: [{ to: ADDR }, "0x31"] }), {
      block: 49,
      families: 0,
    });
    assert.equal(p.need({ method: "eth_call", params: [{ to: ADDR }, "safe"] }), undefined);
    assert.equal(p.servedHead(), 50);
    assert.deepEqual(picks(p, latest), new Set(["u0"]));
    assert.deepEqual(picks(p), new Set(["u0", "u1", "u2"]), "other calls: anywhere");
    // Over its budget, the node at the head still comes first: a head read from before a block the
    // client saw is wrong, going over a budget only a cost.
    ups[0]!.caps.spend(5, Date.now());
    assert.deepEqual(picks(p, latest), new Set(["u0"]));
    // With it tried, the highest of the others (49), not any of them.
    assert.deepEqual(picks(p, latest, [ups[0]!]), new Set(["u2"]));
    assert.deepEqual(picks(p, latest, [ups[0]!, ups[2]!]), new Set(["u1"]), "never refused");
    // Merged with a call's state need (a coalesced batch): both apply.
    const merged = mergeNeeds(latest, p.need({ method: "eth_getBalance", params: [ADDR, "0x30"] }));
    assert.deepEqual(merged, { block: 48, families: 0, head: true });
    assert.deepEqual(picks(p, merged), new Set(["u0"]));
  });

  it("Substrate: the best block (no hash) is a head read; a hash or a number is not", () => {
    const { p } = make([{}]);
    const need = (method: string, params: unknown[]) => p.need({ method, params });
    for (const [m, params] of [
      ["chain_getHeader", []],
      ["chain_getBlock", [null]],
      ["chain_getBlockHash", []],
      ["state_getStorage", ["0x26aa"]],
      ["state_call", ["Core_version", "0x"]],
      ["state_getKeysPaged", ["0x26aa", 10, null]],
      ["state_getRuntimeVersion", []],
    ] as const) {
      assert.equal(need(m, [...params]), AT_HEAD, m);
    }
    const hash = `0x${"ab".repeat(32)}`;
    assert.equal(need("chain_getHeader", [hash]), undefined);
    assert.equal(need("state_getStorage", ["0x26aa", hash]), undefined);
    assert.equal(need("chain_getBlockHash", [7]), undefined);
    assert.equal(need("system_chain", []), undefined);
  });

  it("over-budget upstreams go last, and are still used when nothing else is selectable", () => {
    const { p, ups } = make([{ maxRequestsPerSecond: 2 }, {}]);
    ups[0]!.caps.spend(2, Date.now());
    assert.deepEqual(picks(p), new Set(["u1"]));
    assert.deepEqual(picks(p, undefined, [ups[1]!]), new Set(["u0"]));
    // Capability ranks above budget: an over-budget archive node before a not yet probed one.
    const two = make([{ archiveMode: "ARCHIVE", maxRequestsPerSecond: 1 }, {}]);
    two.ups[0]!.caps.spend(5, Date.now());
    assert.deepEqual(picks(two.p, { block: 1, families: 0 }), new Set(["u0"]));
    assert.deepEqual(picks(two.p), new Set(["u1"]));
  });

  it("refuses a call no healthy upstream can serve, naming what was needed, sending nothing", async () => {
    const { p, ups, metrics } = make([{}, { methodFamilies: ["debug"] }]);
    ups[0]!.caps.recordProbe(40, 50);
    ups[1]!.caps.recordProbe(30, 50);
    const r = await p.call({ method: "eth_getBalance", params: [ADDR, "0x5"] });
    assert.equal(r.ok, false);
    assert.ok(!r.ok);
    assert.equal(r.error.reason, GatewayError.NoCapableUpstream.reason);
    assert.equal(r.error.httpStatus, 200);
    assert.equal(r.error.code, -32000);
    // u1 keeps more (oldest 30 + margin 2 = 32 = 0x20).
    assert.match(r.error.message, /state at block 0x5 \(oldest available 0x20\)/);
    const t = await p.call({ method: "trace_block", params: ["0x30"] });
    assert.ok(!t.ok);
    assert.match(t.error.message, /needs trace_\*, which no upstream serves/);
    // Nothing was sent: no breaker count, nothing in flight.
    for (const u of ups) {
      assert.equal(u.consecutiveFailures, 0);
      assert.equal(u.inFlight, 0);
    }
    assert.deepEqual(metrics.routing, ["state:refused", "state_family:refused"]);
    // No healthy upstream at all is still no_upstream.
    for (const u of ups) for (let i = 0; i < 3; i++) u.recordFailure("unreachable");
    const none = await p.call({ method: "eth_getBalance", params: [ADDR, "0x5"] });
    assert.ok(!none.ok);
    assert.equal(none.error, GatewayError.NoUpstream);
  });

  it("a batch: the element no upstream can serve is refused alone, the others are sent", async () => {
    const { p, ups, metrics } = make([{}]);
    ups[0]!.caps.recordProbe(40, 50);
    const results = await p.callBatch([
      { method: "eth_chainId", params: [] },
      { method: "eth_getBalance", params: [ADDR, "0x1"] },
      { method: "eth_getBalance", params: [ADDR, "0x30"] },
    ]);
    assert.equal(results.length, 3);
    const reasons = results.map((r) => (r.ok ? "ok" : r.error.reason));
    // Port 9 refuses the connection: the elements that were sent fail as unreachable.
    assert.deepEqual(reasons, ["upstream_unreachable", "no_capable_upstream", "upstream_unreachable"]);
    assert.deepEqual(metrics.routing.sort(), ["state:refused", "state:routed"]);
  });

  it("counts calls sent past a budget when nothing else was selectable", async () => {
    const { p, ups, metrics } = make([{ maxRequestsPerSecond: 1 }]);
    ups[0]!.caps.spend(1, Date.now());
    await p.call({ method: "eth_chainId", params: [] });
    assert.deepEqual(metrics.overBudget.slice(0, 1), ["u0:1"]);
    const d = p.describe()[0]!;
    assert.equal(d.maxRequestsPerSecond, 1);
    assert.equal(d.overBudget, true);
    assert.equal(d.archiveMode, "AUTO");
    assert.equal(d.oldestStateBlock, -1);
  });
});
