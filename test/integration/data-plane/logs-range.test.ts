import assert from "node:assert/strict";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, sleep, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";
import { TestWsClient } from "./ws/ws-client";

const MAX = 10;
const hex = (n: number) => `0x${n.toString(16)}`;
const logs = (id: number, filter: Record<string, unknown>) => ({
  jsonrpc: "2.0",
  id,
  method: "eth_getLogs",
  params: [filter],
});

/** eth_getLogs block range per network, against a real node (anvil behind a counting proxy). */
describe("data plane: eth_getLogs maximum block range (real anvil)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let proxy: StubUpstream;
  let gw: Gateway;
  let key: string;
  let url: string;
  let head = 0;

  before(async () => {
    anvil = await startAnvil();
    proxy = await new StubUpstream(anvil.httpUrl).start();
    await post(anvil.httpUrl, { jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x14"] });
    gw = await startGateway({ CACHE_MAX_BYTES: "0" }, async (s) => {
      await s.putNetwork({
        ...evmNetwork("eth", [{ id: "anvil", httpUrl: proxy.url }]),
        maxLogsBlockRange: MAX,
      });
      // Published by an older control plane: no maxLogsBlockRange, the default applies.
      await s.putNetwork(evmNetwork("old", [{ id: "anvil", httpUrl: proxy.url }]));
      key = await s.putKey();
    });
    url = `${gw.base}/eth/rpc?apikey=${key}`;
    head = gw.plane.context.upstreams.get("eth")!.cacheHead();
    assert.equal(head, 20, "the pool knows the head before the range checks resolve tags");
  });

  after(async () => {
    await gw?.stop();
    await proxy?.stop();
    await anvil?.stop();
  });

  it("HTTP single: up to the limit is forwarded; one block more is a 400 Client Error naming the limit and the range", async () => {
    const ok = await post(url, logs(1, { fromBlock: "0x1", toBlock: hex(MAX) }));
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.json.result, []);
    proxy.reset();
    const r = await post(url, logs(7, { fromBlock: "0x0", toBlock: hex(MAX) }));
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.id, 7);
    assert.equal(r.json.error.code, -32602);
    assert.equal(
      r.json.error.message,
      `eth_getLogs block range too large: ${MAX + 1} blocks, max range ${MAX}`,
    );
    assert.match(r.json.error.message, /range/);
    assert.equal(r.json.error.data.category, "Client Error");
    assert.equal(r.json.error.data.reason, GatewayError.LogsRangeTooLarge.reason);
    assert.equal(r.json.error.data.limit, MAX);
    assert.equal(proxy.count("eth_getLogs"), 0, "a refused range never reaches the node");
  });

  it("resolves tags against the pool's head; blockHash filters have no range", async () => {
    const all = await post(url, logs(1, { fromBlock: "earliest", toBlock: "latest" }));
    assert.equal(all.status, 400);
    assert.match(all.json.error.message, new RegExp(`${head + 1} blocks, max range ${MAX}`));
    const noTo = await post(url, logs(2, { fromBlock: "0x1" }));
    assert.equal(noTo.status, 400, "toBlock absent = latest");
    const recent = await post(url, logs(3, { fromBlock: hex(head - MAX + 1), toBlock: "latest" }));
    assert.equal(recent.status, 200, recent.text);
    for (const tag of ["latest", "safe", "finalized", "pending"]) {
      const r = await post(url, logs(4, { fromBlock: tag, toBlock: tag }));
      assert.equal(r.status, 200, `${tag}: ${r.text}`);
    }
    const block = await post(url, {
      jsonrpc: "2.0",
      id: 5,
      method: "eth_getBlockByNumber",
      params: ["0x1", false],
    });
    const byHash = await post(url, logs(6, { blockHash: block.json.result.hash }));
    assert.equal(byHash.status, 200, byHash.text);
    assert.deepEqual(byHash.json.result, []);
    const filter = await post(url, {
      jsonrpc: "2.0",
      id: 8,
      method: "eth_newFilter",
      params: [{ fromBlock: "earliest" }],
    });
    assert.equal(filter.status, 400, filter.text);
    assert.match(filter.json.error.message, /^eth_newFilter block range too large/);
  });

  it("HTTP batch: the too-wide element gets its own error object, the others are answered", async () => {
    proxy.reset();
    const r = await post(url, [
      logs(1, { fromBlock: "0x1", toBlock: "0x2" }),
      logs(2, { fromBlock: "0x0", toBlock: hex(head) }),
      { jsonrpc: "2.0", id: 3, method: "eth_chainId" },
    ]);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json[0].result, []);
    assert.equal(r.json[1].id, 2);
    assert.equal(r.json[1].error.code, -32602);
    assert.equal(r.json[1].error.data.limit, MAX);
    assert.match(r.json[1].error.message, /range/);
    assert.equal(r.json[2].result, "0x7a69");
    assert.equal(proxy.count("eth_getLogs"), 1);
  });

  it("WebSocket: single and batch, same rule", async () => {
    const ws = await TestWsClient.open(`ws://127.0.0.1:${gw.port()}/eth/rpc?apikey=${key}`);
    try {
      const bad = await ws.call("eth_getLogs", [{ fromBlock: "earliest", toBlock: "latest" }]);
      assert.equal(bad.error.code, -32602);
      assert.equal(bad.error.data.reason, GatewayError.LogsRangeTooLarge.reason);
      assert.equal(bad.error.data.limit, MAX);
      assert.match(bad.error.message, /range/);
      const good = await ws.call("eth_getLogs", [{ fromBlock: "0x1", toBlock: "0x2" }]);
      assert.deepEqual(good.result, []);
      ws.sendRaw(
        JSON.stringify([
          logs(10, { fromBlock: "0x0", toBlock: hex(MAX) }),
          logs(11, { fromBlock: "0x1", toBlock: "0x1" }),
        ]),
      );
      await ws.until(() => ws.messages.some((m) => Array.isArray(m)), 5_000, "batch answer");
      const batch = ws.messages.find((m) => Array.isArray(m)) as {
        id: number;
        result?: unknown;
        error?: { code: number };
      }[];
      const byId = new Map(batch.map((m) => [m.id, m]));
      assert.equal(byId.get(10)?.error?.code, -32602);
      assert.deepEqual(byId.get(11)?.result, []);
    } finally {
      ws.close();
    }
  });

  it("a record without the setting gets the 10,000-block default; a republished record changes the limit live", async () => {
    const oldUrl = `${gw.base}/old/rpc?apikey=${key}`;
    const over = await post(oldUrl, logs(1, { fromBlock: "0x0", toBlock: hex(10_000) }));
    assert.equal(over.status, 400, over.text);
    assert.equal(over.json.error.message, "eth_getLogs block range too large: 10001 blocks, max range 10000");
    const within = await post(oldUrl, logs(2, { fromBlock: "0x0", toBlock: hex(9_999) }));
    assert.equal(within.status, 200, within.text);

    await gw.seeder.putNetwork({
      ...evmNetwork("eth", [{ id: "anvil", httpUrl: proxy.url }]),
      maxLogsBlockRange: 0,
    });
    await gw.seeder.publish({ type: "networks.update" });
    const deadline = Date.now() + 3_000;
    let r = await post(url, logs(3, { fromBlock: "earliest", toBlock: "latest" }));
    while (r.status !== 200 && Date.now() < deadline) {
      await sleep(50);
      r = await post(url, logs(3, { fromBlock: "earliest", toBlock: "latest" }));
    }
    assert.equal(r.status, 200, `0 = no limit: ${r.text}`);
  });
});
