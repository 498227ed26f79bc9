import assert from "node:assert/strict";
import { planBatch } from "../../../../data-plane/src/forward/batch-plan";
import { forwardCall, forwardPlan, Outcome } from "../../../../data-plane/src/forward/forward";
import { elementRefusal } from "../../../../data-plane/src/forward/refusals";
import { Acquired } from "../../../../data-plane/src/limits/concurrency";
import type { RequestTrace, SpanAttributes } from "../../../../data-plane/src/telemetry/tracing";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { blockDebug, call, setup } from "./fakes";

describe("data-plane: forwarding core", () => {
  it("a sampled call's upstream span: its traceparent goes upstream; one that joins a call in flight links to it", async () => {
    const { pool, asPool, deps, f } = setup();
    const spans: { name: string; attributes?: SpanAttributes; link?: string; traceparent: string }[] = [];
    const trace = (n: number): RequestTrace => ({
      step: () => {},
      set: () => {},
      end: () => {},
      logFields: () => ({ trace_id: "", span_id: "" }),
      child: (name, attributes, link) => {
        const traceparent = `00-${String(n).repeat(32)}-${String(n).repeat(16)}-01`;
        spans.push({ name, attributes, link, traceparent });
        return { traceparent, coalesced: () => {}, end: () => {} };
      },
    });
    const c = call("eth_getBalance", ["0xab", "latest"]);
    const unsampled = forwardCall(deps, asPool, blockDebug, f("app:a"), c);
    const joinsUnsampled = forwardCall(deps, asPool, blockDebug, f("app:b"), c, undefined, trace(1));
    await Promise.all([unsampled, joinsUnsampled]);
    assert.equal(pool.calls.length, 1);
    assert.equal(pool.calls[0]!.call.span, undefined, "the leader was not sampled");
    assert.deepEqual(spans[0]!.attributes?.["gateway.merged"], true);
    assert.equal(spans[0]!.link, undefined, "no sampled span to link to");
    deps.cache.clear();
    const c2 = call("eth_getBalance", ["0xcd", "latest"]);
    const leads = forwardCall(deps, asPool, blockDebug, f("app:a"), c2, undefined, trace(2));
    const joins = forwardCall(deps, asPool, blockDebug, f("app:b"), c2, undefined, trace(3));
    await Promise.all([leads, joins]);
    assert.equal(pool.calls.length, 2, "still one upstream call for the two");
    assert.equal(
      pool.calls[1]!.call.span?.traceparent,
      spans[1]!.traceparent,
      "the leader's span went upstream",
    );
    assert.equal(spans[1]!.attributes?.["gateway.merged"], undefined);
    assert.equal(spans[2]!.attributes?.["gateway.merged"], true);
    assert.equal(spans[2]!.link, spans[1]!.traceparent, "the joiner links to the leader's upstream span");
  });

  it("forwardCall: refused, forwarded (stored, slot released), cached, over the caps — sync unless it waits", async () => {
    const { pool, deps, asPool, f } = setup();
    const refused = forwardCall(deps, asPool, blockDebug, f("app:a"), call("debug_traceCall", []));
    assert.ok(!(refused instanceof Promise) && refused.kind === Outcome.Refused);
    assert.equal(refused.refusal.row, GatewayError.MethodBlocked);
    assert.equal(pool.calls.length, 0);

    const first = forwardCall(deps, asPool, blockDebug, f("app:a"), call("eth_chainId", []));
    assert.ok(first instanceof Promise, "a miss waits for the upstream");
    assert.equal(deps.flights.tryAcquire("app:a", 4), Acquired.OverTotal, "one slot is held while in flight");
    const out = await first;
    assert.ok(out.kind === Outcome.Forwarded && out.result.ok && out.cacheable);
    assert.equal(deps.flights.tryAcquire("app:a", 4), Acquired.Ok, "released once answered");
    deps.flights.release("app:a", 4);

    const hit = forwardCall(deps, asPool, blockDebug, f("app:a"), call("eth_chainId", []));
    assert.ok(!(hit instanceof Promise) && hit.kind === Outcome.Cached, "a hit is answered synchronously");
    assert.equal(hit.reply.tail, ',"result":"0x1"}');
    assert.equal(pool.calls.length, 1);

    assert.equal(deps.flights.tryAcquire("app:b", 4), Acquired.Ok);
    const over = forwardCall(deps, asPool, blockDebug, f("app:b"), call("eth_getBalance", ["0x1", "latest"]));
    assert.ok(!(over instanceof Promise) && over.kind === Outcome.OverCap);
    assert.equal(over.refusal.row, GatewayError.ConcurrencyLimit);
    assert.equal(pool.calls.length, 1, "nothing sent over the caps");
  });

  it("forwardPlan: settles the plan; over the caps nothing is sent and the plan is untouched; a whole failure is named", async () => {
    const { pool, deps, asPool, f } = setup();
    const items = [call("eth_chainId", [], "1"), call("debug_x", [], "2"), call("eth_blockNumber", [], "3")];
    const plan = planBatch(items, "req", (c) => elementRefusal(c, asPool, blockDebug));
    const done = await forwardPlan(deps, asPool, f("app:a"), plan, "req");
    assert.equal(done.overCap, undefined);
    assert.equal(done.failure, undefined);
    assert.deepEqual(
      pool.batches[0]!.map((c) => c.method),
      ["eth_chainId", "eth_blockNumber"],
    );
    assert.equal(plan.out[0], '{"jsonrpc":"2.0","id":1,"result":"0x1"}');
    assert.match(plan.out[1]!, /-32601/);
    assert.equal(deps.flights.tryAcquire("app:a", 4), Acquired.Ok, "slots released");
    deps.flights.release("app:a", 4);

    assert.equal(deps.flights.tryAcquire("app:a", 4), Acquired.Ok);
    const plan2 = planBatch(items, "req", (c) => elementRefusal(c, asPool, blockDebug));
    const refused = await forwardPlan(deps, asPool, f("app:a"), plan2, "req");
    assert.equal(refused.overCap?.row, GatewayError.ConcurrencyLimit);
    assert.equal(pool.batches.length, 1, "nothing sent");
    assert.equal(plan2.out[0], undefined);
    deps.flights.release("app:a", 4);

    pool.batchAnswer = [
      { ok: false, error: GatewayError.UpstreamTimeout },
      { ok: false, error: GatewayError.UpstreamUnreachable },
    ];
    const plan3 = planBatch(items, "req", (c) => elementRefusal(c, asPool, blockDebug));
    const failed = await forwardPlan(deps, asPool, f("app:a"), plan3, "req");
    assert.equal(failed.failure, GatewayError.UpstreamTimeout, "the first failure's row");
  });

  it("forwardPlan: a batch holds one slot per upstream exchange, heavy slots per heavy element, under its tenant's caps", async () => {
    const { pool, deps, asPool } = setup();
    const items = Array.from({ length: 100 }, (_, i) => call("eth_getBalance", [`0x${i}`, "latest"], `${i}`));
    const tenant = deps.flights.planFlight("app:idx", {
      name: "p",
      requestsPerSecond: 1,
      dailyRequestLimit: 1,
      monthlyRequestLimit: null,
      maxInFlightPerKey: 3,
      maxHeavyInFlightPerKey: 2,
    });
    const send = () =>
      forwardPlan(
        deps,
        asPool,
        tenant,
        planBatch(items, "req", (c) => elementRefusal(c, asPool, blockDebug)),
        "req",
      );
    // Sent in one exchange, 100 elements hold one slot: three such batches fit a cap of 3, a fourth not.
    const three = [send(), send(), send()];
    assert.equal(deps.flights.inFlight("app:idx"), 3, "one slot per batch, not 100");
    const fourth = await send();
    assert.equal(fourth.overCap?.limit, 3, "refused by the plan's cap (3), not the default (4)");
    for (const r of await Promise.all(three)) assert.equal(r.overCap, undefined);
    assert.equal(deps.flights.inFlight("app:idx"), 0, "released once answered");
    // Spread over 3 exchanges, the same batch holds 3 slots.
    pool.exchanges = 3;
    const spread = send();
    assert.equal(deps.flights.inFlight("app:idx"), 3);
    assert.equal((await send()).overCap?.row, GatewayError.ConcurrencyLimit);
    await spread;
    pool.exchanges = 1;
    // Heavy elements each hold a heavy slot, batch or not: 3 getLogs in one exchange exceed a heavy cap of 2.
    const logs = [0, 1, 2].map((i) => call("eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x2" }], `${i}`));
    const heavy = await forwardPlan(
      deps,
      asPool,
      tenant,
      planBatch(logs, "req", (c) => elementRefusal(c, asPool, blockDebug)),
      "req",
    );
    assert.equal(heavy.overCap?.limit, 2);
    assert.match(heavy.overCap?.message ?? "", /carries 3 heavy calls/);
    assert.equal(deps.flights.size, 0, "nothing held after the refusals");
  });
});
