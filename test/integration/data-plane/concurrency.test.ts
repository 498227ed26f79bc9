import assert from "node:assert/strict";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { eventually } from "../../helpers/eventually";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";
import { TestWsClient } from "./ws/ws-client";

const CAP = 5;
/**
 * How long the stub holds a slow call. Tests wait (poll) until the calls they started are in flight and
 * then act: this must outlast a loaded machine's event-loop stalls between those steps, with margin.
 */
const SLOW_MS = 2_000;

const until = (cond: () => boolean, what: string) => eventually(cond, what);
const getLogs = (id: number) => ({
  jsonrpc: "2.0",
  id,
  method: "eth_getLogs",
  params: [{ fromBlock: "0x1", toBlock: "0x2" }],
});

function tally(
  rs: { status: number; json: { error?: { data?: { reason?: string } } } }[],
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rs) {
    const k = `${r.status} ${r.json?.error?.data?.reason ?? "ok"}`;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/** MAX_IN_FLIGHT_PER_KEY: upstream calls in flight per app key (or public client IP), HTTP and WS together. */
describe("data plane: per-key cap on upstream calls in flight", function () {
  this.timeout(60_000);
  let up: StubUpstream;
  let gw: Gateway;
  let keyA: string;
  let keyB: string;
  let urlA: string;
  let urlB: string;
  const flightsA = () => gw.plane.context.flights.inFlight("app:app-a");

  before(async () => {
    up = await new StubUpstream().start();
    up.methodDelayMs.set("eth_getLogs", SLOW_MS);
    gw = await startGateway(
      { CACHE_MAX_BYTES: "0", UPSTREAM_TIMEOUT_MS: "5000", MAX_IN_FLIGHT_PER_KEY: String(CAP) },
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "a", httpUrl: up.url }]));
        keyA = await s.putKey({ appId: "app-a", workspaceId: "ws-a" });
        keyB = await s.putKey({ appId: "app-b", workspaceId: "ws-b" });
      },
    );
    urlA = `${gw.base}/eth/rpc?apikey=${keyA}`;
    urlB = `${gw.base}/eth/rpc?apikey=${keyB}`;
  });

  after(async () => {
    await gw?.stop();
    await up?.stop();
  });

  afterEach(async () => {
    // Every test leaves the counters at zero once the upstream calls are over.
    await eventually(
      () => gw.plane.context.flights.size === 0,
      "every slot released (none leaked)",
      SLOW_MS + 10_000,
    );
  });

  it("HTTP: beyond the cap a key gets 429 concurrency_limit; another key is not affected", async () => {
    const [rsA, rsB] = await Promise.all([
      Promise.all(Array.from({ length: CAP + 3 }, (_, i) => post(urlA, getLogs(i)))),
      Promise.all(Array.from({ length: CAP }, (_, i) => post(urlB, getLogs(i)))),
    ]);
    assert.deepEqual(tally(rsA), { "200 ok": CAP, [`429 ${GatewayError.ConcurrencyLimit.reason}`]: 3 });
    assert.deepEqual(tally(rsB), { "200 ok": CAP });
    const refused = rsA.find((r) => r.status === 429)!;
    assert.equal(refused.json.error.code, -32005);
    assert.equal(refused.json.error.data.category, "Too Many Requests");
    assert.equal(refused.json.error.data.limit, CAP);
    assert.equal(refused.json.error.data.retryAfterMs, 1000);
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.equal(typeof refused.json.id, "number", "the single request's id is echoed");
    const metrics = await (await fetch(`${gw.metricsBase}/metrics`)).text();
    assert.match(metrics, /rpcgw_limit_refusals_total\{endpoint="app",reason="concurrency_limit"\} 3/);
  });

  it("HTTP batches hold one slot per upstream exchange; over the cap a batch is refused whole", async () => {
    const held = Promise.all(Array.from({ length: 3 }, (_, i) => post(urlA, getLogs(i))));
    await until(() => flightsA() === 3, "3 calls in flight");
    // One upstream: a batch goes in one exchange and holds one slot, whatever its size.
    const batches = Promise.all([
      post(urlA, [getLogs(10), getLogs(11), getLogs(12)]),
      post(urlA, [getLogs(13), getLogs(14)]),
    ]);
    await until(() => flightsA() === CAP, "3 calls and 2 batches in flight: the cap");
    const over = await post(urlA, [getLogs(20), getLogs(21)]);
    assert.equal(over.status, 429, over.text);
    assert.equal(over.json.id, null);
    assert.equal(over.json.error.data.reason, GatewayError.ConcurrencyLimit.reason);
    const single = await post(urlA, getLogs(22));
    assert.equal(single.status, 429, "separate calls are still refused past the cap");
    for (const b of await batches) assert.equal(b.status, 200, b.text);
    assert.deepEqual(tally(await held), { "200 ok": 3 });
    // With nothing in flight, a batch larger than the cap goes through, holding one slot.
    const big = post(
      urlA,
      Array.from({ length: CAP + 2 }, (_, i) => getLogs(30 + i)),
    );
    await until(() => flightsA() === 1, "the big batch holds one slot");
    assert.equal((await big).status, 200);
  });

  it("WebSocket shares the key's budget with HTTP; refusals are per-element error objects", async () => {
    const ws = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${keyA}`);
    try {
      const http = Promise.all(Array.from({ length: 3 }, (_, i) => post(urlA, getLogs(i))));
      await until(() => flightsA() === 3, "3 calls in flight");
      const answers = await Promise.all(
        Array.from({ length: 4 }, () => ws.call("eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x2" }])),
      );
      const refused = answers.filter((m) => m.error?.data?.reason === GatewayError.ConcurrencyLimit.reason);
      assert.equal(refused.length, 2, JSON.stringify(answers));
      assert.equal(refused[0].error.code, -32005);
      assert.equal(refused[0].error.data.limit, CAP);
      assert.equal(answers.filter((m) => m.result !== undefined).length, 2);
      assert.deepEqual(tally(await http), { "200 ok": 3 });
      // A WS batch with no slot left: its forwarded elements are refused, the socket stays open.
      const held = Promise.all(Array.from({ length: CAP }, (_, i) => post(urlA, getLogs(i))));
      await until(() => flightsA() === CAP, "CAP calls in flight");
      ws.sendRaw(JSON.stringify([{ ...getLogs(900) }, { jsonrpc: "2.0", id: 901, method: "eth_chainId" }]));
      await ws.until(() => ws.messages.some((m) => Array.isArray(m)), 5_000, "batch answer");
      const batch = ws.messages.find((m) => Array.isArray(m)) as {
        id: number;
        error?: { data: { reason: string } };
      }[];
      const reasons = batch.map((m) => m.error?.data.reason ?? "ok");
      assert.ok(reasons.includes(GatewayError.ConcurrencyLimit.reason), JSON.stringify(batch));
      await held;
      const again = await ws.call("eth_chainId", []);
      assert.equal(again.result, "0x7a69");
    } finally {
      ws.close();
    }
  });

  it("aborted clients: slots are held while their upstream calls run, then all return to 0", async () => {
    const controllers = Array.from({ length: CAP }, () => new AbortController());
    const pending = controllers.map((c, i) =>
      fetch(urlA, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(getLogs(i)),
        signal: c.signal,
      }).catch((e: Error) => e.name),
    );
    await until(() => flightsA() === CAP, "CAP calls in flight");
    for (const c of controllers) c.abort();
    assert.deepEqual(await Promise.all(pending), Array(CAP).fill("AbortError"));
    // The node is still working on them: the key cannot pile more on by aborting and resending.
    const r = await post(urlA, getLogs(99));
    assert.equal(r.status, 429, r.text);
    // A WS client that disappears mid-call releases too.
    const ws = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${keyB}`);
    for (let i = 0; i < 3; i++) ws.sendRaw(JSON.stringify(getLogs(i)));
    await until(() => gw.plane.context.flights.inFlight("app:app-b") === 3, "3 WS calls in flight");
    ws.terminate();
    await eventually(() => gw.plane.context.flights.size === 0, "the slots released", SLOW_MS + 10_000);
    assert.equal(flightsA(), 0);
    assert.equal(gw.plane.context.flights.inFlight("app:app-b"), 0);
    const after = await Promise.all(Array.from({ length: CAP }, (_, i) => post(urlA, getLogs(i))));
    assert.deepEqual(tally(after), { "200 ok": CAP });
    assert.ok((await fetch(`${gw.base}/healthz`)).ok);
  });

  it("the public endpoint is capped per client IP", async () => {
    const rs = await Promise.all(
      Array.from({ length: CAP + 2 }, (_, i) => post(`${gw.base}/eth/public`, getLogs(i))),
    );
    assert.deepEqual(tally(rs), { "200 ok": CAP, [`429 ${GatewayError.ConcurrencyLimit.reason}`]: 2 });
  });
});

