import assert from "node:assert/strict";
import { BatchRouter } from "../../../../../data-plane/src/upstream/pool/batches";
import { type CallResult, ReplyKind } from "../../../../../data-plane/src/upstream/reply";
import { responseTooLargeRow } from "../../../../../shared/src/jsonrpc/errors";
import { base, record } from "./fakes";

/** A router whose exchanges record each chunk's node and calls and answer each call with its method. */
function router(n: number, logsChunkBlocks?: number) {
  const b = base(Array.from({ length: n }, () => ({})));
  for (const u of b.u) u.head = 1_000;
  const chunks: { first: string | undefined; methods: string[] }[] = [];
  const singles: string[] = [];
  const answer = (m: string): CallResult => ({
    ok: true,
    reply: { kind: ReplyKind.Result, tail: `,"result":"${m}"}` } as never,
  });
  const rec = { ...record(Array.from({ length: n }, () => ({}))), logsChunkBlocks } as never;
  const r = new BatchRouter(
    () => rec,
    { maxResponseBytes: 1 << 20, tooLargeRow: responseTooLargeRow(1 << 20) },
    b.selector,
    b.heads,
    {
      async single(c, _pj, _need, first) {
        singles.push(`${c.method}@${first?.id ?? "-"}`);
        // A split eth_getLogs merges its sub-calls' arrays of logs.
        return { ok: true, reply: { kind: ReplyKind.Result, tail: ',"result":[]}' } as never };
      },
      async chunk(calls, _pj, first) {
        chunks.push({ first: first?.id, methods: calls.map((c) => c.method) });
        return calls.map((c) => answer(c.method));
      },
    },
    b.hooks,
  );
  return { r, chunks, singles, ...b };
}

const calls = (n: number, method = "eth_call") =>
  Array.from({ length: n }, (_, i) => ({ method: `${method}${i}`, params: [] }));

describe("upstream pool: batches", () => {
  it("spreads a batch over the healthy nodes in chunks of at least 10, each chunk on another node", async () => {
    const { r, chunks } = router(3);
    assert.equal(r.chunksFor(9), 1);
    assert.equal(r.chunksFor(25), 3);
    assert.equal(r.chunksFor(100), 3);
    const out = await r.call(calls(25));
    assert.equal(chunks.length, 3);
    assert.equal(new Set(chunks.map((c) => c.first)).size, 3, "three different nodes");
    assert.deepEqual(
      out.map((x) => x.ok && x.reply.tail),
      calls(25).map((c) => `,"result":"${c.method}"}`),
      "answers back in call order",
    );
  });

  it("sends the elements that need a particular node together, apart from the others, and counts them", async () => {
    const { r, chunks, metrics } = router(2);
    const batch = [
      { method: "eth_chainId", params: [] },
      { method: "eth_getBalance", params: ["0xaa", "0x5"] },
      { method: "eth_gasPrice", params: [] },
    ];
    assert.equal(r.sendsApart(batch), true);
    assert.equal(r.sendsApart([{ method: "eth_chainId", params: [] }]), false);
    const out = await r.call(batch);
    assert.deepEqual(chunks.map((c) => c.methods).sort(), [
      ["eth_chainId", "eth_gasPrice"],
      ["eth_getBalance"],
    ]);
    assert.deepEqual(
      out.map((x) => x.ok && x.reply.tail),
      [',"result":"eth_chainId"}', ',"result":"eth_getBalance"}', ',"result":"eth_gasPrice"}'],
    );
    assert.deepEqual(metrics.of("capability:"), ["capability:state:routed"]);
  });

  it("exchangesFor: the upstream exchanges call() starts, which a batch holds as in-flight slots", async () => {
    for (const [nodes, n, want] of [
      [1, 100, 1],
      [3, 9, 1],
      [3, 100, 3],
      [5, 25, 3],
    ] as const) {
      const { r, chunks } = router(nodes);
      assert.equal(r.exchangesFor(calls(n)), want, `${n} calls over ${nodes} nodes`);
      await r.call(calls(n));
      assert.equal(chunks.length, want, `${n} calls over ${nodes} nodes: exchanges made`);
    }
    // The elements that need a particular node: one exchange more, apart from the spread ones.
    const needy = router(2);
    const batch = [...calls(30), { method: "eth_getBalance", params: ["0xaa", "0x5"] }];
    assert.equal(needy.r.exchangesFor(batch), 3);
    await needy.r.call(batch);
    assert.equal(needy.chunks.length, 3);
    // A split eth_getLogs: one (its sub-calls are paced as a single call's), next to the chunks.
    const split = router(2, 100);
    const logs = { method: "eth_getLogs", params: [{ fromBlock: "0x0", toBlock: "0x12b" }] };
    assert.equal(split.r.exchangesFor([logs, ...calls(20)]), 3);
    assert.equal(split.r.exchangesFor([logs]), 1);
  });

  it("splits an eth_getLogs range into sub-calls on the nodes in turn when the network splits logs", async () => {
    const { r, singles, metrics } = router(2, 100);
    const logs = { method: "eth_getLogs", params: [{ fromBlock: "0x0", toBlock: "0x12b" }] };
    assert.equal(r.sendsApart([logs]), true);
    const out = await r.callSplit("eth_getLogs", r.logsSplit(logs.params)!);
    assert.equal(out.ok, true);
    assert.equal(singles.length, 3, "300 blocks in chunks of 100");
    assert.deepEqual(
      singles
        .slice(0, 2)
        .map((s) => s.split("@")[1])
        .sort(),
      ["u0", "u1"],
      "each node once before any twice",
    );
    assert.deepEqual(metrics.of("logsSplit:"), ["logsSplit:3:0"]);
  });
});
