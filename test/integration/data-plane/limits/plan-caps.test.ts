import assert from "node:assert/strict";
import type { DataPlane } from "../../../../data-plane/src/data-plane";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";
import { eventually } from "../../../helpers/eventually";
import {
  ADMIN_TOKEN,
  createApp,
  type Harness,
  startHarness,
  startHarnessDataPlane,
} from "../../control-plane/harness";
import { post, type RpcResponse } from "../harness";
import { StubUpstream } from "../stub-upstream";

const UPSERT = `mutation($i: PlanInput!) { upsertPlan(input: $i) { name maxInFlightPerKey maxHeavyInFlightPerKey } }`;
const SET_PLAN = `mutation($w: ID!, $p: String!) { setWorkspacePlan(workspaceId: $w, plan: $p) { id } }`;

const receipt = (id: number) => ({
  jsonrpc: "2.0",
  id,
  method: "eth_getTransactionReceipt",
  params: [`0x${id.toString(16).padStart(64, "0")}`],
});

function reasons(rs: RpcResponse[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rs) {
    const k = `${r.status} ${r.json?.error?.data?.reason ?? "ok"}`;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/**
 * The concurrency caps as plan settings, end to end: GraphQL (upsertPlan, setWorkspacePlan) -> Postgres
 * -> the records published into Redis -> a data plane run with its default MAX_IN_FLIGHT_PER_KEY /
 * MAX_HEAVY_IN_FLIGHT_PER_KEY -> a stub node that holds every exchange until the test lets it go. The
 * per-second limit is off here (RATE_LIMIT_MODE=off): growth's 500 requests/s admits 5 of an indexer's 50
 * batches of 100 per second, and this file is about the caps on calls in flight, which apply in every
 * rate mode. The response cache is off, so every call goes to the node.
 */
describe("data plane: per-key concurrency caps from the key's plan", function () {
  this.timeout(120_000);
  let h: Harness;
  let stub: StubUpstream;
  let dp: DataPlane;
  let base = "";

  before(async () => {
    h = await startHarness();
    stub = await new StubUpstream().start();
    await h.ok(
      `mutation($s: String!) {
        n: createNetwork(input: { slug: "evm-stub", name: "Stub", protocol: EVM, chainId: 31337 }) { id }
        u: addUpstream(networkSlug: "evm-stub", input: { httpUrl: $s }) { id } }`,
      { s: stub.url },
      ADMIN_TOKEN,
    );
    dp = await startHarnessDataPlane(h, {
      RATE_LIMIT_MODE: "off",
      QUOTA_MODE: "off",
      USAGE_MODE: "off",
      CACHE_MAX_BYTES: "0",
      UPSTREAM_TIMEOUT_MS: "60000",
    });
    base = `http://127.0.0.1:${dp.port}`;
  });

  after(async () => {
    await dp?.close();
    await stub?.stop();
    await h?.close();
  });

  afterEach(async () => {
    await eventually(() => dp.context.flights.size === 0, "every slot released");
  });

  /** A workspace on `plan` with one app: its RPC URL and its tenant id at the caps. */
  const tenantOn = async (plan: string) => {
    const owner = await h.signUp();
    if (plan !== "free") await h.ok(SET_PLAN, { w: owner.workspaceId, p: plan }, ADMIN_TOKEN);
    const app = await createApp(h, owner.token, `on ${plan}`);
    return { url: `${base}/evm-stub/rpc?apikey=${app.apiKey}`, flight: `app:${app.id}` };
  };

  /**
   * Sends `requests` while the node holds every receipt lookup; once `atNode` lookups reached it and
   * `refused` requests were answered (refusals are answered at once), every request has been decided:
   * the node lets go and the answers come back.
   */
  const whileHeld = async (
    requests: (() => Promise<RpcResponse>)[],
    atNode: number,
    refused: number,
  ): Promise<RpcResponse[]> => {
    stub.reset();
    const release = stub.hold("eth_getTransactionReceipt");
    try {
      let answered = 0;
      const pending = requests.map((send) =>
        send().then((r) => {
          answered++;
          return r;
        }),
      );
      await eventually(
        () => stub.held === atNode && answered === refused,
        `${atNode} calls at the node and ${refused} refusals answered`,
      );
      release();
      return await Promise.all(pending);
    } finally {
      release();
    }
  };

  it("growth as seeded: an indexer's 50 concurrent batches of 100 are all served, none refused for concurrency", async () => {
    const plans = await h.ok<{ plans: { name: string; maxInFlightPerKey: number | null }[] }>(
      "{ plans { name maxInFlightPerKey maxHeavyInFlightPerKey } }",
      {},
      ADMIN_TOKEN,
    );
    assert.equal(plans.plans.find((p) => p.name === "growth")?.maxInFlightPerKey, 500);
    const { url, flight } = await tenantOn("growth");
    const batch = (b: number) => () =>
      post(
        url,
        Array.from({ length: 100 }, (_, i) => receipt(b * 100 + i)),
      );
    const batches = await whileHeld(
      Array.from({ length: 50 }, (_, b) => batch(b)),
      5_000,
      0,
    );
    assert.deepEqual(reasons(batches), { "200 ok": 50 });
    for (const r of batches) {
      assert.equal(r.json.length, 100);
      assert.ok(
        r.json.every((e: { result?: unknown }) => e.result !== undefined),
        "every element answered by the node",
      );
    }
    // The 50 batches were at the node together, one exchange and one slot each: counted one slot per
    // element, they would have needed 5,000 (the default cap is 200, growth's 500).
    assert.equal(stub.peakInFlight("eth_getTransactionReceipt"), 5_000);
    assert.equal(dp.context.flights.inFlight(flight), 0);
  });

  it("a plan with a small cap refuses past it with 429 concurrency_limit naming the plan's cap; another key is not affected", async () => {
    await h.ok(
      UPSERT,
      {
        i: {
          name: "tight",
          dailyRequestLimit: 1_000_000,
          requestsPerSecond: 1000,
          maxInFlightPerKey: 3,
          maxHeavyInFlightPerKey: 2,
        },
      },
      ADMIN_TOKEN,
    );
    const tight = await tenantOn("tight");
    const other = await tenantOn("tight");
    const answers = await whileHeld(
      [
        ...Array.from({ length: 5 }, (_, i) => () => post(tight.url, receipt(i))),
        ...Array.from({ length: 3 }, (_, i) => () => post(other.url, receipt(10 + i))),
      ],
      6,
      2,
    );
    const row = GatewayError.ConcurrencyLimit;
    assert.deepEqual(reasons(answers.slice(0, 5)), { "200 ok": 3, [`${row.httpStatus} ${row.reason}`]: 2 });
    assert.deepEqual(reasons(answers.slice(5)), { "200 ok": 3 });
    const refused = answers.find((r) => r.status === 429)!;
    assert.equal(refused.json.error.code, row.code);
    assert.equal(refused.json.error.data.category, row.category);
    assert.equal(refused.json.error.data.limit, 3, "the plan's cap, not the default 200");
    assert.equal(refused.headers.get("retry-after"), "1");
    // Heavy calls: 3 eth_getLogs in one batch exceed the plan's heavy cap of 2 (one heavy slot each).
    const logs = [0, 1, 2].map((id) => ({
      jsonrpc: "2.0",
      id,
      method: "eth_getLogs",
      params: [{ fromBlock: "0x1", toBlock: "0x2" }],
    }));
    const heavy = await post(tight.url, logs);
    assert.equal(heavy.status, 429, heavy.text);
    assert.equal(heavy.json.error.data.reason, row.reason);
    assert.equal(heavy.json.error.data.limit, 2);
  });

  it("a flood of separate calls is still refused past the cap, while batches each hold one slot", async () => {
    const tenant = await tenantOn("tight");
    const batchOf = (from: number, n: number) => () =>
      post(
        tenant.url,
        Array.from({ length: n }, (_, i) => receipt(from + i)),
      );
    // Two batches of 100 and one single call hold three slots, the plan's cap: 20 more single calls and
    // a batch of 10 are refused.
    const answers = await whileHeld(
      [
        batchOf(0, 100),
        batchOf(100, 100),
        () => post(tenant.url, receipt(500)),
        ...Array.from({ length: 20 }, (_, i) => () => post(tenant.url, receipt(600 + i))),
        batchOf(700, 10),
      ],
      201,
      21,
    );
    assert.deepEqual(reasons(answers.slice(0, 3)), { "200 ok": 3 });
    assert.deepEqual(reasons(answers.slice(3)), { [`429 ${GatewayError.ConcurrencyLimit.reason}`]: 21 });
    assert.equal(answers[23]!.json.id, null, "a batch is refused whole");
  });

  it("changing the plan's cap takes effect once published, without a restart", async () => {
    const input = (cap: number | null) => ({
      i: { name: "movable", dailyRequestLimit: 1_000_000, requestsPerSecond: 1000, maxInFlightPerKey: cap },
    });
    await h.ok(UPSERT, input(2), ADMIN_TOKEN);
    const tenant = await tenantOn("movable");
    const calls = (n: number, from: number) =>
      Array.from({ length: n }, (_, i) => () => post(tenant.url, receipt(from + i)));
    assert.deepEqual(reasons(await whileHeld(calls(4, 0), 2, 2)), {
      "200 ok": 2,
      [`429 ${GatewayError.ConcurrencyLimit.reason}`]: 2,
    });
    let applied = dp.eventsApplied();
    const up = await h.ok(UPSERT, input(5), ADMIN_TOKEN);
    assert.deepEqual(up.upsertPlan, { name: "movable", maxInFlightPerKey: 5, maxHeavyInFlightPerKey: null });
    // upsertPlan returns once the records are written and workspace.update is published.
    await eventually(() => dp.eventsApplied() > applied, "workspace.update applied");
    const raised = await whileHeld(calls(7, 10), 5, 2);
    assert.deepEqual(reasons(raised), { "200 ok": 5, [`429 ${GatewayError.ConcurrencyLimit.reason}`]: 2 });
    assert.equal(raised.find((r) => r.status === 429)!.json.error.data.limit, 5);
    // Back to the data plane's default (null): MAX_IN_FLIGHT_PER_KEY, 200.
    applied = dp.eventsApplied();
    await h.ok(UPSERT, input(null), ADMIN_TOKEN);
    await eventually(() => dp.eventsApplied() > applied, "workspace.update applied");
    assert.deepEqual(reasons(await whileHeld(calls(12, 40), 12, 0)), { "200 ok": 12 });
  });
});