describe("data plane: per-key cap on heavy calls in flight (MAX_HEAVY_IN_FLIGHT_PER_KEY)", function () {
  this.timeout(60_000);
  let up: StubUpstream;
  let gw: Gateway;
  let url: string;
  let wsUrl: string;

  before(async () => {
    up = await new StubUpstream().start();
    up.methodDelayMs.set("eth_getLogs", SLOW_MS);
    up.methodDelayMs.set("eth_call", SLOW_MS);
    let key = "";
    gw = await startGateway(
      {
        CACHE_MAX_BYTES: "0",
        UPSTREAM_TIMEOUT_MS: "5000",
        MAX_IN_FLIGHT_PER_KEY: "10",
        MAX_HEAVY_IN_FLIGHT_PER_KEY: "2",
      },
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "a", httpUrl: up.url }]));
        key = await s.putKey({ appId: "app-h" });
      },
    );
    url = `${gw.base}/eth/rpc?apikey=${key}`;
    wsUrl = `ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`;
  });

  after(async () => {
    await gw?.stop();
    await up?.stop();
  });

  it("refuses heavy calls beyond their cap (429, data.limit = the heavy cap) while light calls pass, over HTTP and WS", async () => {
    const ethCall = (id: number) => ({
      jsonrpc: "2.0",
      id,
      method: "eth_call",
      params: [{ to: "0x00" }, "latest"],
    });
    const ws = await TestWsClient.open(wsUrl);
    const heavyNow = () => gw.plane.context.flights.heavyInFlight("app:app-h");
    try {
      const [heavy, light, wsAnswer] = await Promise.all([
        Promise.all(Array.from({ length: 4 }, (_, i) => post(url, getLogs(i)))),
        Promise.all(Array.from({ length: 3 }, (_, i) => post(url, ethCall(i)))),
        until(() => heavyNow() === 2, "2 heavy calls in flight").then(() =>
          ws.call("eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x2" }]),
        ),
      ]);
      assert.deepEqual(tally(heavy), { "200 ok": 2, [`429 ${GatewayError.ConcurrencyLimit.reason}`]: 2 });
      assert.deepEqual(tally(light), { "200 ok": 3 });
      const refused = heavy.find((r) => r.status === 429)!;
      assert.equal(refused.json.error.data.limit, 2);
      assert.match(refused.json.error.message, /heavy calls/);
      assert.equal(
        wsAnswer.error?.data?.reason,
        GatewayError.ConcurrencyLimit.reason,
        JSON.stringify(wsAnswer),
      );
      assert.equal(wsAnswer.error.data.limit, 2);
      // A batch with two heavy calls (the cap) while none are in flight passes; the counters return to zero.
      await until(() => heavyNow() === 0, "heavy calls over");
      const batch = await post(url, [getLogs(1), getLogs(2), ethCall(3)]);
      assert.equal(batch.status, 200, batch.text);
      assert.equal(batch.json.length, 3);
      assert.equal(gw.plane.context.flights.size, 0);
    } finally {
      ws.close();
    }
  });

  // Review of issue 13: an idle key's single batch used to pass whatever its number of heavy calls.
  it("one request with more heavy calls than the cap is refused even from an idle key (HTTP and WS): nothing forwarded, split message", async () => {
    const before = up.count("eth_getLogs");
    const batch = await post(url, [
      getLogs(1),
      getLogs(2),
      getLogs(3),
      { jsonrpc: "2.0", id: 4, method: "eth_chainId" },
    ]);
    assert.equal(batch.status, 429, batch.text);
    assert.equal(batch.json.error.data.reason, GatewayError.ConcurrencyLimit.reason);
    assert.equal(batch.json.error.data.limit, 2);
    assert.match(batch.json.error.message, /carries 3 heavy calls.*at most 2 .*split it/);
    const ws = await TestWsClient.open(wsUrl);
    try {
      // A WS batch is forwarded as one upstream batch (eth_getLogs elements are range-checked one by one
      // instead, each holding its own slot, so they meet the OverHeavy rule: see the test above).
      const keys = (id: number) => ({ jsonrpc: "2.0", id, method: "state_getKeys", params: ["0x00"] });
      ws.sendRaw(JSON.stringify([keys(901), keys(902), keys(903)]));
      await ws.until(() => ws.messages.some((m) => Array.isArray(m)), 5_000, "batch answer");
      const answers = ws.messages.find((m) => Array.isArray(m)) as {
        error?: { message: string; data: { reason: string; limit: number } };
      }[];
      assert.equal(answers.length, 3);
      for (const a of answers) {
        assert.equal(a.error?.data.reason, GatewayError.ConcurrencyLimit.reason, JSON.stringify(a));
        assert.equal(a.error?.data.limit, 2);
        assert.match(a.error!.message, /carries 3 heavy calls.*split it/);
      }
      assert.equal(up.count("state_getKeys"), 0, "nothing reached the node");
      assert.equal((await ws.call("eth_chainId", [])).result, "0x7a69", "the socket stays open");
    } finally {
      ws.close();
    }
    assert.equal(up.count("eth_getLogs"), before, "nothing reached the node");
    // A split request (2 heavy calls) passes.
    const split = await post(url, [getLogs(1), getLogs(2)]);
    assert.equal(split.status, 200, split.text);
    assert.equal(gw.plane.context.flights.size, 0);
  });
});
