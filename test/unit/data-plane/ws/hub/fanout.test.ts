import assert from "node:assert/strict";
import { Fanout, headAdvances } from "../../../../../data-plane/src/ws/hub/fanout";
import { SubscriptionRegistry } from "../../../../../data-plane/src/ws/hub/registry";
import { entry, RecordingSink, session, upSub } from "./fakes";

const head = (n: number, hash = `0x${n}`) => ({ number: `0x${n.toString(16)}`, hash });

describe("ws hub: fan-out", () => {
  it("passes a higher head or a reorg at the top, drops a lower or repeated one", () => {
    const s = { headNumber: -1, headId: "" };
    assert.equal(headAdvances(s, head(10), ""), true);
    assert.equal(headAdvances(s, head(10), ""), false, "the same head again");
    assert.equal(headAdvances(s, head(9), ""), false, "below");
    assert.equal(headAdvances(s, head(10, "0xother"), ""), true, "a reorg at the top");
    assert.equal(headAdvances(s, { number: "nope" }, ""), true, "not a head this check reads");
  });

  it("publishes one message per key to the joined clients and frames the others one by one", () => {
    const sink = new RecordingSink();
    const reg = new SubscriptionRegistry(sink);
    const fan = new Fanout(sink, 10, () => assert.fail("not an extrinsic"));
    const sub = upSub();
    const a = session("t1", "k1");
    const b = session("t1", "k1");
    const c = session("t2", "k2");
    const shared = reg.sharedIdOf(sub, a, true);
    for (const s of [a, b]) {
      const e = entry(s, shared, true);
      reg.addClient(sub, e);
      reg.join(sub, e);
    }
    const own = entry(c, "0xc", false);
    reg.addClient(sub, own);
    fan.fanout(sub, { subscription: "up1", method: "eth_subscription", result: head(5) });
    assert.deepEqual(sink.of("publish:"), [
      `publish:${sub.topic}:${shared}:{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${shared}","result":{"number":"0x5","hash":"0x5"}}}`,
    ]);
    assert.deepEqual(
      sink.of("delivered:"),
      ["delivered:t1:eth_subscription:2"],
      "usage counted per key, in bulk",
    );
    assert.deepEqual(sink.of("deliver:"), [
      'deliver:t2:eth_subscription:{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0xc","result":{"number":"0x5","hash":"0x5"}}}',
    ]);
    assert.equal(fan.delivered, 3);
    fan.fanout(sub, { subscription: "up1", method: "eth_subscription", result: head(4) });
    assert.equal(fan.headsDropped, 1);
    assert.equal(sink.of("publish:").length, 1, "a head below the highest sent goes to nobody");
  });

  it("queues notifications for a client not answered yet, up to the limit", () => {
    const sink = new RecordingSink();
    const reg = new SubscriptionRegistry(sink);
    const fan = new Fanout(sink, 2, () => undefined);
    const sub = upSub(["logs", {}]);
    const e = entry(session("t1"), "0x1", false, false);
    reg.addClient(sub, e);
    for (let i = 0; i < 3; i++)
      fan.fanout(sub, { subscription: "up", method: "eth_subscription", result: { i } });
    assert.equal(e.queue?.length, 2);
    assert.deepEqual(sink.of("deliver:"), []);
  });

  it("ends an extrinsic watch at its final status", () => {
    const sink = new RecordingSink();
    const reg = new SubscriptionRegistry(sink);
    const ended: string[] = [];
    const fan = new Fanout(sink, 10, (s) => ended.push(s.key));
    const sub = upSub(["0xdead"], { family: "extrinsic", merged: false, replayLast: false, evm: false });
    reg.addClient(sub, entry(session("t1"), "x1", false));
    fan.fanout(sub, { subscription: "up", method: "author_extrinsicUpdate", result: "ready" });
    assert.deepEqual(ended, []);
    fan.fanout(sub, { subscription: "up", method: "author_extrinsicUpdate", result: { finalized: "0xabc" } });
    assert.deepEqual(ended, [sub.key]);
  });
});
