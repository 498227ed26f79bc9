import assert from "node:assert/strict";
import {
  isRangeRefusal,
  type LogsSplit,
  logItems,
  planLogsSplit,
  runLogsSplit,
  type SplitOptions,
} from "../../../../data-plane/src/upstream/logs-split";
import { type CallResult, parseSingleReply, ReplyKind } from "../../../../data-plane/src/upstream/reply";
import { GatewayError, responseTooLargeRow } from "../../../../shared/src/jsonrpc/errors";

const hex = (n: number) => `0x${n.toString(16)}`;
const num = (v: unknown) => Number.parseInt(String(v), 16);

/** The filter a sub-call's params carry (positional form). */
const filterOf = (params: unknown) => (params as Record<string, unknown>[])[0]!;

/** A node's answer text as the pool parses it (id 1). */
function reply(text: string): CallResult {
  const r = parseSingleReply(text, 1);
  assert.ok(r, text);
  return { ok: true, reply: r };
}

/** One fake log per block in [a, b]: `{"b":n,"i":0}`, plus a second one in every block divisible by 3. */
function logsFor(a: number, b: number): string {
  const items: string[] = [];
  for (let n = a; n <= b; n++) {
    items.push(`{"b":${n},"i":0}`);
    if (n % 3 === 0) items.push(`{"b":${n},"i":1}`);
  }
  return `[${items.join(",")}]`;
}

/**
 * A fake node for runLogsSplit: answers any sub-range with logsFor, refuses ranges over `maxRange` blocks
 * with a realistic message, after `delayMs`; records every range asked.
 */
function fakeNode(o: { maxRange?: number; delayMs?: number; answer?: (a: number, b: number) => CallResult }) {
  const asked: [number, number][] = [];
  const send = async (params: unknown): Promise<CallResult> => {
    const f = filterOf(params);
    const a = num(f.fromBlock);
    const b = f.toBlock === undefined || f.toBlock === "latest" ? Number.NaN : num(f.toBlock);
    asked.push([a, b]);
    await new Promise((r) => setTimeout(r, o.delayMs ?? 1));
    if (o.answer) return o.answer(a, b);
    if (o.maxRange !== undefined && b - a + 1 > o.maxRange) {
      return reply(
        `{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"query returned more than 10000 results. Try with this block range [${hex(a)}, ${hex(a + o.maxRange - 1)}]."}}`,
      );
    }
    return reply(`{"jsonrpc":"2.0","id":1,"result":${logsFor(a, b)}}`);
  };
  return { send, asked };
}

const opts = (send: SplitOptions["send"], over: Partial<SplitOptions> = {}): SplitOptions => ({
  chunk: 10,
  concurrency: 4,
  maxBytes: 32 * 1024 * 1024,
  tooLarge: responseTooLargeRow(32 * 1024 * 1024),
  send,
  ...over,
});

function plan(from: number, to: number, chunk = 10): LogsSplit {
  const p = planLogsSplit([{ fromBlock: hex(from), toBlock: hex(to) }], 1_000_000, chunk);
  assert.ok(p);
  return p;
}

function resultText(r: CallResult): string {
  assert.ok(r.ok, JSON.stringify(r));
  assert.equal(r.reply.kind, ReplyKind.Result);
  return r.reply.tail.slice(',"result":'.length, -1);
}

