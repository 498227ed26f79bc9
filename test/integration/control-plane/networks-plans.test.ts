import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import {
  KeyRecordSchema,
  NetworkRecordSchema,
  PlaneEvent,
  WorkspaceRecordSchema,
} from "../../../shared/src/redis/records";
import { planeEventsBarrier } from "../../helpers/plane-events";
import { TEST_REDIS_URL } from "../../helpers/redis";
import { ADMIN_TOKEN, code, createApp, Harness, startHarness } from "./harness";

const CREATE_NET = `mutation($i: CreateNetworkInput!) { createNetwork(input: $i) { id slug name protocol chainId allowDebug } }`;
const ADD_UP = `mutation($s: String!, $i: AddUpstreamInput!) { addUpstream(networkSlug: $s, input: $i) { id httpUrl wsUrl weight } }`;

describe("control-plane: networks and plans", () => {
  let h: Harness;
  let user: { token: string; workspaceId: string };
  let events: PlaneEvent[];
  let sub: Redis;
  before(async () => {
    h = await startHarness();
    user = await h.signUp();
    sub = new Redis(TEST_REDIS_URL);
    events = [];
    await sub.subscribe(h.names.eventsChannel());
    sub.on("message", (_c, m) => events.push(JSON.parse(m)));
  });
  after(async () => {
    sub?.disconnect();
    await h?.close();
  });

  it("lets only the operator create networks and upstreams; publishes the networks hash", async () => {
    const i = { slug: "local-evm", name: "Local", protocol: "EVM", chainId: 31337 };
    assert.equal(code(await h.gql(CREATE_NET, { i }, user.token)), "FORBIDDEN");
    assert.equal(code(await h.gql(CREATE_NET, { i })), "UNAUTHENTICATED");
    const n = await h.ok(CREATE_NET, { i }, ADMIN_TOKEN);
    assert.deepEqual(
      { ...n.createNetwork, id: undefined },
      { id: undefined, slug: "local-evm", name: "Local", protocol: "EVM", chainId: 31337, allowDebug: false },
    );
    const dup = await h.gql(CREATE_NET, { i }, ADMIN_TOKEN);
    assert.equal(dup.errors![0]!.extensions!.field, "slug");
    const badSlug = await h.gql(CREATE_NET, { i: { ...i, slug: "Bad Slug" } }, ADMIN_TOKEN);
    assert.equal(badSlug.errors![0]!.extensions!.field, "slug");

    const up = { httpUrl: "http://127.0.0.1:8545", wsUrl: "ws://127.0.0.1:8545", weight: 3 };
    assert.equal(code(await h.gql(ADD_UP, { s: "local-evm", i: up }, user.token)), "FORBIDDEN");
    const u = await h.ok(ADD_UP, { s: "local-evm", i: up }, ADMIN_TOKEN);
    assert.equal(u.addUpstream.weight, 3);
    assert.equal(code(await h.gql(ADD_UP, { s: "nope", i: up }, ADMIN_TOKEN)), "NOT_FOUND");
    const badUrl = await h.gql(ADD_UP, { s: "local-evm", i: { httpUrl: "ftp://x" } }, ADMIN_TOKEN);
    assert.equal(badUrl.errors![0]!.extensions!.field, "httpUrl");
    const badWeight = await h.gql(
      ADD_UP,
      { s: "local-evm", i: { httpUrl: "http://x", weight: 0 } },
      ADMIN_TOKEN,
    );
    assert.equal(badWeight.errors![0]!.extensions!.field, "weight");

    const rec = NetworkRecordSchema.parse(JSON.parse((await h.redis.hget(h.names.networks(), "local-evm"))!));
    assert.equal(rec.chainId, 31337);
    assert.deepEqual(rec.upstreams, [
      { id: u.addUpstream.id, ...up, archiveMode: "AUTO", methodFamilies: null, maxRequestsPerSecond: null },
    ]);
    assert.ok(events.some((e) => e.type === "networks.update"));

    assert.equal(
      code(
        await h.gql(
          `mutation($id: ID!) { removeUpstream(id: $id) { id } }`,
          { id: u.addUpstream.id },
          user.token,
        ),
      ),
      "FORBIDDEN",
    );
    await h.ok(
      `mutation($id: ID!) { removeUpstream(id: $id) { id } }`,
      { id: u.addUpstream.id },
      ADMIN_TOKEN,
    );
    const rec2 = NetworkRecordSchema.parse(
      JSON.parse((await h.redis.hget(h.names.networks(), "local-evm"))!),
    );
    assert.deepEqual(rec2.upstreams, []);
    assert.equal(
      code(
        await h.gql(
          `mutation($id: ID!) { removeUpstream(id: $id) { id } }`,
          { id: u.addUpstream.id },
          ADMIN_TOKEN,
        ),
      ),
      "NOT_FOUND",
    );
  });

  it("lets everyone read networks, upstream URLs only the operator", async () => {
    await h.ok(ADD_UP, { s: "local-evm", i: { httpUrl: "http://10.0.0.1:8545" } }, ADMIN_TOKEN);
    const anon = await h.ok("{ networks { slug name protocol chainId } }");
    assert.deepEqual(anon.networks, [{ slug: "local-evm", name: "Local", protocol: "EVM", chainId: 31337 }]);
    const r = await h.gql("{ networks { slug upstreams { httpUrl } } }", {}, user.token);
    assert.equal(code(r), "FORBIDDEN");
    assert.equal(r.data!.networks[0].upstreams, null);
    assert.ok(!JSON.stringify(r).includes("10.0.0.1"));
    const op = await h.ok("{ networks { slug upstreams { httpUrl } } }", {}, ADMIN_TOKEN);
    assert.deepEqual(op.networks[0].upstreams, [{ httpUrl: "http://10.0.0.1:8545" }]);
  });

  it("lists plans to authenticated callers only", async () => {
    assert.equal(code(await h.gql("{ plans { name } }")), "UNAUTHENTICATED");
    const p = await h.ok(
      "{ plans { name dailyRequestLimit requestsPerSecond monthlyRequestLimit maxDedicatedNodes } }",
      {},
      user.token,
    );
    // An account sees the self-service plans (and its own current one); the operator sees every plan.
    assert.deepEqual(
      p.plans.map((x: { name: string }) => x.name),
      ["free", "growth"],
    );
    assert.deepEqual(p.plans[1], {
      name: "growth",
      dailyRequestLimit: 5000000,
      requestsPerSecond: 500,
      monthlyRequestLimit: null,
      maxDedicatedNodes: 2,
    });
    const all = await h.ok("{ plans { name } }", {}, ADMIN_TOKEN);
    assert.deepEqual(
      all.plans.map((x: { name: string }) => x.name),
      ["free", "growth", "enterprise"],
    );
  });

  it("changePlan (OWNER) rewrites the workspace's key records and WorkspaceRecord and announces workspace.update", async () => {
    const app = await createApp(h, user.token);
    events.length = 0;
    const w = await h.ok(
      `mutation { changePlan(plan: "growth") { id plan { name requestsPerSecond } } }`,
      {},
      user.token,
    );
    assert.deepEqual(w.changePlan.plan, { name: "growth", requestsPerSecond: 500 });
    const rec = KeyRecordSchema.parse(
      JSON.parse((await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey))))!),
    );
    assert.equal(rec.plan.name, "growth");
    assert.equal(rec.plan.dailyRequestLimit, 5_000_000);
    const ws = WorkspaceRecordSchema.parse(
      JSON.parse((await h.redis.get(h.names.workspace(user.workspaceId)))!),
    );
    assert.equal(ws.plan.requestsPerSecond, 500);
    await planeEventsBarrier(h.redis, h.names.eventsChannel(), events);
    assert.ok(events.some((e) => e.type === "workspace.update" && e.workspaceId === user.workspaceId));
    const bad = await h.gql(`mutation { changePlan(plan: "nope") { id } }`, {}, user.token);
    assert.equal(bad.errors![0]!.extensions!.field, "plan");
  });

  it("setWorkspacePlan and upsertPlan are operator-only; editing a plan re-publishes its workspaces", async () => {
    const app = await createApp(h, user.token, "plan-edit");
    const set = `mutation($w: ID!, $p: String!) { setWorkspacePlan(workspaceId: $w, plan: $p) { plan { name } } }`;
    assert.equal(code(await h.gql(set, { w: user.workspaceId, p: "enterprise" }, user.token)), "FORBIDDEN");
    assert.equal(
      (await h.ok(set, { w: user.workspaceId, p: "free" }, ADMIN_TOKEN)).setWorkspacePlan.plan.name,
      "free",
    );
    assert.equal(
      code(await h.gql(set, { w: "00000000-0000-0000-0000-000000000000", p: "free" }, ADMIN_TOKEN)),
      "NOT_FOUND",
    );

    const up = `mutation($i: PlanInput!) { upsertPlan(input: $i) { name dailyRequestLimit requestsPerSecond monthlyRequestLimit } }`;
    const i = { name: "free", dailyRequestLimit: 1000, requestsPerSecond: 5, monthlyRequestLimit: 20000 };
    assert.equal(code(await h.gql(up, { i }, user.token)), "FORBIDDEN");
    const p = await h.ok(up, { i }, ADMIN_TOKEN);
    assert.deepEqual(p.upsertPlan, i);
    const rec = KeyRecordSchema.parse(
      JSON.parse((await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey))))!),
    );
    assert.deepEqual(rec.plan, {
      name: "free",
      dailyRequestLimit: 1000,
      requestsPerSecond: 5,
      monthlyRequestLimit: 20000,
      // Not in the input: the seeded caps stay.
      maxInFlightPerKey: 50,
      maxHeavyInFlightPerKey: 4,
    });
    assert.deepEqual(JSON.parse((await h.redis.hget(h.names.plans(), "free"))!), rec.plan);

    const created = await h.ok(
      up,
      { i: { name: "custom-1", dailyRequestLimit: 7, requestsPerSecond: 1 } },
      ADMIN_TOKEN,
    );
    assert.equal(created.upsertPlan.monthlyRequestLimit, null);
    const bad = await h.gql(
      up,
      { i: { name: "x", dailyRequestLimit: 0, requestsPerSecond: 1 } },
      ADMIN_TOKEN,
    );
    assert.equal(code(bad), "BAD_USER_INPUT");
    assert.equal(bad.errors![0]!.extensions!.field, "dailyRequestLimit");
    const badName = await h.gql(
      up,
      { i: { name: "Has Spaces", dailyRequestLimit: 1, requestsPerSecond: 1 } },
      ADMIN_TOKEN,
    );
    assert.equal(badName.errors![0]!.extensions!.field, "name");
  });

  it("changePlan is refused to a MEMBER (FORBIDDEN), nothing changed", async () => {
    const owner = await h.signUp();
    const member = await h.signUp();
    // Add `member` to owner's workspace as MEMBER directly (no invitation API yet).
    await h.cp.dataSource.query(
      "INSERT INTO memberships (account_id, workspace_id, role) SELECT account_id, $1, 'MEMBER' FROM memberships WHERE workspace_id = $2",
      [owner.workspaceId, member.workspaceId],
    );
    const r = await h.gql(
      `mutation($w: ID) { changePlan(plan: "growth", workspaceId: $w) { id } }`,
      { w: owner.workspaceId },
      member.token,
    );
    assert.equal(code(r), "FORBIDDEN");
    const ws = await h.ok("{ workspace { plan { name } } }", {}, owner.token);
    assert.equal(ws.workspace.plan.name, "free");
  });
});
