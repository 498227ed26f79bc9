import assert from "node:assert/strict";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { KeyRecordSchema, PlanRecordSchema, WorkspaceRecordSchema } from "../../../shared/src/redis/records";
import { ADMIN_TOKEN, code, createApp, type Harness, startHarness } from "./harness";

const FIELDS = "name maxInFlightPerKey maxHeavyInFlightPerKey";
const UPSERT = `mutation($i: PlanInput!) { upsertPlan(input: $i) { ${FIELDS} } }`;
const SET = `mutation($w: ID!, $p: String!) { setWorkspacePlan(workspaceId: $w, plan: $p) { id } }`;

/** The per-key concurrency caps as plan settings (`Plan.maxInFlightPerKey`, `Plan.maxHeavyInFlightPerKey`). */
describe("control-plane: plan concurrency caps", () => {
  let h: Harness;

  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await h?.close();
  });

  it("seeds free 50/4, growth 500/32, enterprise 5000/128; a new plan has none (the data plane's defaults)", async () => {
    const d = await h.ok<{
      plans: { name: string; maxInFlightPerKey: number; maxHeavyInFlightPerKey: number }[];
    }>(`{ plans { ${FIELDS} } }`, {}, ADMIN_TOKEN);
    const byName = new Map(d.plans.map((p) => [p.name, [p.maxInFlightPerKey, p.maxHeavyInFlightPerKey]]));
    assert.deepEqual(byName.get("free"), [50, 4]);
    assert.deepEqual(byName.get("growth"), [500, 32]);
    assert.deepEqual(byName.get("enterprise"), [5000, 128]);
    const created = await h.ok(
      UPSERT,
      { i: { name: "no-caps", dailyRequestLimit: 10, requestsPerSecond: 1 } },
      ADMIN_TOKEN,
    );
    assert.deepEqual(created.upsertPlan, {
      name: "no-caps",
      maxInFlightPerKey: null,
      maxHeavyInFlightPerKey: null,
    });
  });

  it("validates the caps: 1..1,000,000 or null, with the field named", async () => {
    for (const [field, v] of [
      ["maxInFlightPerKey", 0],
      ["maxInFlightPerKey", -3],
      ["maxHeavyInFlightPerKey", 1_000_001],
    ] as const) {
      const r = await h.gql(
        UPSERT,
        { i: { name: "bad-caps", dailyRequestLimit: 1, requestsPerSecond: 1, [field]: v } },
        ADMIN_TOKEN,
      );
      assert.equal(code(r), "BAD_USER_INPUT", `${field}=${v}: ${JSON.stringify(r.errors)}`);
      assert.match(JSON.stringify(r.errors), new RegExp(field));
    }
    // Not a number at all: refused by the schema.
    const text = await h.gql(
      UPSERT,
      { i: { name: "bad-caps", dailyRequestLimit: 1, requestsPerSecond: 1, maxInFlightPerKey: "many" } },
      ADMIN_TOKEN,
    );
    assert.ok(text.errors?.length, "a string is refused");
    const none = await h.ok<{ plans: { name: string }[] }>("{ plans { name } }", {}, ADMIN_TOKEN);
    assert.ok(!none.plans.some((p) => p.name === "bad-caps"), "nothing stored");
  });

  it("operator only; omitted keeps the caps, null clears them; every record of the plan's workspaces is re-published", async () => {
    const owner = await h.signUp();
    const i = { name: "capped", dailyRequestLimit: 1000, requestsPerSecond: 10, maxInFlightPerKey: 12 };
    assert.equal(code(await h.gql(UPSERT, { i }, owner.token)), "FORBIDDEN");
    await h.ok(UPSERT, { i: { ...i, maxHeavyInFlightPerKey: 3 } }, ADMIN_TOKEN);
    await h.ok(SET, { w: owner.workspaceId, p: "capped" }, ADMIN_TOKEN);
    const app = await createApp(h, owner.token);
    const published = async () => ({
      key: KeyRecordSchema.parse(JSON.parse((await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey))))!))
        .plan,
      workspace: WorkspaceRecordSchema.parse(
        JSON.parse((await h.redis.get(h.names.workspace(owner.workspaceId)))!),
      ).plan,
      plans: PlanRecordSchema.parse(JSON.parse((await h.redis.hget(h.names.plans(), "capped"))!)),
    });
    let p = await published();
    for (const rec of [p.key, p.workspace, p.plans]) {
      assert.equal(rec.maxInFlightPerKey, 12);
      assert.equal(rec.maxHeavyInFlightPerKey, 3);
    }
    // Omitted: unchanged (a form that does not know the fields does not reset them).
    const kept = await h.ok(
      UPSERT,
      { i: { name: "capped", dailyRequestLimit: 2000, requestsPerSecond: 10 } },
      ADMIN_TOKEN,
    );
    assert.deepEqual(kept.upsertPlan, { name: "capped", maxInFlightPerKey: 12, maxHeavyInFlightPerKey: 3 });
    // null: back to the data plane's defaults, published as null.
    await h.ok(UPSERT, { i: { ...i, maxInFlightPerKey: 40, maxHeavyInFlightPerKey: null } }, ADMIN_TOKEN);
    p = await published();
    for (const rec of [p.key, p.workspace, p.plans]) {
      assert.equal(rec.maxInFlightPerKey, 40);
      assert.equal(rec.maxHeavyInFlightPerKey, null);
    }
    // A tenant reads its plan's caps (its own plan), cannot change them.
    const mine = await h.ok<{ workspace: { plan: { maxInFlightPerKey: number } } }>(
      "{ workspace { plan { maxInFlightPerKey } } }",
      {},
      owner.token,
    );
    assert.equal(mine.workspace.plan.maxInFlightPerKey, 40);
  });
});
