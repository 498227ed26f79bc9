import assert from "node:assert/strict";
import { SubscriptionRegistry } from "../../../../../data-plane/src/ws/hub/registry";
import { entry, RecordingSink, session, upSub } from "./fakes";

describe("ws hub: subscription registry", () => {
  it("counts a tenant's distinct subscriptions once however many of its clients share one", () => {
    const reg = new SubscriptionRegistry(new RecordingSink());
    const a = upSub(["newHeads"]);
    const b = upSub(["logs", {}]);
    const s1 = session("t1", "k1");
    const s2 = session("t1", "k1");
    reg.sharedIdOf(a, s1, true);
    const e1 = entry(s1, a.shares.get("k1")!.id, true);
    reg.addClient(a, e1);
    const e2 = entry(s2, "0xother", false);
    reg.addClient(a, e2);
    assert.equal(reg.tenantSubscriptions("t1"), 1, "two clients, one subscription");
    reg.addClient(b, entry(s1, "0xb", false));
    assert.equal(reg.tenantSubscriptions("t1"), 2);
    assert.equal(reg.removeClient(a, e1), true);
    assert.equal(reg.removeClient(a, e1), false, "already gone");
    assert.equal(reg.tenantSubscriptions("t1"), 2, "e2 still holds a share of a");
    reg.removeClient(a, e2);
    assert.equal(reg.tenantSubscriptions("t1"), 1);
    assert.equal(reg.tenantCount(), 1);
  });

  it("gives the clients of one key one shared id, another key its own, and frees it with its last holder", () => {
    const reg = new SubscriptionRegistry(new RecordingSink());
    const a = upSub();
    const k1a = session("t1", "k1");
    const k1b = session("t1", "k1");
    const k2 = session("t2", "k2");
    const id1 = reg.sharedIdOf(a, k1a, true);
    const e1 = entry(k1a, id1, true);
    reg.addClient(a, e1);
    assert.equal(reg.sharedIdOf(a, k1b, true), id1);
    const e2 = entry(k1b, id1, true);
    reg.addClient(a, e2);
    const id2 = reg.sharedIdOf(a, k2, true);
    assert.notEqual(id2, id1, "an id never tells a tenant that another subscribed to the same thing");
    assert.equal(a.shares.get("k1")!.holders, 2);
    reg.removeClient(a, e1);
    reg.removeClient(a, e2);
    assert.equal(a.shares.has("k1"), false);
  });

  it("moves a joined client from direct framing to its key's topic, and leaves the topic when removed", () => {
    const sink = new RecordingSink();
    const reg = new SubscriptionRegistry(sink);
    const a = upSub();
    const s = session("t1", "k1");
    const e = entry(s, reg.sharedIdOf(a, s, true), true);
    reg.addClient(a, e);
    assert.equal(a.direct.has(e), true);
    reg.join(a, e);
    assert.equal(a.direct.has(e), false);
    assert.equal(a.joined, 1);
    assert.equal(a.groups.get("k1")?.has(e), true);
    reg.removeClient(a, e);
    assert.equal(a.joined, 0);
    assert.deepEqual(sink.of("leave:"), [`leave:t1:${a.topic}:${e.id}`]);
  });

  it("drops every client of a subscription and their sessions forget it", () => {
    const reg = new SubscriptionRegistry(new RecordingSink());
    const a = upSub();
    const s = session("t1");
    const e = entry(s, "0x1", false);
    s.subs.set("0x1", { family: "eth", unsubscribe() {} });
    reg.addClient(a, e);
    const dropped: string[] = [];
    reg.dropClients(a, (c) => dropped.push(c.id));
    assert.deepEqual(dropped, ["0x1"]);
    assert.equal(s.subs.size, 0);
    assert.equal(reg.clientSubscriptions(), 0);
    assert.equal(reg.tenantCount(), 0);
  });
});
