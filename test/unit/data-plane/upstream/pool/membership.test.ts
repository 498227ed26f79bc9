import assert from "node:assert/strict";
import { PoolMembership } from "../../../../../data-plane/src/upstream/pool/membership";
import type { Upstream } from "../../../../../data-plane/src/upstream/upstream";
import { fakeUpstream, record, UPSTREAM_OPTS, Wire } from "./fakes";

function membership() {
  const wire = new Wire();
  const closed: string[] = [];
  const created: string[] = [];
  const m = new PoolMembership(UPSTREAM_OPTS, { breakerOpened() {}, backedOff() {} }, (r) => {
    created.push(r.id);
    const u = fakeUpstream(wire, r);
    Object.assign(u, { close: async () => void closed.push(r.id) });
    return u;
  });
  return { m, closed, created };
}

describe("upstream pool: membership", () => {
  it("keeps an unchanged node (and its health), replaces one whose URL changed, closes a removed one", () => {
    const { m, closed, created } = membership();
    assert.equal(m.update(record([{}, {}, {}])), true, "first record: nodes added");
    const [u0, u1] = m.upstreams as [Upstream, Upstream, Upstream];
    u0.head = 42;
    const added = m.update(record([{ weight: 5 }, { httpUrl: "http://127.0.0.1:9/moved" }]));
    assert.equal(added, true, "u1 is a new node at its new URL");
    assert.equal(m.upstreams[0], u0, "u0 kept");
    assert.equal(m.upstreams[0]!.head, 42, "with its head");
    assert.equal(m.upstreams[0]!.weight, 5, "and its new weight");
    assert.notEqual(m.upstreams[1], u1);
    assert.deepEqual(created, ["u0", "u1", "u2", "u1"]);
    assert.deepEqual(closed.sort(), ["u1", "u2"]);
  });

  it("says no node was added when a record only changes weights", () => {
    const { m } = membership();
    m.update(record([{}, {}]));
    assert.equal(m.update(record([{ weight: 3 }, {}])), false);
  });

  it("finds nodes by id and knows its members, and declares the families any node serves", () => {
    const { m } = membership();
    m.update(record([{ methodFamilies: ["debug"] }, {}] as never));
    assert.equal(m.byId("u1")?.id, "u1");
    assert.equal(m.byId("nope"), undefined);
    const u0 = m.upstreams[0]!;
    assert.equal(m.has(u0), true);
    assert.notEqual(m.familiesDeclared, 0);
    m.update(record([{}, {}]));
    assert.equal(m.familiesDeclared, 0, "no node declares a family any more");
  });

  it("closes every node on close and is empty after", async () => {
    const { m, closed } = membership();
    m.update(record([{}, {}]));
    await m.close();
    assert.deepEqual(closed.sort(), ["u0", "u1"]);
    assert.equal(m.upstreams.length, 0);
  });
});
