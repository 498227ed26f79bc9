import assert from "node:assert/strict";
import { evmNetwork } from "../../../helpers/seed-redis";
import { type Gateway, startGateway } from "../harness";
import { TestWsClient } from "../ws/ws-client";
import { batchOf, FakeClock, inSecond, LIMITS_ENV, RecordingUpstream, UsageReader } from "./fixtures";

const WS = "ws-ws-limits";

describe("data plane limits over WebSocket (the request pipeline's admission): same rules per message", function () {
  this.timeout(30_000);
  let up: RecordingUpstream;
  let gw: Gateway;
  let usage: UsageReader;
  let client: TestWsClient | undefined;
  const clock = new FakeClock(0);
  let key = "";

  beforeEach(async () => {
    clock.t = inSecond(100);
    up = await new RecordingUpstream().start();
    gw = await startGateway(
      LIMITS_ENV,
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
        key = await s.putKey({
          workspaceId: WS,
          plan: { name: "t", requestsPerSecond: 50, dailyRequestLimit: 70, monthlyRequestLimit: null },
        });
      },
      { clock },
    );
    usage = new UsageReader(gw.ns.prefix);
  });

  afterEach(async () => {
    client?.terminate();
    client = undefined;
    await gw.stop();
    await usage.close();
    await up.stop();
  });

  it("refuses a message over the per-second limit whole (every element -32005 rate_limit), then the daily limit", async () => {
    client = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`);
    const c = client;
    c.sendRaw(JSON.stringify(batchOf(30, "lim_ws", 1)));
    c.sendRaw(JSON.stringify(batchOf(30, "lim_ws", 100)));
    await c.until(() => c.messages.length >= 2, 5000, "two batch answers");
    // biome-ignore lint/suspicious/noExplicitAny: test convenience
    const batches = c.messages as any[][];
    // The refusal is sent at once; the served batch after its upstream round trip.
    const served = batches.find((b) => b[0].result !== undefined);
    const refused = batches.find((b) => b[0].error !== undefined);
    assert.equal(served!.length, 30);
    assert.ok(served!.every((m) => m.result === "0x1"));
    assert.equal(refused!.length, 30);
    for (const m of refused!) {
      assert.equal(m.error.code, -32005);
      assert.equal(m.error.data.reason, "rate_limit");
      assert.equal(m.error.data.retryAfterMs, 900);
      assert.equal(m.error.data.limit, 50);
    }
    assert.equal(up.count("lim_ws"), 30, "the refused batch was not forwarded");
    // A single over the limit in the same second.
    for (let i = 0; i < 20; i++) assert.ok((await c.call("lim_ws")).result);
    const over = await c.call("lim_ws");
    assert.equal(over.error.data.reason, "rate_limit");
    // Next second: the daily limit (70) is what stops it.
    clock.advance(1000);
    for (let i = 0; i < 20; i++) assert.ok((await c.call("lim_ws")).result);
    const daily = await c.call("lim_ws");
    assert.equal(daily.error.code, -32005);
    assert.equal(daily.error.data.reason, "daily_limit");
    assert.equal(await usage.waitFor(WS, 70, clock.now()), 70);
    assert.ok(c.closeCode === undefined, "the socket stays open");
  });
});
