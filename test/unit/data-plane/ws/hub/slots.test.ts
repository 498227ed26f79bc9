import assert from "node:assert/strict";
import { Slot, type SubscriptionTarget, UpstreamSlots } from "../../../../../data-plane/src/ws/hub/slots";
import { createLogger } from "../../../../../shared/src/log/logger";

function target(
  ups: { id: string; ws?: boolean; weight?: number; head?: number; open?: boolean }[],
): SubscriptionTarget {
  return {
    slug: "eth",
    record: {
      upstreams: ups.map((u) => ({
        id: u.id,
        wsUrl: u.ws === false ? null : `ws://127.0.0.1:9/${u.id}`,
        weight: u.weight ?? 1,
      })),
    },
    describe: () => ups.map((u) => ({ id: u.id, breakerOpen: u.open === true, head: u.head ?? -1 })),
  };
}

const OPTS = { connections: 2, timeoutMs: 1_000, reconnectMaxMs: 1_000, pingIntervalMs: 10_000 };
const EVENTS = { notification() {}, orphaned() {} };

describe("ws hub: upstream socket slots", () => {
  const logger = createLogger("test", "silent");
  const slots = (t: SubscriptionTarget) => new UpstreamSlots(t, OPTS, EVENTS, logger);

  it("picks a node with a WebSocket URL, at the highest head, breaker closed", () => {
    const s = slots(
      target([
        { id: "a", ws: false, head: 100 },
        { id: "b", head: 99 },
        { id: "c", head: 100 },
        { id: "d", head: 100, open: true },
      ]),
    );
    for (let i = 0; i < 20; i++) assert.equal(s.choose(new Slot(), Date.now(), Math.random)?.id, "c");
  });

  it("ranks a node whose socket failed recently after the others, until the failure is old", () => {
    const s = slots(target([{ id: "a" }, { id: "b" }]));
    const now = 1_000_000;
    s.failed("a", now);
    for (let i = 0; i < 20; i++) assert.equal(s.choose(new Slot(), now + 1_000, Math.random)?.id, "b");
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) seen.add(s.choose(new Slot(), now + 10_001, Math.random)!.id);
    assert.deepEqual([...seen].sort(), ["a", "b"]);
  });

  it("draws among equals by weight", () => {
    const s = slots(
      target([
        { id: "a", weight: 1 },
        { id: "b", weight: 3 },
      ]),
    );
    assert.equal(s.choose(new Slot(), 0, () => 0.2)?.id, "a");
    assert.equal(s.choose(new Slot(), 0, () => 0.3)?.id, "b");
  });

  it("has no node to pick and no socket to wait for without WebSocket URLs", async () => {
    const s = slots(target([{ id: "a", ws: false }]));
    assert.equal(s.choose(new Slot()), undefined);
    assert.equal(s.upstreamSubscriptions(), 0);
    s.close();
  });
});
