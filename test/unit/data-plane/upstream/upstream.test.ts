import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { isHeavy } from "../../../../data-plane/src/upstream/network-pool";
import {
  type BreakerCause,
  type ExchangeControl,
  ExchangeKind,
  type ReplyBody,
  retryAfterMs,
  Upstream,
} from "../../../../data-plane/src/upstream/upstream";
import { eventually } from "../../../helpers/eventually";

/** An Upstream whose outcomes are fed by hand (settle), never connected. */
function upstream(threshold = 3) {
  const opened: BreakerCause[] = [];
  const backoffs: number[] = [];
  const u = new Upstream(
    { id: "u", httpUrl: "http://127.0.0.1:9", wsUrl: null, weight: 1 },
    {
      timeoutMs: 1000,
      connections: 1,
      breakerThreshold: threshold,
      breakerCooldownMs: 60_000,
      backoffDefaultMs: 500,
      backoffMaxMs: 5_000,
    },
    { breakerOpened: (_u, c) => opened.push(c), backedOff: (_u, ms) => backoffs.push(ms) },
  );
  const feed = (kind: ExchangeKind, failure: Parameters<Upstream["settle"]>[3], n = 1) => {
    for (let i = 0; i < n; i++) {
      u.inFlight++;
      u.settle(1, false, kind, failure);
    }
  };
  return { u, opened, backoffs, feed };
}

describe("data plane: upstream breaker verdicts by failure kind", () => {
  it("client-call timeouts (light or heavy) never open the breaker; they only steer selection", () => {
    const { u, opened, feed } = upstream();
    feed(ExchangeKind.Heavy, "timeout", 50);
    feed(ExchangeKind.Light, "timeout", 50);
    assert.equal(u.breakerOpen, false);
    assert.equal(u.consecutiveFailures, 0);
    assert.ok(u.errorRateEwma > 0.9, "the error EWMA still records them");
    assert.deepEqual(opened, []);
    void u.close();
  });

  it("connection errors, 5xx / invalid answers and failed health probes open it, counted by cause", () => {
    for (const [kind, failure, cause] of [
      [ExchangeKind.Light, "unreachable", "unreachable"],
      [ExchangeKind.Heavy, "bad", "bad_response"],
      [ExchangeKind.Probe, "timeout", "health_probe"],
      [ExchangeKind.Probe, "unreachable", "health_probe"],
    ] as const) {
      const { u, opened, feed } = upstream();
      feed(kind, failure, 2);
      assert.equal(u.breakerOpen, false, `${failure}: not before the threshold`);
      feed(kind, failure, 1);
      assert.equal(u.breakerOpen, true, failure);
      assert.equal(u.available(Date.now()), false);
      feed(kind, failure, 3);
      assert.deepEqual(opened, [cause], "one opening, however many failures follow");
      void u.close();
    }
  });

  it("a neutral outcome neither counts nor resets; a success resets", () => {
    const { u, feed } = upstream();
    feed(ExchangeKind.Light, "unreachable", 2);
    feed(ExchangeKind.Light, "timeout", 5);
    feed(ExchangeKind.Light, "rate_limited", 5);
    assert.equal(u.consecutiveFailures, 2);
    feed(ExchangeKind.Light, undefined);
    assert.equal(u.consecutiveFailures, 0);
    void u.close();
  });

  it("chain-watch polls are no verdict: failures neither count nor move the EWMAs, successes reset nothing", () => {
    const { u, opened, feed } = upstream();
    feed(ExchangeKind.Poll, "bad", 10);
    feed(ExchangeKind.Poll, "timeout", 10);
    feed(ExchangeKind.Poll, "unreachable", 10);
    assert.equal(u.breakerOpen, false);
    assert.equal(u.consecutiveFailures, 0);
    assert.equal(u.errorRateEwma, 0);
    assert.equal(u.latencyEwmaMs, 0);
    feed(ExchangeKind.Light, "unreachable", 2);
    feed(ExchangeKind.Poll, undefined, 5);
    assert.equal(u.consecutiveFailures, 2, "a poll success does not reset the count");
    assert.equal(u.inFlight, 0);
    assert.deepEqual(opened, []);
    void u.close();
  });

  it("a 429 backs the node off (Retry-After, else the default, capped) without a breaker count", () => {
    const { u, backoffs, opened, feed } = upstream(1);
    u.backOff(undefined);
    feed(ExchangeKind.Light, "rate_limited");
    const now = Date.now();
    assert.equal(u.available(now), false);
    assert.equal(u.backedOff(now), true);
    assert.equal(u.available(now + 600), true, "the default 500 ms back-off is over");
    u.backOff(60_000);
    assert.equal(u.available(Date.now() + 4_900), false);
    assert.equal(u.available(Date.now() + 5_100), true, "capped at backoffMaxMs");
    assert.deepEqual(backoffs, [500, 5_000]);
    assert.equal(u.breakerOpen, false);
    assert.deepEqual(opened, []);
    void u.close();
  });

  it("a health probe answered with HTTP 429 is a back-off too, never a breaker count", () => {
    const { u, opened, feed } = upstream(1);
    feed(ExchangeKind.Probe, "rate_limited", 3);
    assert.equal(u.breakerOpen, false);
    assert.equal(u.consecutiveFailures, 0);
    assert.deepEqual(opened, []);
    feed(ExchangeKind.Probe, "timeout");
    assert.deepEqual(opened, ["health_probe"], "a probe that gets no answer still counts");
    void u.close();
  });

  it("parses Retry-After as seconds or an HTTP date", () => {
    assert.equal(retryAfterMs("2"), 2_000);
    assert.equal(retryAfterMs(["1.5"]), 1_500);
    assert.equal(retryAfterMs(undefined), undefined);
    assert.equal(retryAfterMs("soon"), undefined);
    const now = Date.parse("2026-01-01T00:00:00Z");
    assert.equal(retryAfterMs("Thu, 01 Jan 2026 00:00:03 GMT", now), 3_000);
    assert.equal(retryAfterMs("Wed, 31 Dec 2025 00:00:00 GMT", now), 0);
  });

  it("names heavy calls: getLogs, traces, debug, big state reads; not ordinary reads", () => {
    for (const m of [
      "eth_getLogs",
      "eth_getFilterLogs",
      "debug_traceTransaction",
      "trace_block",
      "state_getKeysPaged",
      "state_queryStorage",
    ]) {
      assert.ok(isHeavy(m), m);
    }
    for (const m of [
      "eth_call",
      "eth_blockNumber",
      "eth_getBalance",
      "state_getStorage",
      "chain_getHeader",
    ]) {
      assert.ok(!isHeavy(m), m);
    }
  });
});

