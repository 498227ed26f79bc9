import assert from "node:assert/strict";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { ANVIL_DETERMINISTIC_ARGS, EMIT_TOPIC, LogHistory, word } from "../../helpers/evm-logs";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";
import { TestWsClient } from "./ws/ws-client";

const hex = (n: number) => `0x${n.toString(16)}`;
const num = (v: unknown) => Number.parseInt(String(v), 16);
const logs = (id: number, filter: Record<string, unknown>) => ({
  jsonrpc: "2.0",
  id,
  method: "eth_getLogs",
  params: [filter],
});

/** Blocks per sub-range on the main test network: small, so a ~100-block history makes many sub-calls. */
const CHUNK = 7;
/** The refusing stub's node-side range cap (blocks), and the chunk its network starts with. */
const NODE_MAX_RANGE = 5;
const REFUSING_CHUNK = 40;

/** Sample lines of one metric family in a /metrics text. */
function samples(metrics: string, name: string): string[] {
  return metrics.split("\n").filter((l) => l.startsWith(`${name}{`));
}

/** The numeric block range of an eth_getLogs call as a stub saw it (undefined for tags / absent). */
function rangeOf(params: unknown): [number, number] | undefined {
  const f = (params as { fromBlock?: unknown; toBlock?: unknown }[] | undefined)?.[0];
  const from = f?.fromBlock;
  const to = f?.toBlock;
  if (typeof from !== "string" || typeof to !== "string" || !from.startsWith("0x") || !to.startsWith("0x")) {
    return undefined;
  }
  return [num(from), num(to)];
}

/**
 * Issue 14 §4: eth_getLogs over a range longer than the network's logsChunkBlocks is split into sub-ranges
 * sent in parallel across the upstreams and merged in order. Two real anvil nodes with the same history
 * (logs spread over ~100 blocks, several per block in places) behind counting proxies; the gateway's answer
 * is compared byte for byte with anvil's own answer to the same request. Stubs only inject faults (a node
 * refusing ranges over N blocks, a failing sub-range).
 */
