import assert from "node:assert/strict";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import type { DataPlane } from "../../../data-plane/src/data-plane";
import { eventually } from "../../helpers/eventually";
import {
  createApp,
  createStubNetwork,
  type Harness,
  type Json,
  startHarness,
  startHarnessDataPlane,
} from "../control-plane/harness";
import { post } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";

/** The shape of the ids the gateway makes itself (data-plane/src/server/respond.ts nextRequestId). */
const GATEWAY_ID = /^[0-9a-f]{8}-[0-9a-z]+$/;

const LOG = `query($f: RequestLogFilter!) {
  requestLog(filter: $f, first: 20) { edges { node { requestId item method httpStatus category reason } } } }`;

describe("a client's own X-Request-Id: returned, in data.requestId and in the request log", function () {
  this.timeout(120_000);
  let h: Harness;
  let stub: StubUpstream;
  let worker: ControlPlaneWorker | undefined;
  let dp: DataPlane | undefined;
  let owner: { token: string };
  let url = "";

  /** The request-log records listed for `requestId`, once there are `n` of them. */
  const logged = (requestId: string, n: number) =>
    eventually(
      async () => {
        const d = await h.ok<{ requestLog: { edges: { node: Json }[] } }>(
          LOG,
          { f: { requestId } },
          owner.token,
        );
        const nodes = d.requestLog.edges.map((e) => e.node);
        return nodes.length >= n ? nodes : undefined;
      },
      `${n} request-log records for ${requestId}`,
      30_000,
    );

  before(async () => {
    h = await startHarness();
    stub = await new StubUpstream().start();
    await createStubNetwork(h, stub.url);
    owner = await h.signUp();
    const app = await createApp(h, owner.token, "ids");
    worker = await startWorker(h.config, undefined, { usage: { blockMs: 100, consumerName: "reqid-test" } });
    dp = await startHarnessDataPlane(h, {
      HEALTH_CHECK_INTERVAL_MS: "200",
      REQUEST_LOG_FLUSH_INTERVAL_MS: "100",
      REQUEST_LOG_SAMPLE_PERCENT: "100",
      RATE_LIMIT_MODE: "off",
      QUOTA_MODE: "off",
      SHARED_NODE_EXTRA_NAMESPACES: "stub",
    });
    url = `http://127.0.0.1:${dp.port}/evm-stub/rpc?apikey=${app.apiKey}`;
    await eventually(
      async () => (await post(url, { jsonrpc: "2.0", id: 1, method: "eth_chainId" })).status === 200,
      "the gateway serving",
    );
  });

  after(async () => {
    await dp?.close();
    await worker?.close();
    await stub?.stop();
    await h?.close();
  });

  it("a well-formed id is the id of the answer, of its error object and of its request-log record", async () => {
    const clientId = `sdk-7f3a:${Date.now()}/retry#1`;
    const r = await post(url, { jsonrpc: "2.0", id: 7, method: "stub_error" }, { "x-request-id": clientId });
    assert.equal(r.status, 200);
    assert.equal(r.json.error.code, -32000);
    assert.equal(r.headers.get("x-request-id"), clientId);
    // A node's error object is passed through as the node wrote it; a gateway error carries data.requestId.
    const refused = await post(url, "{not json", { "x-request-id": `${clientId}-parse` });
    assert.equal(refused.status, 400);
    assert.equal(refused.headers.get("x-request-id"), `${clientId}-parse`);
    assert.equal(refused.json.error.data.requestId, `${clientId}-parse`);

    const [rec] = await logged(clientId, 1);
    assert.equal(rec!.requestId, clientId);
    assert.equal(rec!.method, "stub_error");
    assert.equal(rec!.category, "Node Error");
    const [parse] = await logged(`${clientId}-parse`, 1);
    assert.equal(parse!.reason, "parse_error");
    assert.equal(parse!.httpStatus, 400);
  });

  it("a batch's records all carry the client's id, one per element", async () => {
    const clientId = `batch-${Date.now()}`;
    const r = await post(
      url,
      [
        { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
        { jsonrpc: "2.0", id: 2, method: "stub_error" },
        { jsonrpc: "2.0", id: 3, method: "admin_peers" },
      ],
      { "x-request-id": clientId },
    );
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("x-request-id"), clientId);
    const blocked = r.json.find((e: Json) => e.id === 3);
    assert.equal(blocked.error.code, -32601);
    assert.equal(blocked.error.data.requestId, clientId);
    const recs = await logged(clientId, 3);
    assert.deepEqual(
      recs.map((x) => [x.item, x.method]).sort((a, b) => a[0] - b[0]),
      [
        [0, "eth_chainId"],
        [1, "stub_error"],
        [2, "admin_peers"],
      ],
    );
  });

  it("a malformed id is replaced by a fresh one, which is then logged", async () => {
    const tooLong = `x${"y".repeat(100)}`;
    for (const bad of ["has a space", tooLong, "tab\there"]) {
      const r = await post(url, "[]", { "x-request-id": bad });
      assert.equal(r.status, 400, bad);
      const id = r.headers.get("x-request-id")!;
      assert.notEqual(id, bad);
      assert.match(id, GATEWAY_ID);
      assert.equal(r.json.error.data.requestId, id);
      const [rec] = await logged(id, 1);
      assert.equal(rec!.reason, "empty_batch");
    }
    // Without the header: a fresh id, as always.
    const plain = await post(url, "[]");
    assert.match(plain.headers.get("x-request-id")!, GATEWAY_ID);
  });
});