describe("data plane: cancelling an upstream exchange (a hedged read's loser)", function () {
  this.timeout(20_000);
  let server: Server;
  let url = "";
  /** Requests received, answered, and whose connection closed before they were answered. */
  let received = 0;
  let answeredCount = 0;
  let closedUnanswered = 0;
  /** How long the server waits before answering. */
  let delayMs = 0;

  before(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        received++;
        let answered = false;
        res.on("close", () => {
          if (!answered) closedUnanswered++;
        });
        setTimeout(() => {
          if (res.destroyed) return;
          answered = true;
          answeredCount++;
          res
            .writeHead(200, { "content-type": "application/json" })
            .end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
        }, delayMs);
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  beforeEach(() => {
    received = 0;
    answeredCount = 0;
    closedUnanswered = 0;
    delayMs = 0;
  });

  const make = (connections = 4, breakerThreshold = 3, breakerCooldownMs = 60_000) =>
    new Upstream(
      { id: "u", httpUrl: url, wsUrl: null, weight: 1 },
      { timeoutMs: 5_000, connections, breakerThreshold, breakerCooldownMs },
    );
  const BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[]}';
  const check = (reply: ReplyBody) => reply.text;

  it("settles at once as cancelled: the request is aborted, counters released, no breaker count or error", async () => {
    // The node holds the request far longer than any test run: settled "at once" means before it answers.
    delayMs = 60_000;
    const u = make();
    const control: ExchangeControl = {};
    const p = u.exchange(BODY, ExchangeKind.Light, check, control);
    await eventually(() => received === 1, "the request at the node");
    assert.equal(u.inFlight, 1);
    control.exchange!.cancel();
    const r = await p;
    assert.equal(answeredCount, 0, "settled only when the node answered");
    assert.deepEqual(r, { ok: false, failure: "cancelled" });
    assert.equal(u.inFlight, 0);
    assert.equal(u.consecutiveFailures, 0);
    assert.equal(u.errorRateEwma, 0);
    assert.equal(u.breakerOpen, false);
    assert.equal(u.latency.count, 0, "no p95 sample: its time is only a lower bound");
    assert.ok(u.latencyEwmaMs > 0, "the selection EWMA takes its time so far");
    await eventually(() => closedUnanswered === 1, "the connection closed unanswered");
    // The connection is replaced: the next exchange is answered.
    delayMs = 0;
    const next = await u.exchange(BODY, ExchangeKind.Light, check);
    assert.ok(next.ok);
    control.exchange!.cancel(); // after the end: a no-op
    assert.equal(u.inFlight, 0);
    await u.close();
  });

  it("cancelled while waiting for a connection: it is never sent", async () => {
    delayMs = 300;
    const u = make(1);
    const first = u.exchange(BODY, ExchangeKind.Light, check);
    const control: ExchangeControl = {};
    const queued = u.exchange(BODY, ExchangeKind.Light, check, control);
    await eventually(() => received === 1, "the request at the node");
    control.exchange!.cancel();
    assert.deepEqual(await queued, { ok: false, failure: "cancelled" });
    assert.ok((await first).ok);
    // One more call on the only connection: a cancelled request sent anyway would reach the node first.
    delayMs = 0;
    assert.ok((await u.exchange(BODY, ExchangeKind.Light, check)).ok);
    assert.equal(received, 2, "the cancelled request reached the node");
    assert.equal(u.inFlight, 0);
    await u.close();
  });

  it("a cancelled half-open probe gives the probe back (the next call may probe again)", async () => {
    delayMs = 1_000;
    const u = make(4, 1, 10);
    u.recordFailure("unreachable");
    // Lets the 10 ms cooldown pass (the precondition; a slower machine only makes it more passed).
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(u.available(Date.now()), true, "cooldown over: one probe may go");
    const control: ExchangeControl = {};
    const p = u.exchange(BODY, ExchangeKind.Light, check, control);
    assert.equal(u.available(Date.now()), false, "the probe is taken");
    control.exchange!.cancel();
    await p;
    assert.equal(u.available(Date.now()), true);
    assert.equal(u.breakerOpen, true, "still open: a cancel is no verdict either way");
    await u.close();
  });
});
