import assert from "node:assert/strict";
import { LruResponseCache, NoopResponseCache } from "../../../../data-plane/src/cache/response-cache";
import {
  batchJson,
  cacheKey,
  concurrencyRefusal,
  elementRefusal,
  type ForwardDeps,
  fetchCall,
  forwardCall,
  forwardPlan,
  lookup,
  Outcome,
  paramsFromKey,
  planBatch,
  settleBatch,
  store,
} from "../../../../data-plane/src/forward/forward";
import { Acquired, ConcurrencyLimiter } from "../../../../data-plane/src/limits/concurrency";
import { NoopMetrics } from "../../../../data-plane/src/metrics/metrics";
import { type MethodPolicy, reachRefusal } from "../../../../data-plane/src/policy/method-policy";
import type { BatchItem, RpcCall } from "../../../../data-plane/src/rpc/parse";
import type { RequestTrace, SpanAttributes } from "../../../../data-plane/src/telemetry/tracing";
import type { NetworkPool, OutgoingCall } from "../../../../data-plane/src/upstream/network-pool";
import { type CallResult, ReplyKind } from "../../../../data-plane/src/upstream/reply";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import type { NetworkRecord } from "../../../../shared/src/redis/records";

/** NoopMetrics that keeps the cache hit / miss calls. */
function cacheMetrics(): NoopMetrics & { seen: boolean[] } {
  const seen: boolean[] = [];
  const m = Object.assign(new NoopMetrics(), { seen });
  (m as { cache: (network: string, hit: boolean) => void }).cache = (_n, hit) => {
    seen.push(hit);
  };
  return m;
}

/** A pool stand-in: the core reads `record`, `cacheHead`, `finalizedHead`, `observeHead`, `call`, `callBatch`. */
class FakePool {
  head = 100;
  finalized = -1;
  observed: number[] = [];
  calls: { call: OutgoingCall; paramsJson: string | undefined }[] = [];
  answer: CallResult = ok(',"result":"0x1"}');
  constructor(readonly record: NetworkRecord) {}
  cacheHead(): number {
    return this.head;
  }
  finalizedHead(): number {
    return this.finalized;
  }
  observeHead(n: number): void {
    this.observed.push(n);
  }
  call(call: OutgoingCall, paramsJson?: string): Promise<CallResult> {
    this.calls.push({ call, paramsJson });
    return new Promise((r) => setImmediate(() => r(this.answer)));
  }
  batches: OutgoingCall[][] = [];
  batchAnswer: CallResult[] | undefined;
  /** What NetworkPool.exchangesFor answers: the upstream exchanges a batch is spread over. */
  exchanges = 1;
  exchangesFor(_calls: readonly OutgoingCall[]): number {
    return this.exchanges;
  }
  callBatch(calls: OutgoingCall[]): Promise<CallResult[]> {
    this.batches.push(calls);
    return new Promise((r) => setImmediate(() => r(this.batchAnswer ?? calls.map(() => this.answer))));
  }
}

function ok(tail: string, kind: ReplyKind = ReplyKind.Result): CallResult {
  return { ok: true, reply: { tail, kind, category: "Success" } };
}

const network = { slug: "eth", maxLogsBlockRange: 1000 } as unknown as NetworkRecord;
const blockDebug: MethodPolicy = {
  check: (m) => (m.startsWith("debug_") ? `${m} is not available` : undefined),
};

/** A parsed call; idText null = a notification (no id). */
function call(method: string, params?: unknown, idText: string | null = "1"): RpcCall {
  return { method, params, idText: idText ?? undefined } as RpcCall;
}

function setup(cacheOn = true) {
  const pool = new FakePool(network);
  const metrics = cacheMetrics();
  const deps: ForwardDeps = {
    cache: cacheOn ? new LruResponseCache(1 << 20, "first") : new NoopResponseCache(),
    metrics,
    flights: new ConcurrencyLimiter(4, 1),
    config: { CACHE_PER_BLOCK_TTL_MS: 60_000 },
  };
  const f = (id: string) => deps.flights.flight(id);
  return { pool, metrics, deps, asPool: pool as unknown as NetworkPool, f };
}