describe("data plane: eth_getLogs split across upstreams (real anvil)", function () {
  this.timeout(120_000);
  let nodeA: Anvil;
  let nodeB: Anvil;
  let proxyA: StubUpstream;
  let proxyB: StubUpstream;
  /** Proxies to node A; refuses eth_getLogs ranges over NODE_MAX_RANGE blocks as Infura does. */
  let refusing: StubUpstream;
  /** Proxies to node A; fails one sub-range with a node error that is no range refusal. */
  let failing: StubUpstream;
  /** Answers every eth_getLogs with [] by itself (no node behind). */
  let empty: StubUpstream;
  const refusedRanges: [number, number][] = [];
  const servedRanges: [number, number][] = [];
  let history: LogHistory;
  let gw: Gateway;
  let key: string;
  let head = 0;
  const url = (slug = "eth") => `${gw.base}/${slug}/rpc?apikey=${key}`;
  const direct = (body: object) => post(nodeA.httpUrl, body);

  before(async () => {
    [nodeA, nodeB] = await Promise.all([
      startAnvil({ args: ANVIL_DETERMINISTIC_ARGS }),
      startAnvil({ args: ANVIL_DETERMINISTIC_ARGS }),
    ]);
    history = new LogHistory([nodeA.httpUrl, nodeB.httpUrl]);
    await history.init();
    await history.deployEmitter();
    await history.deployEmitter();
    // 40 blocks with logs, 0-3 empty blocks after each; every 7th holds three logs (logIndex 0, 1, 2).
    for (let i = 0; i < 40; i++) {
      await history.emitBlock(i % 2, i % 7 === 0 ? [i % 5, (i + 1) % 5, (i + 2) % 5] : [i % 5]);
      await history.mine(i % 4);
    }
    head = await history.head();

    proxyA = await new StubUpstream(nodeA.httpUrl).start();
    proxyB = await new StubUpstream(nodeB.httpUrl).start();
    refusing = await new StubUpstream(nodeA.httpUrl).start();
    refusing.intercept = (c) => {
      if (c.method !== "eth_getLogs") return undefined;
      const r = rangeOf(c.params);
      if (r === undefined || r[1] - r[0] + 1 <= NODE_MAX_RANGE) {
        if (r !== undefined) servedRanges.push(r);
        return undefined;
      }
      refusedRanges.push(r);
      return {
        error: {
          code: -32005,
          message: "query returned more than 10000 results",
          data: { from: hex(r[0]), to: hex(r[0] + NODE_MAX_RANGE - 1), limit: 10000 },
        },
      };
    };
    failing = await new StubUpstream(nodeA.httpUrl).start();
    failing.intercept = (c) => {
      const r = c.method === "eth_getLogs" ? rangeOf(c.params) : undefined;
      if (r === undefined || r[0] > 30 || r[1] < 30) return undefined;
      return { error: { code: -32000, message: "leveldb: closed" } };
    };
    empty = await new StubUpstream().start();
    empty.intercept = (c) => (c.method === "eth_getLogs" ? { result: [] } : undefined);

    gw = await startGateway({ CACHE_MAX_BYTES: "0" }, async (s) => {
      const up = (id: string, u: StubUpstream) => ({ id, httpUrl: u.url });
      await s.putNetwork({
        ...evmNetwork("eth", [up("a", proxyA), up("b", proxyB)]),
        maxLogsBlockRange: 0,
        logsChunkBlocks: CHUNK,
      });
      await s.putNetwork({
        ...evmNetwork("whole", [up("a", proxyA)]),
        maxLogsBlockRange: 0,
        logsChunkBlocks: 0,
      });
      await s.putNetwork({
        ...evmNetwork("refusing", [up("r", refusing)]),
        maxLogsBlockRange: 0,
        logsChunkBlocks: REFUSING_CHUNK,
      });
      await s.putNetwork({
        ...evmNetwork("failing", [up("f", failing)]),
        maxLogsBlockRange: 0,
        logsChunkBlocks: CHUNK,
      });
      // Published by an older control plane: no logsChunkBlocks, the default (2,000) applies.
      await s.putNetwork(evmNetwork("dflt", [up("e", empty)]));
      key = await s.putKey();
    });
    await eventually(
      () => gw.plane.context.upstreams.get("eth")!.cacheHead() === head,
      "the pool to know the head",
    );
  });

  after(async () => {
    await gw?.stop();
    for (const s of [proxyA, proxyB, refusing, failing, empty]) await s?.stop();
    await nodeA?.stop();
    await nodeB?.stop();
  });

  it("the two nodes hold the same history: identical heads, block hashes and logs", async () => {
    const block = { jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: [hex(head), false] };
    const [a, b] = await Promise.all([post(nodeA.httpUrl, block), post(nodeB.httpUrl, block)]);
    assert.equal(a.json.result.hash, b.json.result.hash);
    const all = logs(1, { fromBlock: "earliest", toBlock: "latest" });
    const [la, lb] = await Promise.all([post(nodeA.httpUrl, all), post(nodeB.httpUrl, all)]);
    assert.equal(la.text, lb.text);
    assert.equal(la.json.result.length, 40 + 2 * 6, "one log per emit block, three in every 7th");
    assert.ok(head > 10 * CHUNK, `history spans many chunks (head ${head})`);
  });

  it("HTTP: the whole range, numbers and tags, address and topic filters: byte-identical to anvil's answer, sub-calls on both nodes", async () => {
    const [e0, e1] = history.emitters;
    const cases: { filter: Record<string, unknown>; from: number; to: number; nonEmpty: boolean }[] = [
      { filter: { fromBlock: "0x0", toBlock: hex(head) }, from: 0, to: head, nonEmpty: true },
      { filter: { fromBlock: "earliest", toBlock: "latest" }, from: 0, to: head, nonEmpty: true },
      { filter: { fromBlock: "earliest" }, from: 0, to: head, nonEmpty: true },
      {
        filter: { fromBlock: "0x3", toBlock: hex(head - 2), address: e0 },
        from: 3,
        to: head - 2,
        nonEmpty: true,
      },
      {
        filter: {
          fromBlock: "0x01",
          toBlock: "LATEST",
          address: [e0, e1],
          topics: [EMIT_TOPIC, [word(1), word(3)]],
        },
        from: 1,
        to: head,
        nonEmpty: true,
      },
      {
        filter: { fromBlock: "0x5", toBlock: hex(head), topics: [null, word(2)] },
        from: 5,
        to: head,
        nonEmpty: true,
      },
      {
        filter: { fromBlock: "0x0", toBlock: hex(head), topics: [word(9)] },
        from: 0,
        to: head,
        nonEmpty: false,
      },
    ];
    for (const c of cases) {
      proxyA.reset();
      proxyB.reset();
      const body = logs(1, c.filter);
      const g = await post(url(), body);
      const d = await direct(body);
      assert.equal(g.status, 200, g.text);
      assert.equal(d.json.result.length > 0, c.nonEmpty, `${JSON.stringify(c.filter)}: ${d.text}`);
      assert.equal(g.text, d.text, JSON.stringify(c.filter));
      const subCalls = Math.ceil((c.to - c.from + 1) / CHUNK);
      assert.equal(
        proxyA.count("eth_getLogs") + proxyB.count("eth_getLogs"),
        subCalls,
        JSON.stringify(c.filter),
      );
      assert.ok(
        proxyA.count("eth_getLogs") >= 2 && proxyB.count("eth_getLogs") >= 2,
        "spread over both nodes",
      );
      assert.ok(
        proxyA.peakInFlight("eth_getLogs") + proxyB.peakInFlight("eth_getLogs") > 1,
        "sub-calls in parallel",
      );
    }
    // The logs span the whole range: the merge joined many sub-ranges, in block then logIndex order.
    const all = (await post(url(), logs(1, { fromBlock: "earliest", toBlock: "latest" }))).json.result as {
      blockNumber: string;
      logIndex: string;
    }[];
    const keys = all.map((l) => [num(l.blockNumber), num(l.logIndex)] as const);
    const sorted = [...keys].sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    assert.deepEqual(keys, sorted);
    assert.ok(new Set(keys.map(([b]) => Math.floor(b / CHUNK))).size > 10, "logs from many sub-ranges");
    assert.ok(
      keys.some(([, i]) => i === 2),
      "blocks with several logs",
    );
  });

  it("goes out whole: a range within the chunk, a blockHash filter, head-tag ranges, chunk 0", async () => {
    const block = await direct({
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getBlockByNumber",
      params: ["0x3", false],
    });
    const whole: [string, Record<string, unknown>][] = [
      ["eth", { fromBlock: "0x3", toBlock: hex(3 + CHUNK - 1) }],
      ["eth", { blockHash: block.json.result.hash }],
      ["eth", { fromBlock: "latest", toBlock: "latest" }],
      ["eth", { fromBlock: "0x0", toBlock: "finalized" }],
      ["whole", { fromBlock: "earliest", toBlock: "latest" }],
    ];
    for (const [slug, filter] of whole) {
      proxyA.reset();
      proxyB.reset();
      const body = logs(3, filter);
      const g = await post(url(slug), body);
      assert.equal(g.status, 200, g.text);
      assert.equal(g.text, (await direct(body)).text, JSON.stringify(filter));
      assert.equal(
        proxyA.count("eth_getLogs") + proxyB.count("eth_getLogs"),
        1,
        `${slug} ${JSON.stringify(filter)}`,
      );
    }
  });

  it("HTTP batch: split elements next to others, each answered as anvil answers it, in request order", async () => {
    const [e0] = history.emitters;
    const batch = [
      logs(1, { fromBlock: "earliest", toBlock: "latest" }),
      { jsonrpc: "2.0", id: 2, method: "eth_chainId" },
      logs(3, { fromBlock: "0x2", toBlock: "0x4" }),
      logs(4, { fromBlock: "0x0", toBlock: hex(head), address: e0, topics: [EMIT_TOPIC] }),
      logs(5, { fromBlock: hex(head), toBlock: "0x0" }),
    ];
    proxyA.reset();
    proxyB.reset();
    const g = await post(url(), batch);
    assert.equal(g.status, 200, g.text);
    const d = await direct(batch);
    assert.deepEqual(
      g.json.map((m: { id: number }) => m.id),
      [1, 2, 3, 4, 5],
    );
    assert.deepEqual(g.json, d.json);
    assert.ok(g.json[0].result.length > 0 && g.json[3].result.length > 0);
    // Two split elements of ceil((head + 1) / CHUNK) sub-calls each, the small and inverted ones whole.
    const split = Math.ceil((head + 1) / CHUNK);
    assert.equal(proxyA.count("eth_getLogs") + proxyB.count("eth_getLogs"), 2 * split + 2);
  });

  it("WebSocket: single and batch calls are split the same way", async () => {
    const ws = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`);
    try {
      const filter = { fromBlock: "earliest", toBlock: "latest", topics: [EMIT_TOPIC] };
      proxyA.reset();
      proxyB.reset();
      const one = await ws.call("eth_getLogs", [filter]);
      const d = await direct(logs(1, filter));
      assert.deepEqual(one.result, d.json.result);
      assert.equal(proxyA.count("eth_getLogs") + proxyB.count("eth_getLogs"), Math.ceil((head + 1) / CHUNK));
      ws.sendRaw(JSON.stringify([logs(70, filter), logs(71, { fromBlock: "0x1", toBlock: "0x1" })]));
      await ws.until(() => ws.messages.some((m) => Array.isArray(m)), 10_000, "batch answer");
      const batch = ws.messages.find((m) => Array.isArray(m)) as { id: number; result?: unknown }[];
      const byId = new Map(batch.map((m) => [m.id, m]));
      assert.deepEqual(byId.get(70)?.result, d.json.result);
      assert.deepEqual(
        byId.get(71)?.result,
        (await direct(logs(71, { fromBlock: "0x1", toBlock: "0x1" }))).json.result,
      );
    } finally {
      ws.close();
    }
  });

  it("a node's range refusal halves the sub-range until it is accepted: same answer, halvings counted", async () => {
    refusedRanges.length = 0;
    servedRanges.length = 0;
    const filter = { fromBlock: "0x0", toBlock: hex(head) };
    const g = await post(url("refusing"), logs(1, filter));
    assert.equal(g.status, 200, g.text);
    assert.equal(g.text, (await direct(logs(1, filter))).text);
    // 40 -> 20 -> 10 -> 5 blocks: the first sub-range is refused at each size, then served in pieces of 5.
    const refused = JSON.stringify(refusedRanges);
    for (const r of [
      [0, 39],
      [0, 19],
      [0, 9],
    ]) {
      assert.ok(refused.includes(JSON.stringify(r)), `${JSON.stringify(r)} refused: ${refused}`);
    }
    assert.ok(refusedRanges.every(([a, b]) => b - a + 1 > NODE_MAX_RANGE));
    assert.ok(servedRanges.every(([a, b]) => b - a + 1 <= NODE_MAX_RANGE));
    const served = [...servedRanges].sort((x, y) => x[0] - y[0]);
    let next = 0;
    for (const [a, b] of served) {
      assert.equal(a, next, `every block served exactly once: ${JSON.stringify(served)}`);
      next = b + 1;
    }
    assert.equal(next, head + 1);
    const m = await (await fetch(`${gw.metricsBase}/metrics`)).text();
    const halvings = samples(m, "rpcgw_logs_split_halvings_total").find((l) =>
      l.includes('network="refusing"'),
    );
    assert.equal(halvings, `rpcgw_logs_split_halvings_total{network="refusing"} ${refusedRanges.length}`);
    const subCalls = samples(m, "rpcgw_logs_split_subcalls_total").find((l) =>
      l.includes('network="refusing"'),
    );
    assert.equal(
      subCalls,
      `rpcgw_logs_split_subcalls_total{network="refusing"} ${refusedRanges.length + servedRanges.length}`,
    );
    assert.ok(samples(m, "rpcgw_logs_split_calls_total").some((l) => /network="eth"\} [1-9]/.test(l)));
  });

  it("one block still refused: the client gets the node's refusal (no partial result)", async () => {
    const saved = refusing.intercept;
    refusing.intercept = (c) =>
      c.method === "eth_getLogs"
        ? { error: { code: -32005, message: "query returned more than 10000 results" } }
        : undefined;
    try {
      const g = await post(url("refusing"), logs(9, { fromBlock: "0x0", toBlock: hex(head) }));
      assert.equal(g.status, 200, g.text);
      assert.deepEqual(g.json, {
        jsonrpc: "2.0",
        id: 9,
        error: { code: -32005, message: "query returned more than 10000 results" },
      });
      assert.ok(!("result" in g.json));
    } finally {
      refusing.intercept = saved;
    }
  });

  it("any other error of a sub-range fails the whole call with that error", async () => {
    failing.reset();
    const g = await post(url("failing"), logs(4, { fromBlock: "0x0", toBlock: hex(head) }));
    assert.equal(g.status, 200, g.text);
    assert.deepEqual(g.json, { jsonrpc: "2.0", id: 4, error: { code: -32000, message: "leveldb: closed" } });
    // A range not touching block 30 is unaffected.
    const ok = await post(url("failing"), logs(5, { fromBlock: "0x0", toBlock: "0x1c" }));
    assert.equal(ok.text, (await direct(logs(5, { fromBlock: "0x0", toBlock: "0x1c" }))).text);

    failing.mode = "error500";
    try {
      const bad = await post(url("failing"), logs(6, { fromBlock: "0x0", toBlock: hex(head) }));
      assert.equal(bad.status, GatewayError.UpstreamBadResponse.httpStatus, bad.text);
      assert.equal(bad.json.error.data.reason, GatewayError.UpstreamBadResponse.reason);
      assert.ok(!("result" in bad.json));
    } finally {
      failing.mode = "ok";
    }
  });

  it("a record without logsChunkBlocks splits at 2,000 blocks; a republished record changes the chunk live", async () => {
    empty.reset();
    const g = await post(url("dflt"), logs(1, { fromBlock: "0x0", toBlock: hex(4000) }));
    assert.equal(g.status, 200, g.text);
    assert.deepEqual(g.json.result, []);
    assert.equal(empty.count("eth_getLogs"), 3, "[0,1999] [2000,3999] [4000,4000]");

    await gw.seeder.putNetwork({
      ...evmNetwork("dflt", [{ id: "e", httpUrl: empty.url }]),
      logsChunkBlocks: 1000,
    });
    await gw.seeder.publish({ type: "networks.update" });
    await eventually(async () => {
      empty.reset();
      await post(url("dflt"), logs(2, { fromBlock: "0x0", toBlock: hex(4000) }));
      return empty.count("eth_getLogs") === 5;
    }, "chunk 1000: five sub-calls");
  });

  describe("with few heavy slots and a small response cap", () => {
    let gw2: Gateway;
    let cap = 0;
    before(async () => {
      // Largest answer of one CHUNK-block sub-range, and the whole range's answer: the cap lies between.
      let largest = 0;
      for (let a = 0; a <= head; a += CHUNK) {
        const r = await direct(logs(1, { fromBlock: hex(a), toBlock: hex(Math.min(head, a + CHUNK - 1)) }));
        largest = Math.max(largest, r.text.length);
      }
      const whole = (await direct(logs(1, { fromBlock: "0x0", toBlock: hex(head) }))).text.length;
      assert.ok(largest * 3 < whole, `sub-range answers (${largest}) far below the whole (${whole})`);
      cap = Math.floor(whole / 2);
      gw2 = await startGateway(
        {
          CACHE_MAX_BYTES: "0",
          // 4 connections, 25% for heavy calls: one eth_getLogs at a time per node.
          UPSTREAM_CONNECTIONS: "4",
          UPSTREAM_HEAVY_SHARE_PERCENT: "25",
          LOGS_SPLIT_CONCURRENCY: "8",
          UPSTREAM_MAX_RESPONSE_BYTES: String(cap),
        },
        async (s) => {
          await s.putNetwork({
            ...evmNetwork("eth", [
              { id: "a", httpUrl: proxyA.url },
              { id: "b", httpUrl: proxyB.url },
            ]),
            maxLogsBlockRange: 0,
            logsChunkBlocks: CHUNK,
          });
          await s.putNetwork({
            ...evmNetwork("whole", [{ id: "a", httpUrl: proxyA.url }]),
            maxLogsBlockRange: 0,
            logsChunkBlocks: 0,
          });
          await s.putKey({}, key);
        },
      );
    });
    after(async () => {
      await gw2?.stop();
    });

    it("every sub-call takes a heavy slot: at most one eth_getLogs per node at a time, and the split still completes", async () => {
      proxyA.reset();
      proxyB.reset();
      proxyA.methodDelayMs.set("eth_getLogs", 20);
      proxyB.methodDelayMs.set("eth_getLogs", 20);
      try {
        const filter = { fromBlock: "0x0", toBlock: hex(Math.floor(head / 3)) };
        const g = await post(`${gw2.base}/eth/rpc?apikey=${key}`, logs(1, filter));
        assert.equal(g.status, 200, g.text);
        assert.equal(g.text, (await direct(logs(1, filter))).text);
        assert.equal(proxyA.peakInFlight("eth_getLogs"), 1);
        assert.equal(proxyB.peakInFlight("eth_getLogs"), 1);
        assert.equal(
          proxyA.count("eth_getLogs") + proxyB.count("eth_getLogs"),
          Math.ceil((Math.floor(head / 3) + 1) / CHUNK),
        );
      } finally {
        proxyA.methodDelayMs.delete("eth_getLogs");
        proxyB.methodDelayMs.delete("eth_getLogs");
      }
    });

    it("a merged answer over UPSTREAM_MAX_RESPONSE_BYTES gets the too-large row, as one node's answer does", async () => {
      const filter = { fromBlock: "0x0", toBlock: hex(head) };
      const split = await post(`${gw2.base}/eth/rpc?apikey=${key}`, logs(1, filter));
      const whole = await post(`${gw2.base}/whole/rpc?apikey=${key}`, logs(1, filter));
      for (const r of [split, whole]) {
        assert.equal(r.status, GatewayError.UpstreamResponseTooLarge.httpStatus, r.text);
        assert.equal(r.json.error.data.reason, GatewayError.UpstreamResponseTooLarge.reason);
        assert.match(r.json.error.message, new RegExp(`of ${cap} bytes`));
      }
      assert.equal(split.json.error.message, whole.json.error.message);
      // A third of the range fits: answered in full.
      const part = { fromBlock: "0x0", toBlock: hex(Math.floor(head / 3)) };
      const ok = await post(`${gw2.base}/eth/rpc?apikey=${key}`, logs(2, part));
      assert.equal(ok.text, (await direct(logs(2, part))).text);
    });
  });
});
