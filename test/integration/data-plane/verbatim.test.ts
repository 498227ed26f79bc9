import assert from "node:assert/strict";
import { evmNetwork } from "../../helpers/seed-redis";
import { type Gateway, post, startGateway } from "./harness";
import { StubUpstream } from "./stub-upstream";

/**
 * Verbatim batches (data-plane/src/forward/verbatim.ts): a batch whose every element is forwarded goes
 * upstream as the client's text and comes back as the node's; anything the checks could be fooled by
 * takes the usual, re-serialising path.
 */
describe("data plane verbatim batches", function () {
  this.timeout(60_000);
  let stub: StubUpstream;
  let gw: Gateway;
  let url: string;

  before(async () => {
    stub = await new StubUpstream().start();
    let key = "";
    gw = await startGateway({ CACHE_MAX_BYTES: "0", UPSTREAM_COALESCE_MAX: "1" }, async (s) => {
      await s.putNetwork(evmNetwork("eth", [{ id: "stub", httpUrl: stub.url }]));
      key = await s.putKey();
    });
    url = `${gw.base}/eth/rpc?apikey=${key}`;
  });

  after(async () => {
    await gw?.stop();
    await stub?.stop();
  });

  /** Batch bodies the stub received (health probes are single calls). */
  const batchBodies = () => stub.bodies.filter((b) => b.startsWith("["));

  /** The gateway's request counter for `category` on network eth. */
  async function counted(category: string): Promise<number> {
    const text = await (await fetch(`${gw.metricsBase}/metrics`)).text();
    const m = new RegExp(`^rpcgw_requests_total\\{network="eth",category="${category}"\\} (\\d+)$`, "m").exec(
      text,
    );
    return Number(m?.[1] ?? 0);
  }

  it("sends the client's text upstream as it is and answers with the node's text; categories read from it", async () => {
    stub.reset();
    const body =
      '[{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0x01","latest"]},' +
      ' {"jsonrpc":"2.0","id":"b","method":"stub_error"},{"jsonrpc":"2.0","method":"eth_call","params":[{}]}]';
    const nodeErrorsBefore = await counted("Node Error");
    const successBefore = await counted("Success");
    const r = await post(url, body);
    assert.equal(r.status, 200);
    assert.deepEqual(batchBodies(), [body], "the client's bytes, ids and all");
    assert.deepEqual(r.json, [
      { jsonrpc: "2.0", id: 7, result: { method: "eth_getBalance", params: ["0x01", "latest"] } },
      { jsonrpc: "2.0", id: "b", error: { code: -32000, message: "execution reverted" } },
      { jsonrpc: "2.0", id: null, result: { method: "eth_call", params: [{}] } },
    ]);
    // Every element counted once, under its own category (the stub answers the notification too: its
    // answer is the node's to send; the gateway counts the element as a success).
    assert.equal((await counted("Node Error")) - nodeErrorsBefore, 1);
    assert.equal((await counted("Success")) - successBefore, 2);
  });

  it("a repeated method key never reaches the node as it was sent (the node might read the first one)", async () => {
    stub.reset();
    // JSON.parse keeps the last key: this element is eth_chainId to the gateway's policy.
    const hidden = '[{"jsonrpc":"2.0","id":1,"method":"admin_addPeer","method":"eth_chainId","params":[]}]';
    const r = await post(url, hidden);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, [{ jsonrpc: "2.0", id: 1, result: "0x7a69" }]);
    assert.equal(batchBodies().length, 1);
    assert.ok(!batchBodies()[0]!.includes("admin_addPeer"), batchBodies()[0]);
    // The other order is the blocked method to the gateway: refused, nothing sent.
    stub.reset();
    const blocked = await post(
      url,
      '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"admin_addPeer"}]',
    );
    assert.equal(blocked.json[0].error.code, -32601);
    assert.equal(batchBodies().length, 0);
  });

  it("a member spelt with an escape is that member: a repeat so hidden never reaches the node as sent", async () => {
    stub.reset();
    // To JSON.parse (and to nodes) "m\u0065thod" is "method": the element is eth_chainId, the last one.
    const hidden = '[{"jsonrpc":"2.0","id":1,"m\\u0065thod":"admin_addPeer","method":"eth_chainId"}]';
    const r = await post(url, hidden);
    assert.deepEqual(r.json, [{ jsonrpc: "2.0", id: 1, result: "0x7a69" }]);
    assert.equal(batchBodies().length, 1);
    assert.ok(!batchBodies()[0]!.includes("admin_addPeer"), batchBodies()[0]);
    // Repeated params of any call are re-serialised too (the scan knows the element's own members).
    stub.reset();
    await post(url, '[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x1"}],"params":[{}]}]');
    assert.deepEqual(JSON.parse(batchBodies()[0]!)[0].params, [{}]);
    assert.ok(!batchBodies()[0]!.includes('"to"'));
  });

  it("a repeated params key of a range-checked call is re-serialised; so are \\u escapes", async () => {
    stub.reset();
    const logs =
      '[{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x0","toBlock":"0xffffff"}],' +
      '"params":[{"fromBlock":"0x1","toBlock":"0x2"}]}]';
    const r = await post(url, logs);
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(batchBodies()[0]!)[0].params, [{ fromBlock: "0x1", toBlock: "0x2" }]);
    assert.ok(!batchBodies()[0]!.includes("0xffffff"));
    // A key repeated inside the filter: the range check read the last fromBlock, and so must the node.
    stub.reset();
    const inner =
      '[{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x0","fromBlock":"0x1","toBlock":"0x2"}]}]';
    assert.equal((await post(url, inner)).status, 200);
    assert.deepEqual(JSON.parse(batchBodies()[0]!)[0].params, [{ fromBlock: "0x1", toBlock: "0x2" }]);
    assert.ok(!batchBodies()[0]!.includes('"0x0"'), batchBodies()[0]);
    stub.reset();
    await post(url, '[{"jsonrpc":"2.0","id":1,"method":"eth_c\\u0068ainId"}]');
    assert.equal(JSON.parse(batchBodies()[0]!)[0].method, "eth_chainId");
    assert.ok(!batchBodies()[0]!.includes("\\u"));
  });

  it("ids some nodes refuse (huge, negative, fractional) take the usual path and come back exactly", async () => {
    for (const id of ["123456789012345678901234567890", "-12", "1.5"]) {
      stub.reset();
      const r = await post(url, `[{"jsonrpc":"2.0","id":${id},"method":"eth_chainId"}]`);
      assert.ok(r.text.includes(`"id":${id},`), r.text);
      assert.ok(!batchBodies()[0]!.includes(id), "the node got the gateway's own id");
    }
  });

  it("garbage from the node is not passed on: the batch fails with upstream_bad_response", async () => {
    stub.mode = "garbage";
    try {
      const r = await post(
        url,
        '[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x01","latest"]}]',
      );
      assert.equal(r.status, 502);
      assert.equal(r.json.error.data.reason, "upstream_bad_response");
    } finally {
      stub.mode = "ok";
    }
  });
});
