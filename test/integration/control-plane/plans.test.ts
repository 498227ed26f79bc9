import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { PlaneEvent } from "../../../shared/src/redis/records";
import { planeEventsBarrier } from "../../helpers/plane-events";
import { TEST_REDIS_URL } from "../../helpers/redis";
import { ADMIN_TOKEN, code, createApp, Harness, startHarness } from "./harness";

const CHANGE = `mutation($p: String!, $w: ID) { changePlan(plan: $p, workspaceId: $w) { id plan { name } } }`;
const SET = `mutation($w: ID!, $p: String!) { setWorkspacePlan(workspaceId: $w, plan: $p) { id plan { name } } }`;
const UPSERT = `mutation($i: PlanInput!) { upsertPlan(input: $i) { name selfService } }`;
const PLANS = "{ plans { name selfService } }";

describe("control-plane: self-service plans (a tenant cannot give itself a bigger plan)", () => {
  let h: Harness;
  let owner: { token: string; workspaceId: string };
  let other: { token: string; workspaceId: string };
  let app: { id: string; apiKey: string };
  let events: PlaneEvent[];
  let sub: Redis;

  before(async () => {
    h = await startHarness();
    owner = await h.signUp();
    other = await h.signUp();
    app = await createApp(h, owner.token);
    sub = new Redis(TEST_REDIS_URL);
    events = [];
    await sub.subscribe(h.names.eventsChannel());
    sub.on("message", (_c, m) => events.push(JSON.parse(m)));
    // A private plan for one customer (no selfService given: private by default).
    const p = await h.ok(
      UPSERT,
      { i: { name: "acme-deal", dailyRequestLimit: 900_000_000, requestsPerSecond: 9000 } },
      ADMIN_TOKEN,
    );
    assert.equal(p.upsertPlan.selfService, false);
  });
  after(async () => {
    sub?.disconnect();
    await h?.close();
  });

  /** Everything a plan change would touch: the Postgres row and both Redis records. */
  const snapshot = async (workspaceId: string) => ({
    planId: (await h.cp.dataSource.query("SELECT plan_id FROM workspaces WHERE id = $1", [workspaceId]))[0]
      .plan_id,
    workspaceRecord: await h.redis.get(h.names.workspace(workspaceId)),
    keyRecord:
      workspaceId === owner.workspaceId ? await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey))) : null,
  });
  const planNames = (d: { plans: { name: string }[] }) => d.plans.map((p) => p.name);

  it("seeds free and growth as self-service, enterprise not", async () => {
    const d = await h.ok(PLANS, {}, ADMIN_TOKEN);
    assert.deepEqual(d.plans, [
      { name: "free", selfService: true },
      { name: "growth", selfService: true },
      { name: "enterprise", selfService: false },
      { name: "acme-deal", selfService: false },
    ]);
  });

  it("planContact: null when PLAN_CONTACT is unset, for authenticated callers only", async () => {
    assert.equal(code(await h.gql("{ planContact }")), "UNAUTHENTICATED");
    assert.equal((await h.ok("{ planContact }", {}, owner.token)).planContact, null);
  });

  it("a tenant lists only self-service plans plus its own current plan; private plans do not leak", async () => {
    assert.deepEqual(planNames(await h.ok(PLANS, {}, owner.token)), ["free", "growth"]);
    await h.ok(SET, { w: other.workspaceId, p: "acme-deal" }, ADMIN_TOKEN);
    assert.deepEqual(planNames(await h.ok(PLANS, {}, other.token)), ["free", "growth", "acme-deal"]);
    assert.deepEqual(planNames(await h.ok(PLANS, {}, owner.token)), ["free", "growth"], "not another's plan");
    const ws = await h.ok("{ workspace { plan { name selfService } } }", {}, other.token);
    assert.deepEqual(ws.workspace.plan, { name: "acme-deal", selfService: false });
    await h.ok(SET, { w: other.workspaceId, p: "free" }, ADMIN_TOKEN);
    assert.deepEqual(planNames(await h.ok(PLANS, {}, other.token)), ["free", "growth"]);
  });

  it("the owner cannot changePlan to enterprise, a private plan or an unknown one: nothing changes anywhere", async () => {
    const before = await snapshot(owner.workspaceId);
    assert.ok(before.workspaceRecord && before.keyRecord, "records published");
    await planeEventsBarrier(h.redis, h.names.eventsChannel(), events);
    events.length = 0;
    const messages: string[] = [];
    for (const p of ["enterprise", "acme-deal", "no-such-plan"]) {
      const r = await h.gql(CHANGE, { p }, owner.token);
      assert.equal(code(r), "BAD_USER_INPUT", p);
      assert.equal(r.errors![0]!.extensions!.field, "plan");
      assert.match(r.errors![0]!.message, /is not a self-service plan: ask the platform operator/);
      assert.equal(r.data, null);
      messages.push(r.errors![0]!.message.replace(p, "X"));
    }
    // A private plan's existence is not revealed: unknown and private get the same answer.
    assert.equal(new Set(messages).size, 1);
    assert.deepEqual(await snapshot(owner.workspaceId), before);
    await planeEventsBarrier(h.redis, h.names.eventsChannel(), events);
    assert.deepEqual(events, [], "nothing announced to the data plane");
  });

  it("the owner switches between self-service plans; Postgres and Redis follow", async () => {
    const r = await h.ok(CHANGE, { p: "growth" }, owner.token);
    assert.equal(r.changePlan.plan.name, "growth");
    const s = await snapshot(owner.workspaceId);
    assert.equal(JSON.parse(s.keyRecord!).plan.name, "growth");
    assert.equal(JSON.parse(s.workspaceRecord!).plan.requestsPerSecond, 500);
    assert.equal((await h.ok(CHANGE, { p: "free" }, owner.token)).changePlan.plan.name, "free");
  });

  it("the operator moves a workspace to any plan with setWorkspacePlan; changePlan keeps the rule for everyone", async () => {
    const r = await h.gql(CHANGE, { p: "enterprise", w: owner.workspaceId }, ADMIN_TOKEN);
    assert.equal(code(r), "BAD_USER_INPUT");
    const set = await h.ok(SET, { w: owner.workspaceId, p: "enterprise" }, ADMIN_TOKEN);
    assert.equal(set.setWorkspacePlan.plan.name, "enterprise");
    const s = await snapshot(owner.workspaceId);
    assert.equal(JSON.parse(s.keyRecord!).plan.name, "enterprise");
    // The owner sees its current (operator-assigned) plan, and may move down to a self-service one.
    assert.deepEqual(planNames(await h.ok(PLANS, {}, owner.token)), ["free", "growth", "enterprise"]);
    assert.equal((await h.ok(CHANGE, { p: "growth" }, owner.token)).changePlan.plan.name, "growth");
    // ...but not back up: it was the operator's to give.
    assert.equal(code(await h.gql(CHANGE, { p: "enterprise" }, owner.token)), "BAD_USER_INPUT");
    assert.equal(code(await h.gql(SET, { w: owner.workspaceId, p: "enterprise" }, owner.token)), "FORBIDDEN");
  });

  it("workspace B cannot change A's plan, even to a self-service one", async () => {
    const before = await snapshot(owner.workspaceId);
    const r = await h.gql(CHANGE, { p: "free", w: owner.workspaceId }, other.token);
    assert.equal(code(r), "NOT_FOUND");
    assert.deepEqual(await snapshot(owner.workspaceId), before);
  });

  it("upsertPlan sets selfService; omitted on an edit keeps it; turning it off closes changePlan at once", async () => {
    const c = await h.ok(
      UPSERT,
      { i: { name: "starter", dailyRequestLimit: 1000, requestsPerSecond: 10, selfService: true } },
      ADMIN_TOKEN,
    );
    assert.equal(c.upsertPlan.selfService, true);
    const e = await h.ok(
      UPSERT,
      { i: { name: "starter", dailyRequestLimit: 2000, requestsPerSecond: 10 } },
      ADMIN_TOKEN,
    );
    assert.equal(e.upsertPlan.selfService, true, "omitted: unchanged");
    assert.ok(planNames(await h.ok(PLANS, {}, other.token)).includes("starter"));
    assert.equal(
      code(
        await h.gql(
          UPSERT,
          { i: { name: "starter", dailyRequestLimit: 1, requestsPerSecond: 1, selfService: true } },
          owner.token,
        ),
      ),
      "FORBIDDEN",
    );
    await h.ok(
      UPSERT,
      { i: { name: "starter", dailyRequestLimit: 2000, requestsPerSecond: 10, selfService: false } },
      ADMIN_TOKEN,
    );
    assert.ok(!planNames(await h.ok(PLANS, {}, other.token)).includes("starter"));
    assert.equal(code(await h.gql(CHANGE, { p: "starter" }, other.token)), "BAD_USER_INPUT");
    assert.equal(
      (await h.ok("{ workspace { plan { name } } }", {}, other.token)).workspace.plan.name,
      "free",
    );
  });
});