describe("data plane: eth_getLogs splitting (logs-split.ts)", () => {
  describe("planLogsSplit", () => {
    it("splits only ranges longer than the chunk; chunk 0 never splits", () => {
      assert.equal(planLogsSplit([{ fromBlock: "0x0", toBlock: hex(9) }], 100, 10), undefined);
      const p = planLogsSplit([{ fromBlock: "0x0", toBlock: hex(10) }], 100, 10);
      assert.deepEqual([p?.from, p?.to], [0, 10]);
      assert.equal(planLogsSplit([{ fromBlock: "0x0", toBlock: hex(1000) }], 2000, 0), undefined);
    });

    it("reads every spelling of a bound; earliest = 0; latest / pending / absent = the head", () => {
      const cases: [unknown, unknown, number, number][] = [
        ["earliest", "latest", 0, 500],
        ["EARLIEST", " Latest ", 0, 500],
        ["0x0001", "0X64", 1, 100],
        ["7", "300", 7, 300],
        [5, 200, 5, 200],
        ["0x10", "pending", 16, 500],
        ["0x10", undefined, 16, 500],
        ["0x10", null, 16, 500],
      ];
      for (const [fromBlock, toBlock, from, to] of cases) {
        const f: Record<string, unknown> = { fromBlock };
        if (toBlock !== undefined) f.toBlock = toBlock;
        const p = planLogsSplit([f], 500, 10);
        assert.deepEqual([p?.from, p?.to], [from, to], JSON.stringify(f));
      }
    });

    it("does not split blockHash filters, safe / finalized ends, head-tag starts, unknown heads, unreadable or inverted ranges", () => {
      const head = 5_000;
      const none: unknown[] = [
        [{ blockHash: `0x${"ab".repeat(32)}` }],
        [{ blockHash: `0x${"ab".repeat(32)}`, fromBlock: "0x0", toBlock: hex(4000) }],
        [{ fromBlock: "0x0", toBlock: "finalized" }],
        [{ fromBlock: "0x0", toBlock: "safe" }],
        [{ fromBlock: "latest", toBlock: hex(head) }],
        [{ toBlock: hex(10) }], // from absent = latest
        [{ fromBlock: "0xzz", toBlock: hex(4000) }],
        [{ fromBlock: "0x0", toBlock: true }],
        [{ fromBlock: hex(4000), toBlock: "0x0" }],
        [null],
        [[1, 2]],
        "x",
        undefined,
      ];
      for (const params of none)
        assert.equal(planLogsSplit(params, head, 10), undefined, JSON.stringify(params));
      assert.equal(planLogsSplit([{ fromBlock: "0x0", toBlock: "latest" }], -1, 10), undefined);
      assert.ok(planLogsSplit([{ fromBlock: "0x0", toBlock: hex(4000) }], -1, 10), "numbers need no head");
    });

    it("writes sub-range params: hex bounds, other fields kept, the client's own latest kept on the last sub-range", () => {
      const filter = { address: "0xabc", topics: [["0x1"], null], fromBlock: "earliest", toBlock: "latest" };
      const p = planLogsSplit([filter, "extra"], 100, 10)!;
      assert.deepEqual(p.params(0, 9), [{ ...filter, fromBlock: "0x0", toBlock: "0x9" }, "extra"]);
      assert.deepEqual(p.params(91, 100), [{ ...filter, fromBlock: "0x5b", toBlock: "latest" }, "extra"]);
      const absent = planLogsSplit([{ fromBlock: "0x0" }], 100, 10)!;
      assert.deepEqual(absent.params(95, 100), [{ fromBlock: "0x5f" }], "an absent toBlock stays absent");
      assert.deepEqual(absent.params(0, 9), [{ fromBlock: "0x0", toBlock: "0x9" }]);
      const numbered = planLogsSplit([{ fromBlock: "0x0", toBlock: "0x64" }], 100, 10)!;
      assert.deepEqual(numbered.params(91, 100), [{ fromBlock: "0x5b", toBlock: "0x64" }]);
      // By name (reth / jsonrpsee style).
      const named = planLogsSplit({ filter: { fromBlock: "0x0", toBlock: "0x64" } }, 100, 10)!;
      assert.deepEqual(named.params(0, 9), { filter: { fromBlock: "0x0", toBlock: "0x9" } });
      assert.deepEqual(filter, {
        address: "0xabc",
        topics: [["0x1"], null],
        fromBlock: "earliest",
        toBlock: "latest",
      });
    });
  });

  it("isRangeRefusal: the wordings of nodes and providers, not other errors", () => {
    const refusals = [
      [-32005, "query returned more than 10000 results"],
      [-32005, "query returned more than 10000 results. Try with this block range [0x1, 0x2]."],
      [-32602, "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range"],
      [-32000, "exceed maximum block range: 5000"],
      [-32602, "query exceeds max block range 100000"],
      [-32602, "query exceeds max results 20000, retry with the range 24383075-24383096"],
      [-32614, "eth_getLogs is limited to a 10,000 range"],
      [-32600, "block range is too wide"],
      [-32000, "Block range is too large"],
      [-32000, "block range too large"],
      [-32000, "Block range limit exceeded."],
      [-32000, "logs matched by query exceeds limit of 10000"],
      [-32000, "backend response too large"],
      [-32005, "Requested range exceeds maximum RPC range limit"],
    ] as const;
    for (const [code, message] of refusals) {
      assert.ok(isRangeRefusal(`,"error":${JSON.stringify({ code, message })}}`), message);
    }
    const others = [
      [-32000, "invalid block range params"],
      [-32000, "block range extends beyond current head block"],
      [-32602, "BlockOutOfRangeError: block height is 16 but requested was 32"],
      [-32005, "project ID request rate exceeded"],
      [-32000, "execution reverted"],
    ] as const;
    for (const [code, message] of others) {
      assert.ok(!isRangeRefusal(`,"error":${JSON.stringify({ code, message })}}`), message);
    }
    assert.ok(!isRangeRefusal(',"error":"not an object"}'));
    assert.ok(!isRangeRefusal("garbage"));
  });

  it("logItems: slices a compact array, parses other spellings, null = empty, non-arrays = undefined", () => {
    const items = (text: string) => logItems(parseSingleReply(text, 1)!);
    assert.equal(items('{"jsonrpc":"2.0","id":1,"result":[{"a":1},{"b":2}]}'), '{"a":1},{"b":2}');
    assert.equal(items('{"jsonrpc":"2.0","id":1,"result":[]}'), "");
    assert.equal(items('{"jsonrpc":"2.0","id":1,"result":[ {"a":1} ]}\n'), '{"a":1}');
    assert.equal(items('{"id":1,"jsonrpc":"2.0","result":[{"a": 1}]}'), '{"a":1}');
    assert.equal(items('{"jsonrpc":"2.0","id":1,"result":null}'), "");
    assert.equal(items('{"jsonrpc":"2.0","id":1,"result":{"method":"eth_getLogs"}}'), undefined);
    assert.equal(items('{"jsonrpc":"2.0","id":1,"result":"0x1"}'), undefined);
  });

  describe("runLogsSplit", () => {
    it("merges sub-ranges in range order into exactly the whole range's answer, at most `concurrency` in flight", async () => {
      // Later sub-ranges answer first: the merge must not depend on arrival order.
      const node = fakeNode({});
      let inFlight = 0;
      let maxInFlight = 0;
      const slowFirst = async (params: unknown) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        const a = num(filterOf(params).fromBlock);
        await new Promise((r) => setTimeout(r, a < 20 ? 30 : 1));
        const r = await node.send(params);
        inFlight--;
        return r;
      };
      const out = await runLogsSplit(plan(3, 77), opts(slowFirst, { chunk: 10, concurrency: 3 }));
      assert.equal(resultText(out.result), logsFor(3, 77));
      assert.equal(out.subCalls, 8);
      assert.equal(out.halvings, 0);
      assert.deepEqual(
        [...node.asked].sort((x, y) => x[0] - y[0]),
        [3, 13, 23, 33, 43, 53, 63, 73].map((a) => [a, Math.min(77, a + 9)]),
      );
      assert.equal(maxInFlight, 3);
    });

    it("a range refusal halves the chunk, for that sub-range and those not sent yet, until the node accepts", async () => {
      const node = fakeNode({ maxRange: 3 });
      const out = await runLogsSplit(plan(0, 39), opts(node.send, { chunk: 20, concurrency: 1 }));
      assert.equal(resultText(out.result), logsFor(0, 39));
      // [0,19] refused -> chunk 10: [0,9] refused -> 5: [0,4] refused -> 2; then 2-block pieces.
      assert.equal(out.halvings, 3);
      assert.deepEqual(node.asked.slice(0, 4), [
        [0, 19],
        [0, 9],
        [0, 4],
        [0, 1],
      ]);
      assert.equal(out.subCalls, node.asked.length);
      // 3 refused, then [0,4] [5,9] [10,19] [20,39] in 2-block pieces: 3 + 3 + 5 + 10.
      assert.equal(out.subCalls, 3 + 21);
    });

    it("one block still refused: the node's refusal is the answer", async () => {
      const node = fakeNode({ maxRange: 0 });
      const out = await runLogsSplit(plan(0, 15), opts(node.send, { chunk: 8, concurrency: 2 }));
      assert.ok(out.result.ok && out.result.reply.kind === ReplyKind.Error);
      assert.match(out.result.reply.tail, /more than 10000 results/);
      assert.ok(
        node.asked.some(([a, b]) => a === b),
        "went down to one block",
      );
      assert.ok(out.subCalls < 16, `no fan-out into every block: ${out.subCalls}`);
    });

    it("any other node error or gateway row fails the whole call with it, at once", async () => {
      const err = '{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"execution reverted"}}';
      const nodeErr = fakeNode({
        answer: (a) => (a === 20 ? reply(err) : reply('{"jsonrpc":"2.0","id":1,"result":[]}')),
      });
      const out = await runLogsSplit(plan(0, 99), opts(nodeErr.send, { concurrency: 2 }));
      assert.ok(out.result.ok && out.result.reply.kind === ReplyKind.Error);
      assert.equal(out.result.reply.tail, ',"error":{"code":-32000,"message":"execution reverted"}}');
      assert.ok(nodeErr.asked.length < 10, "stopped sending after the failure");

      const timeout = fakeNode({
        answer: (a) =>
          a === 10
            ? { ok: false, error: GatewayError.UpstreamTimeout }
            : reply('{"jsonrpc":"2.0","id":1,"result":[]}'),
      });
      const t = await runLogsSplit(plan(0, 99), opts(timeout.send));
      assert.deepEqual(t.result, { ok: false, error: GatewayError.UpstreamTimeout });

      const notArray = fakeNode({ answer: () => reply('{"jsonrpc":"2.0","id":1,"result":{"x":1}}') });
      const n = await runLogsSplit(plan(0, 99), opts(notArray.send));
      assert.deepEqual(n.result, { ok: false, error: GatewayError.UpstreamBadResponse });

      const rejects = await runLogsSplit(
        plan(0, 99),
        opts(() => Promise.reject(new Error("bug"))),
      );
      assert.deepEqual(rejects.result, { ok: false, error: GatewayError.Internal });
    });

    it("upstream_busy while its own sub-calls are in flight: waits for them instead of failing", async () => {
      let inFlight = 0;
      let busy = 0;
      const send = async (params: unknown): Promise<CallResult> => {
        // Two heavy slots in all: a third sub-call at once is refused busy, as the pool would.
        if (inFlight >= 2) {
          busy++;
          return { ok: false, error: GatewayError.UpstreamBusy };
        }
        inFlight++;
        await new Promise((r) => setTimeout(r, 5));
        inFlight--;
        const f = filterOf(params);
        return reply(`{"jsonrpc":"2.0","id":1,"result":${logsFor(num(f.fromBlock), num(f.toBlock))}}`);
      };
      const out = await runLogsSplit(plan(0, 59), opts(send, { concurrency: 6 }));
      assert.equal(resultText(out.result), logsFor(0, 59));
      assert.ok(busy >= 1, "the busy path was taken");
      // With nothing of its own in flight, busy is the answer.
      const alone = await runLogsSplit(
        plan(0, 59),
        opts(async () => ({ ok: false, error: GatewayError.UpstreamBusy }), { concurrency: 1 }),
      );
      assert.deepEqual(alone.result, { ok: false, error: GatewayError.UpstreamBusy });
    });

    it("a merged answer over maxBytes fails with the too-large row", async () => {
      const node = fakeNode({});
      const whole = `{"jsonrpc":"2.0","id":1,"result":${logsFor(0, 99)}}`.length;
      const row = responseTooLargeRow(whole - 100);
      const over = await runLogsSplit(plan(0, 99), opts(node.send, { maxBytes: whole - 100, tooLarge: row }));
      assert.deepEqual(over.result, { ok: false, error: row });
      const fits = await runLogsSplit(plan(0, 99), opts(node.send, { maxBytes: whole + 100, tooLarge: row }));
      assert.equal(resultText(fits.result), logsFor(0, 99));
    });
  });
});
