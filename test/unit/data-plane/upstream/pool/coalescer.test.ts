import assert from "node:assert/strict";
import { type Need } from "../../../../../data-plane/src/upstream/capabilities";
import {
  COALESCE_MAX_PARAMS_BYTES,
  Coalescer,
  type CoalescerExchanges,
  coalescible,
} from "../../../../../data-plane/src/upstream/pool/coalescer";
import type { OutgoingCall } from "../../../../../data-plane/src/upstream/pool/wire";
import type { CallResult } from "../../../../../data-plane/src/upstream/reply";
import { ReplyKind } from "../../../../../data-plane/src/upstream/reply";
import { GatewayError } from "../../../../../shared/src/jsonrpc/errors";
import { FakePoolClock, Wire } from "./fakes";

const ok = (tail: string): CallResult => ({ ok: true, reply: { kind: ReplyKind.Result, tail } as never });

/** Exchanges that record what the coalescer sends and answer each call with its method name. */
class FakeExchanges implements CoalescerExchanges {
  batchesRefused = false;
  readonly log: string[] = [];
  /** What a chunk answers (default: each call its own result). */
  chunkAnswer: ((calls: readonly OutgoingCall[]) => CallResult[]) | undefined;

  async single(
    c: OutgoingCall,
    paramsJson: string | undefined,
    _need: Need | undefined,
  ): Promise<CallResult> {
    this.log.push(`single:${c.method}:${paramsJson ?? "-"}`);
    return ok(`,"result":"${c.method}"}`);
  }
  async chunk(
    calls: readonly OutgoingCall[],
    paramsJson?: readonly (string | undefined)[],
    _f?: unknown,
    need?: Need,
    traceparent?: string,
  ): Promise<CallResult[]> {
    this.log.push(
      `chunk:${calls.map((c) => c.method).join(",")}:${paramsJson?.join("|")}:${need === undefined ? "-" : "need"}:${traceparent ?? "-"}`,
    );
    return this.chunkAnswer?.(calls) ?? calls.map((c) => ok(`,"result":"${c.method}"}`));
  }
}

function coalescer(max = 4) {
  const clock = new FakePoolClock();
  const ex = new FakeExchanges();
  return { c: new Coalescer(max, ex, clock), ex, clock };
}

const call = (method: string, params: unknown = []): OutgoingCall => ({ method, params });

describe("upstream pool: coalescing single calls", () => {
  it("holds calls of one event-loop turn and sends them as one upstream batch, answers split back", async () => {
    const { c, ex, clock } = coalescer();
    const a = c.route(call("eth_chainId"), undefined, undefined);
    const b = c.route(call("eth_getBalance", ["0xaa", "latest"]), undefined, undefined);
    await Wire.settle();
    assert.deepEqual(ex.log, [], "nothing sent before the turn's check phase");
    assert.equal(clock.turn(), 1, "one flush for the turn");
    assert.deepEqual(ex.log, ['chunk:eth_chainId,eth_getBalance:[]|["0xaa","latest"]:-:-']);
    assert.equal(((await a) as { reply: { tail: string } }).reply.tail, ',"result":"eth_chainId"}');
    assert.equal(((await b) as { reply: { tail: string } }).reply.tail, ',"result":"eth_getBalance"}');
  });

  it("sends a lone call of a turn by itself", async () => {
    const { c, ex, clock } = coalescer();
    const a = c.route(call("eth_chainId"), "[]", undefined);
    clock.turn();
    await a;
    assert.deepEqual(ex.log, ["single:eth_chainId:[]"]);
  });

  it("cuts a turn's calls into batches of at most coalesceMax", async () => {
    const { c, ex, clock } = coalescer(2);
    const all = ["a", "b", "c", "d", "e"].map((m) => c.route(call(`eth_${m}`), undefined, undefined));
    clock.turn();
    await Promise.all(all);
    assert.deepEqual(
      ex.log.map((l) => l.split(":").slice(0, 2).join(":")),
      ["chunk:eth_a,eth_b", "chunk:eth_c,eth_d", "single:eth_e"],
    );
  });

  it("never coalesces sends, large answers, heavy calls, big params, or after a node refused batches", async () => {
    assert.equal(coalescible("eth_sendRawTransaction"), false);
    assert.equal(coalescible("eth_getLogs"), false);
    assert.equal(coalescible("debug_traceTransaction"), false);
    assert.equal(coalescible("eth_call"), true);
    const { c, ex, clock } = coalescer();
    const big = "x".repeat(COALESCE_MAX_PARAMS_BYTES + 1);
    await c.route(call("eth_call", [big]), undefined, undefined);
    await c.route(call("eth_getBlockByNumber", ["latest", false]), undefined, undefined);
    ex.batchesRefused = true;
    await c.route(call("eth_chainId"), undefined, undefined);
    assert.equal(clock.turn(), 0, "none was queued");
    assert.deepEqual(
      ex.log.map((l) => l.split(":").slice(0, 2).join(":")),
      ["single:eth_call", "single:eth_getBlockByNumber", "single:eth_chainId"],
    );
  });

  it("batches calls with a restricting need apart from the others", async () => {
    const { c, ex, clock } = coalescer();
    const state: Need = { block: 5, families: 0 };
    const all = [
      c.route(call("eth_chainId"), undefined, undefined),
      c.route(call("eth_getBalance", ["0xaa", "0x5"]), undefined, state),
      c.route(call("eth_gasPrice"), undefined, undefined),
      c.route(call("eth_getCode", ["0xaa", "0x5"]), undefined, state),
    ];
    clock.turn();
    await Promise.all(all);
    assert.deepEqual(
      ex.log.map((l) => `${l.split(":")[1]}:${l.split(":")[3]}`),
      ["eth_chainId,eth_gasPrice:-", "eth_getBalance,eth_getCode:need"],
    );
  });

  it("sends the calls one by one when the batch's answer is too large or no node takes batches", async () => {
    const { c, ex, clock } = coalescer();
    ex.chunkAnswer = (calls) => calls.map(() => ({ ok: false, error: GatewayError.UpstreamBadResponse }));
    const all = [c.route(call("eth_a"), undefined, undefined), c.route(call("eth_b"), undefined, undefined)];
    clock.turn();
    const out = await Promise.all(all);
    assert.deepEqual(
      ex.log.map((l) => l.split(":").slice(0, 2).join(":")),
      ["chunk:eth_a,eth_b", "single:eth_a", "single:eth_b"],
    );
    assert.ok(out.every((r) => r.ok));
  });

  it("sends the first sampled call's traceparent for the batch and tells every sampled call", async () => {
    const { c, ex, clock } = coalescer();
    const told: string[] = [];
    const span = (tp: string) => ({
      traceparent: tp,
      coalesced: (size: number, sent: string) => told.push(`${tp}:${size}:${sent}`),
    });
    const all = [
      c.route(call("eth_a"), undefined, undefined),
      c.route({ ...call("eth_b"), span: span("tp-b") }, undefined, undefined),
      c.route({ ...call("eth_c"), span: span("tp-c") }, undefined, undefined),
    ];
    clock.turn();
    await Promise.all(all);
    assert.match(ex.log[0]!, /:tp-b$/);
    assert.deepEqual(told, ["tp-b:3:tp-b", "tp-c:3:tp-b"]);
  });
});
