import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { height } from "../../../data-plane/src/limits/logs-range";
import type { NodeRecord } from "../../../shared/src/redis/records";
import { eventually } from "../../helpers/eventually";
import { goField, goFold, goParse } from "../../helpers/go-json";
import { objectText, prng, shadowMember } from "../../helpers/json-fuzz";
import { TEST_REDIS_URL } from "../../helpers/redis";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "../data-plane/harness";
import { TestWsClient } from "../data-plane/ws/ws-client";
import { GoJsonNode, type Ran } from "./go-json-node";

const NODE_ID = "0d8e4b1a-5c2f-4e7d-9a61-3b2c1d0e9f87";
/** The network's eth_getLogs limit here: small, so a widened range is easy to tell. */
const MAX_RANGE = 100;

/**
 * What the gateway checks is what the node runs (contracts: "Member names"). Requests whose member names
 * a Go node (geth, erigon, bor) reads differently from JSON.parse (case, `ſ`, the Kelvin sign, repeats)
 * go through every path (HTTP and WebSocket, single and batch, shared network and dedicated node) to a
 * stand-in that decodes as Go does (go-json-node.ts); it must run only what the gateway policed.
 */
describe("hardening: member names a Go node reads differently (stand-in decoding as encoding/json)", function () {
  this.timeout(120_000);
  let node: GoJsonNode;
  let gw: Gateway;
  let redis: Redis;
  let appKey: string;
  let safeNodeKey: string;

  before(async () => {
    node = await new GoJsonNode().start();
    gw = await startGateway({ CACHE_MAX_BYTES: "0", UPSTREAM_COALESCE_MAX: "1" }, async (s) => {
      await s.putNetwork({
        ...evmNetwork("eth", [{ id: "go", httpUrl: node.url }]),
        maxLogsBlockRange: MAX_RANGE,
      });
      appKey = await s.putKey();
    });
    redis = new Redis(TEST_REDIS_URL);
    safeNodeKey = await gw.seeder.putKey({ kind: "node", appId: null, nodeId: NODE_ID, rpcMethods: "SAFE" });
    const rec: NodeRecord = {
      nodeId: NODE_ID,
      workspaceId: "ws-test",
      protocol: "EVM",
      httpUrl: node.url,
      wsUrl: null,
      status: "SYNCED",
    };
    await redis.set(gw.seeder.names.node(NODE_ID), JSON.stringify(rec));
    await gw.seeder.publish({ type: "node.update", nodeId: NODE_ID });
    // The range check resolves "latest" against the pool's head: wait until the probes have read it.
    await eventually(
      async () =>
        (await post(`${gw.base}/eth/rpc?apikey=${appKey}`, filterCall(1, "0xfff", "latest"))).status === 200,
      "the network's head known",
    );
    const n = await post(nodeUrl(), { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
    assert.equal(n.status, 200, n.text);
  });

  after(async () => {
    redis?.disconnect();
    await gw?.stop();
    await node?.stop();
  });

  it("the stand-in reads names as Go does: folded (ſ is s, the Kelvin sign is k), the last match winning", () => {
    assert.equal(goFold("param\u017f"), "PARAMS");
    assert.equal(goFold("fromBloc\u212a"), "FROMBLOCK");
    assert.equal(goFold("ß"), "ß", "no multi-character mappings");
    const o = goParse('{"method":"a","METHOD":"b","x":1,"m\\u0065thod":"c","Method":"d","params":[]}');
    assert.equal(goField(o, "method"), "d");
    assert.deepEqual(goField(o, "params"), []);
    assert.equal(goField(o, "id"), undefined);
    assert.throws(() => goParse('{"a":1'));
  });

  const appUrl = () => `${gw.base}/eth/rpc?apikey=${appKey}`;
  const nodeUrl = () => `${gw.base}/nodes/${NODE_ID}/${safeNodeKey}`;
  const wsUrl = (httpUrl: string) => httpUrl.replace(/^http/, "ws");

  function filterCall(id: number, from: string, to: string) {
    return { jsonrpc: "2.0", id, method: "eth_getLogs", params: [{ fromBlock: from, toBlock: to }] };
  }

  /** How the gateway reads a request text: JSON.parse (its batch scan reads the same, as tested). */
  function policed(text: string): { method: string; fromBlock?: unknown; toBlock?: unknown }[] {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      return [];
    }
    const list = (Array.isArray(v) ? v : [v]) as { method?: unknown; params?: unknown }[];
    return list.flatMap((o) => {
      if (o === null || typeof o !== "object" || typeof o.method !== "string") return [];
      const f = Array.isArray(o.params) ? (o.params[0] as Record<string, unknown> | undefined) : undefined;
      return [{ method: o.method, fromBlock: f?.fromBlock, toBlock: f?.toBlock }];
    });
  }

  /**
   * Checks that every call the node ran for `text` is one the gateway policed as such: the same method,
   * and for eth_getLogs a range within the one checked (a dedicated node has no range limit, so a wide
   * range may go upstream split into parts), within `maxRange` as Go reads it when the path has a limit.
   */
  function assertOnlyPoliced(text: string, ran: Ran[], maxRange: number | undefined): void {
    const checked = policed(text);
    const h = (v: unknown) => height(v, node.head);
    // What each path's policy refuses: the shared network debug_* and admin_*, a Safe node key admin_*.
    const refused = maxRange === undefined ? /^admin_/ : /^(admin|debug)_/;
    for (const r of ran) {
      assert.ok(!refused.test(r.method), `the node ran ${r.method} for ${text}`);
      const match = checked.find(
        (c) =>
          c.method === r.method &&
          (r.method !== "eth_getLogs" ||
            (r.blockHash === undefined && h(r.fromBlock) >= h(c.fromBlock) && h(r.toBlock) <= h(c.toBlock))),
      );
      assert.ok(match, `the node ran ${JSON.stringify(r)}, which the gateway never checked, for ${text}`);
      if (r.method === "eth_getLogs" && maxRange !== undefined) {
        const span = h(r.toBlock) - h(r.fromBlock) + 1;
        assert.ok(span <= maxRange, `the node scanned ${span} blocks for ${text}`);
      }
    }
  }

  /** Sends a request text and resolves to the answer's text; `maxRange`: the path's eth_getLogs limit. */
  type Send = ((text: string) => Promise<string>) & { maxRange?: number };
  const limitOf = (url: () => string) => (url === appUrl ? MAX_RANGE : undefined);

  function viaHttp(url: () => string): Send {
    const send: Send = async (text) => {
      const r = await post(url(), text);
      assert.ok(r.status < 500, `${r.status} ${r.text}`);
      return r.text;
    };
    send.maxRange = limitOf(url);
    return send;
  }

  async function viaWs(url: () => string): Promise<{ send: Send; close(): void }> {
    const ws = await TestWsClient.open(wsUrl(url()));
    const send: Send = async (text) => {
      const n = ws.messages.length;
      ws.sendRaw(text);
      await ws.until(() => ws.messages.length > n, 5000, `answer to ${text}`);
      return JSON.stringify(ws.messages[n]);
    };
    send.maxRange = limitOf(url);
    return { send, close: () => ws.close() };
  }

  /** Sends `text` with `send` and checks what the stand-in ran meanwhile. */
  async function attempt(send: Send, text: string): Promise<Ran[]> {
    const from = node.ran.length;
    const answer = await send(text);
    const ran = node.since(from);
    assertOnlyPoliced(text, ran, send.maxRange);
    assert.ok(answer.length > 0, `no answer to ${text}`);
    return ran;
  }

  const SMUGGLED_METHOD = [
    // The issue's own example, then other spellings Go folds to "method" / "params".
    '{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","METHOD":"debug_traceBlockByNumber","PARAMS":["0x1",{}]}',
    '{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","Method":"admin_addPeer","params":[]}',
    '{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","mEtHoD":"admin_addPeer"}',
    '{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","params":[],"param\u017f":["0x1",{}],"METHOD":"debug_traceBlockByNumber"}',
    '{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","ID":2,"METHOD":"admin_addPeer"}',
    '{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","M\\u0045THOD":"admin_addPeer"}',
  ];
  const WIDENED_RANGE = [
    // The example: 2 blocks to the gateway, the whole chain to geth.
    '{"fromBlock":"0xf00","toBlock":"0xf01","FromBlock":"0x0","ToBlock":"latest"}',
    '{"fromBlock":"0xf00","toBlock":"0xf01","fromBloc\u212a":"0x0"}',
    '{"FROMBLOCK":"0x0","fromBlock":"0xf00","toBlock":"0xf01","TOBLOCK":"0x0"}',
    '{"fromBlock":"0xf00","toBlock":"0xf01","fromblock":"earliest","blockhash":"0x01"}',
  ];

  for (const [name, url, ws] of [
    ["shared network", appUrl, false],
    ["shared network over WebSocket", appUrl, true],
    ["dedicated node (Safe)", nodeUrl, false],
    ["dedicated node over WebSocket", nodeUrl, true],
  ] as const) {
    it(`${name}: a method or params hidden under another spelling never runs, single or batch`, async () => {
      const w = ws ? await viaWs(url) : undefined;
      const send = w?.send ?? viaHttp(url);
      try {
        let ranGasPrice = 0;
        for (const text of SMUGGLED_METHOD) {
          for (const body of [text, `[${text}]`, `[${text},${text.replace('"id":1', '"id":3')}]`]) {
            const ran = await attempt(send, body);
            ranGasPrice += ran.filter((r) => r.method === "eth_gasPrice").length;
          }
        }
        // The policed method did run (the requests were forwarded, not refused): re-serialised.
        assert.equal(ranGasPrice, SMUGGLED_METHOD.length * 4);
      } finally {
        w?.close();
      }
    });

    it(`${name}: an eth_getLogs filter goes upstream as the range checked, single or batch`, async () => {
      const w = ws ? await viaWs(url) : undefined;
      const send = w?.send ?? viaHttp(url);
      try {
        for (const filter of WIDENED_RANGE) {
          const call = `{"jsonrpc":"2.0","id":7,"method":"eth_getLogs","params":[${filter}]}`;
          for (const body of [call, `[${call},{"jsonrpc":"2.0","id":8,"method":"eth_chainId"}]`]) {
            const ran = await attempt(send, body);
            const logs = ran.filter((r) => r.method === "eth_getLogs");
            assert.equal(logs.length, 1, `forwarded once: ${body}`);
            assert.equal(logs[0]!.fromBlock, "0xf00");
            assert.equal(logs[0]!.toBlock, "0xf01");
            assert.equal(logs[0]!.blockHash, undefined);
          }
        }
      } finally {
        w?.close();
      }
    });
  }

  it("a verbatim batch with only the four members still goes upstream as the client's bytes", async () => {
    const body = '[{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","params":[]}]';
    const before = node.bodies.length;
    await attempt(viaHttp(appUrl), body);
    assert.ok(node.bodies.slice(before).includes(body), "sent as it came");
    // With one more member, however spelt, it is re-serialised with the four only.
    const other = '[{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","params":[],"Jsonrpc":"1.0"}]';
    const at = node.bodies.length;
    await attempt(viaHttp(appUrl), other);
    const sent = node.bodies.slice(at).filter((b) => b.includes("eth_gasPrice"));
    assert.equal(sent.length, 1);
    assert.ok(!sent[0]!.includes("Jsonrpc"), sent[0]);
  });

  it("fuzz: member names shadowed the ways Go reads them, over every path, run only what was policed", async () => {
    const rnd = prng(0x5eed24);
    const wsApp = await viaWs(appUrl);
    const wsNode = await viaWs(nodeUrl);
    const paths: Send[] = [viaHttp(appUrl), wsApp.send, viaHttp(nodeUrl), wsNode.send];
    const CASES = 400;
    let forwarded = 0;
    let shadowed = 0;
    try {
      for (let i = 0; i < CASES; i++) {
        const elements: string[] = [];
        const count = rnd() < 0.5 ? 1 : 1 + Math.floor(rnd() * 3);
        for (let e = 0; e < count; e++) {
          const logs = rnd() < 0.5;
          let filter: [string, string][] = [
            ["fromBlock", '"0xf00"'],
            ["toBlock", '"0xf01"'],
          ];
          const pick = rnd();
          if (logs && pick < 0.4) {
            const wide =
              rnd() < 0.5 ? ["fromBlock", '"0x0"'] : ["toBlock", rnd() < 0.5 ? '"latest"' : '"0xffff"'];
            filter = shadowMember(filter, wide[0]!, wide[1]!, rnd);
          }
          let members: [string, string][] = [
            ["jsonrpc", '"2.0"'],
            ["id", String(i * 10 + e)],
            ["method", logs ? '"eth_getLogs"' : '"eth_gasPrice"'],
            ["params", logs ? `[${objectText(filter, rnd)}]` : "[]"],
          ];
          if (pick >= 0.4 && pick < 0.75) {
            const hidden = rnd() < 0.5 ? '"debug_traceBlockByNumber"' : '"admin_addPeer"';
            members = shadowMember(members, "method", hidden, rnd);
          } else if (pick >= 0.75 || !logs) {
            const wide = logs
              ? '[{"fromBlock":"0x0","toBlock":"latest"}]'
              : '["0x1",{"tracer":"callTracer"}]';
            members = shadowMember(members, "params", wide, rnd);
          }
          elements.push(objectText(members, rnd));
          shadowed++;
        }
        const text = count === 1 && rnd() < 0.5 ? elements[0]! : `[${elements.join(",")}]`;
        const ran = await attempt(paths[i % paths.length]!, text);
        forwarded += ran.length;
      }
    } finally {
      wsApp.close();
      wsNode.close();
    }
    console.log(
      `      fuzz: ${CASES} requests, ${shadowed} calls with a shadowed member, ${forwarded} reached the node`,
    );
    // Most shadowed calls were still forwarded (as what was checked): the fuzz reached the node.
    assert.ok(forwarded > shadowed / 3, `${forwarded} of ${shadowed} calls reached the node`);
    // And the gateway is still up and answering.
    const r = await post(appUrl(), { jsonrpc: "2.0", id: 1, method: "eth_chainId" });
    assert.equal(r.json.result, "0x7a69");
  });
});