describe("data-plane: forwarding core", () => {
  it("refuses by method policy first, then by the eth_getLogs range; forwards the rest", () => {
    const { asPool } = setup();
    const blocked = elementRefusal(call("debug_traceCall", []), asPool, blockDebug);
    assert.equal(blocked?.row, GatewayError.MethodBlocked);
    assert.equal(blocked?.message, "debug_traceCall is not available");
    const wide = elementRefusal(
      call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x2710" }]),
      asPool,
      blockDebug,
    );
    assert.equal(wide?.row, GatewayError.LogsRangeTooLarge);
    assert.equal(wide?.limit, 1000);
    assert.equal(
      elementRefusal(call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x10" }]), asPool, blockDebug),
      undefined,
    );
    assert.equal(elementRefusal(call("eth_chainId", []), asPool, blockDebug), undefined);
  });

  it("cache keys: permanent vs per head, none when the head is unknown, caching off or the method never cached", () => {
    const { pool, asPool, deps } = setup();
    assert.equal(cacheKey(deps, call("eth_chainId", []), asPool), "eth\u0000p\u0000eth_chainId\u0000[]");
    assert.equal(cacheKey(deps, call("eth_blockNumber"), asPool), "eth\u0000100\u0000eth_blockNumber\u0000");
    const k = cacheKey(deps, call("eth_getBalance", ["0xab", "latest"]), asPool);
    assert.equal(k, 'eth\u0000100\u0000eth_getBalance\u0000["0xab","latest"]');
    assert.equal(paramsFromKey(k, "eth", "eth_getBalance"), '["0xab","latest"]');
    assert.equal(cacheKey(deps, call("eth_sendRawTransaction", ["0x00"]), asPool), "");
    pool.head = -1;
    assert.equal(cacheKey(deps, call("eth_blockNumber"), asPool), "");
    assert.equal(cacheKey(deps, call("eth_chainId", []), asPool), "eth\u0000p\u0000eth_chainId\u0000[]");
    const off = setup(false);
    assert.equal(cacheKey(off.deps, call("eth_chainId", []), off.asPool), "");
  });

  it("a miss goes upstream once for concurrent identical calls, is stored, and the next lookup hits", async () => {
    const { pool, asPool, deps, metrics } = setup();
    const c = call("eth_getBalance", ["0xab", "latest"]);
    const key = cacheKey(deps, c, asPool);
    assert.equal(lookup(deps, asPool, key), undefined);
    const [a, b] = await Promise.all([
      fetchCall(c, asPool, key, deps.cache),
      fetchCall(c, asPool, key, deps.cache),
    ]);
    assert.equal(pool.calls.length, 1, "in-flight merge: one upstream call");
    assert.equal(pool.calls[0]!.paramsJson, '["0xab","latest"]', "params passed on, not serialised twice");
    assert.deepEqual(a, b);
    store(deps, asPool, key, a);
    assert.equal(lookup(deps, asPool, key)?.tail, ',"result":"0x1"}');
    assert.deepEqual(metrics.seen, [false, true]);
  });

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

  it("stores only real results (not nulls, node errors or failures); no key = no merge", async () => {
    const { pool, asPool, deps } = setup();
    const c = call("eth_getBalance", ["0xab", "latest"]);
    const key = cacheKey(deps, c, asPool);
    store(deps, asPool, key, ok(',"result":null}', ReplyKind.NullResult));
    store(deps, asPool, key, ok(',"error":{"code":-32000,"message":"x"}}', ReplyKind.Error));
    store(deps, asPool, key, { ok: false, error: GatewayError.UpstreamTimeout });
    assert.equal(deps.cache.get(key), undefined);
    await Promise.all([fetchCall(c, asPool, "", deps.cache), fetchCall(c, asPool, "", deps.cache)]);
    assert.equal(pool.calls.length, 2);
    assert.equal(pool.calls[0]!.paramsJson, undefined);
  });

  it("concurrency refusal names the cap that was hit", () => {
    const { deps } = setup();
    const total = concurrencyRefusal(deps.flights.flight("k"), Acquired.OverTotal, 0);
    assert.equal(total.row, GatewayError.ConcurrencyLimit);
    assert.equal(total.limit, 4);
    const heavy = concurrencyRefusal(deps.flights.flight("k"), Acquired.OverHeavy, 1);
    assert.equal(heavy.limit, 1);
    assert.equal(heavy.retryAfterMs, 1000);
    const plan = { name: "p", requestsPerSecond: 1, dailyRequestLimit: 1, monthlyRequestLimit: null };
    const own = deps.flights.planFlight("k", { ...plan, maxInFlightPerKey: 40, maxHeavyInFlightPerKey: 3 });
    assert.equal(concurrencyRefusal(own, Acquired.OverTotal, 0).limit, 40, "the plan's cap is named");
    assert.equal(concurrencyRefusal(own, Acquired.HeavyRequestTooLarge, 5).limit, 3);
  });

  it("plans a batch (invalid, refused, local, forwarded) and reassembles it in request order", () => {
    const { pool, asPool } = setup();
    const items: BatchItem[] = [
      call("eth_blockNumber", [], "1"),
      { error: GatewayError.InvalidRequest, idText: "2" } as BatchItem,
      call("debug_traceCall", [], "3"),
      call("eth_subscribe", ["newHeads"], "4"),
      call("eth_chainId", [], null),
      call("eth_getBalance", ["0xab", "latest"], '"six"'),
    ];
    const plan = planBatch(
      items,
      "req-1",
      (c) => elementRefusal(c, asPool, blockDebug),
      (c) => c.method === "eth_subscribe",
    );
    assert.deepEqual(plan.forwardIdx, [0, 4, 5]);
    assert.deepEqual(plan.localIdx, [3]);
    assert.equal(plan.categories[2], GatewayError.MethodBlocked.category);
    assert.match(plan.out[2]!, /^\{"jsonrpc":"2.0","id":3,"error":\{"code":-32601/);
    assert.match(plan.out[1]!, /"id":2,"error"/);
    const anyOk = settleBatch(
      plan,
      [ok(',"result":"0x200"}'), ok(',"result":"0x1"}'), { ok: false, error: GatewayError.UpstreamTimeout }],
      "req-1",
      asPool,
    );
    assert.equal(anyOk, true);
    assert.deepEqual(pool.observed, [0x200], "eth_blockNumber's answer feeds the head");
    assert.equal(plan.out[0], '{"jsonrpc":"2.0","id":1,"result":"0x200"}');
    assert.equal(plan.out[4], undefined, "a notification gets no answer");
    assert.equal(plan.categories[4], "Success");
    assert.match(plan.out[5]!, /^\{"jsonrpc":"2.0","id":"six","error":\{"code":/);
    assert.equal(plan.categories[5], GatewayError.UpstreamTimeout.category);
    plan.out[3] = '{"jsonrpc":"2.0","id":4,"result":"0xs"}';
    const body = JSON.parse(batchJson(plan.out)) as { id: unknown }[];
    assert.deepEqual(
      body.map((r) => r.id),
      [1, 2, 3, 4, "six"],
    );
    assert.equal(batchJson([undefined, undefined]), "");
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

  it("planBatch: a run of one method takes one verdict, each element keeps its id; range-checked calls are each checked", () => {
    const { asPool } = setup();
    let asked = 0;
    const refuse = (c: RpcCall) => {
      asked++;
      return elementRefusal(c, asPool, blockDebug);
    };
    const items: BatchItem[] = [
      call("debug_traceCall", [], "1"),
      call("debug_traceCall", [], "2"),
      call("debug_traceCall", [], null),
      call("eth_chainId", [], "4"),
      call("eth_chainId", [], "5"),
      call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x10" }], "6"),
      call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x2710" }], "7"),
      call("eth_getLogs", [{ fromBlock: "0x0", toBlock: "0x11" }], "8"),
      call("debug_traceCall", [], "9"),
    ];
    const plan = planBatch(items, "req", refuse);
    // Once per run of debug_traceCall / eth_chainId, once per eth_getLogs (its range is in its params).
    assert.equal(asked, 1 + 1 + 3 + 1);
    assert.deepEqual(plan.forwardIdx, [3, 4, 5, 7]);
    for (const i of [0, 1, 8])
      assert.match(plan.out[i]!, new RegExp(`^\\{"jsonrpc":"2.0","id":${i + 1},"error"`));
    assert.equal(plan.out[2], undefined, "a refused notification gets no answer");
    assert.equal(plan.categories[2], GatewayError.MethodBlocked.category);
    assert.equal(plan.categories[6], GatewayError.LogsRangeTooLarge.category);
    assert.match(plan.out[6]!, /"id":7,"error"/);
  });

  it("planBatch: a plain anvil_reset does not lend its verdict to a forking one after it (params decide)", () => {
    const { asPool } = setup();
    const nodePolicy: MethodPolicy = {
      check: (method, _n, params) => {
        const why = reachRefusal(method, params);
        return why === undefined ? undefined : why;
      },
    };
    const fork = [{ forking: { jsonRpcUrl: "http://127.0.0.1:1/" } }];
    const items: BatchItem[] = [
      call("anvil_reset", [], "1"),
      call("anvil_reset", fork, "2"),
      call("anvil_reset", [], "3"),
      call("hardhat_reset", fork, "4"),
    ];
    const plan = planBatch(items, "req", (c) => elementRefusal(c, asPool, nodePolicy));
    assert.deepEqual(plan.forwardIdx, [0, 2]);
    assert.match(plan.out[1]!, /"id":2,"error".*fork URL/);
    assert.match(plan.out[3]!, /"id":4,"error".*fork URL/);
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
