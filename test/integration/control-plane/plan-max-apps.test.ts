import assert from "node:assert/strict";
import { ADMIN_TOKEN, code, createApp, type Harness, startHarness } from "./harness";

const UPSERT = `mutation($i: PlanInput!) { upsertPlan(input: $i) { name maxApps } }`;
const SET = `mutation($w: ID!, $p: String!) { setWorkspacePlan(workspaceId: $w, plan: $p) { id } }`;
const CREATE = `mutation($i: CreateAppInput!) { createApp(input: $i) { id } }`;

/** Plans cap the apps of a workspace (`Plan.maxApps`): more apps are refused, even when sent at once. */
describe("control-plane: Plan.maxApps (apps per workspace)", () => {
  let h: Harness;

  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await h?.close();
  });

  it("seeds free 20, growth 100, enterprise none; upsertPlan sets it and checks the range", async () => {
    const d = await h.ok<{ plans: { name: string; maxApps: number | null }[] }>(
      "{ plans { name maxApps } }",
      {},
      ADMIN_TOKEN,
    );
    const byName = new Map(d.plans.map((p) => [p.name, p.maxApps]));
    assert.equal(byName.get("free"), 20);
    assert.equal(byName.get("growth"), 100);
    assert.equal(byName.get("enterprise"), null);
    const bad = await h.gql(
      UPSERT,
      { i: { name: "neg", dailyRequestLimit: 1, requestsPerSecond: 1, maxApps: -1 } },
      ADMIN_TOKEN,
    );
    assert.equal(code(bad), "BAD_USER_INPUT");
    const none = await h.ok(
      UPSERT,
      { i: { name: "unlimited", dailyRequestLimit: 1, requestsPerSecond: 1 } },
      ADMIN_TOKEN,
    );
    assert.equal(none.upsertPlan.maxApps, null);
  });

  it("createApp past the plan's maxApps is refused with a clear error, also for a burst sent at once", async () => {
    await h.ok(
      UPSERT,
      { i: { name: "three-apps", dailyRequestLimit: 1000, requestsPerSecond: 10, maxApps: 3 } },
      ADMIN_TOKEN,
    );
    const owner = await h.signUp();
    await h.ok(SET, { w: owner.workspaceId, p: "three-apps" }, ADMIN_TOKEN);
    // Eight at once: the workspace row lock serialises them; exactly three get through.
    const rs = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        h.gql(CREATE, { i: { name: `burst ${i}`, environment: "PRODUCTION" } }, owner.token),
      ),
    );
    const ok = rs.filter((r) => !r.errors);
    const refused = rs.filter((r) => r.errors);
    assert.equal(ok.length, 3);
    assert.equal(refused.length, 5);
    for (const r of refused) {
      assert.equal(code(r), "FORBIDDEN");
      assert.equal(r.errors![0]!.extensions!.reason, "PLAN_APP_LIMIT");
      assert.equal(r.errors![0]!.extensions!.limit, 3);
      assert.match(r.errors![0]!.message, /App limit reached: plan "three-apps" allows 3 app\(s\)/);
    }
    const list = await h.ok<{ apps: { id: string }[] }>("{ apps { id } }", {}, owner.token);
    assert.equal(list.apps.length, 3, "nothing was created by the refused calls");
    // Deleting one makes room for one; raising the plan's limit applies at once.
    await h.ok(`mutation($id: ID!) { deleteApp(id: $id) }`, { id: list.apps[0]!.id }, owner.token);
    await createApp(h, owner.token, "after delete");
    assert.equal(
      code(await h.gql(CREATE, { i: { name: "x", environment: "PRODUCTION" } }, owner.token)),
      "FORBIDDEN",
    );
    await h.ok(
      UPSERT,
      { i: { name: "three-apps", dailyRequestLimit: 1000, requestsPerSecond: 10, maxApps: 4 } },
      ADMIN_TOKEN,
    );
    await createApp(h, owner.token, "fourth");
    // Another workspace is not counted against this one.
    const other = await h.signUp();
    await createApp(h, other.token, "other's");
  });
});
