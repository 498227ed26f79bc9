import assert from "node:assert/strict";
import type { RedisClient } from "../../../../shared/src/redis/connect";
import { SlotTransactions } from "../../../../shared/src/redis/slot-transactions";
import { keySlot } from "../../../../shared/src/redis/slots";

type Cmd = [name: string, ...args: string[]];

/** A client that records each MULTI it is asked to run (and when, relative to the others). */
class FakeClient {
  readonly transactions: { cmds: Cmd[]; startedAt: number; doneAt: number }[] = [];
  private tick = 0;
  failOn: string | undefined;

  constructor(readonly isCluster: boolean) {}

  multi() {
    const cmds: Cmd[] = [];
    const add = (...cmd: Cmd) => {
      cmds.push(cmd);
      return chain;
    };
    const chain = {
      set: (k: string, v: string) => add("set", k, v),
      del: (k: string) => add("del", k),
      publish: (c: string, m: string) => add("publish", c, m),
      exec: async () => {
        const rec = { cmds, startedAt: this.tick++, doneAt: -1 };
        this.transactions.push(rec);
        await new Promise((r) => setImmediate(r));
        rec.doneAt = this.tick++;
        return cmds.map((c) => [c[1] === this.failOn ? new Error(`ERR on ${c[1]}`) : null, "OK"]);
      },
    };
    return chain;
  }
}

function build(client: FakeClient): SlotTransactions {
  const tx = new SlotTransactions(client as unknown as RedisClient);
  for (let i = 0; i < 40; i++) tx.write(`k:${i}`, (m) => m.set(`k:${i}`, String(i)));
  tx.write("{t}:a", (m) => m.set("{t}:a", "1"));
  tx.write("{t}:b", (m) => m.del("{t}:b"));
  tx.last("marker", (m) => m.set("marker", "now"));
  tx.publish("events", "e1").publish("events", "e2");
  return tx;
}

describe("shared/redis: SlotTransactions", () => {
  it("single Redis: one MULTI, writes in order, then the last steps, then the PUBLISHes", async () => {
    const c = new FakeClient(false);
    await build(c).exec();
    assert.equal(c.transactions.length, 1);
    const cmds = c.transactions[0]!.cmds;
    assert.equal(cmds.length, 45);
    assert.deepEqual(cmds[0], ["set", "k:0", "0"]);
    assert.deepEqual(cmds.slice(-3), [
      ["set", "marker", "now"],
      ["publish", "events", "e1"],
      ["publish", "events", "e2"],
    ]);
  });

  it("cluster: one MULTI per slot; the last steps after every write, the PUBLISHes after those", async () => {
    const c = new FakeClient(true);
    await build(c).exec();
    const keyed = c.transactions.filter((t) => t.cmds[0]![0] !== "publish");
    for (const t of keyed) {
      const slots = new Set(t.cmds.map((cmd) => keySlot(cmd[1]!)));
      assert.equal(slots.size, 1, `a MULTI across slots: ${JSON.stringify(t.cmds)}`);
    }
    const tagged = keyed.find((t) => t.cmds.some((cmd) => cmd[1] === "{t}:a"))!;
    assert.deepEqual(tagged.cmds, [
      ["set", "{t}:a", "1"],
      ["del", "{t}:b"],
    ]);
    const writes = keyed.filter((t) => !t.cmds.some((cmd) => cmd[1] === "marker"));
    const marker = keyed.find((t) => t.cmds.some((cmd) => cmd[1] === "marker"))!;
    const pub = c.transactions.find((t) => t.cmds[0]![0] === "publish")!;
    assert.equal(
      writes.reduce((n, t) => n + t.cmds.length, 0),
      42,
      "every write sent once",
    );
    assert.ok(writes.length > 1, "the writes were spread over several slots");
    for (const w of writes) assert.ok(w.doneAt < marker.startedAt, "the marker waited for every write");
    assert.ok(marker.doneAt < pub.startedAt, "the PUBLISHes waited for the marker");
    assert.deepEqual(pub.cmds, [
      ["publish", "events", "e1"],
      ["publish", "events", "e2"],
    ]);
  });

  it("a command error rejects exec (and on a cluster nothing is published)", async () => {
    for (const isCluster of [false, true]) {
      const c = new FakeClient(isCluster);
      c.failOn = "k:3";
      await assert.rejects(build(c).exec(), /ERR on k:3/);
      if (isCluster) assert.ok(!c.transactions.some((t) => t.cmds[0]![0] === "publish"));
    }
  });

  it("nothing to do: no transaction", async () => {
    const c = new FakeClient(true);
    await new SlotTransactions(c as unknown as RedisClient).exec();
    assert.equal(c.transactions.length, 0);
  });
});
