import assert from "node:assert/strict";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { KeyRecordSchema, type NetworkRecord, NetworkRecordSchema } from "../../../shared/src/redis/records";
import { ADMIN_TOKEN, code, createApp, type Harness, startHarness } from "./harness";

const COSTS = `query($n: String) { methodCosts(networkSlug: $n) {
  networkSlug defaultUnits defaultSource methods { method units source } } }`;
const SET = `mutation($n: String, $m: String!, $u: Int!) { setMethodCost(networkSlug: $n, method: $m, units: $u) {
  networkSlug defaultUnits methods { method units source } } }`;
const REMOVE = `mutation($n: String, $m: String!) { removeMethodCost(networkSlug: $n, method: $m) { defaultUnits } }`;
const CREATE_NET = `mutation($i: CreateNetworkInput!) { createNetwork(input: $i) { slug } }`;
const UPSERT = `mutation($i: PlanInput!) { upsertPlan(input: $i) {
  name computeUnitsPerSecond dailyComputeUnitLimit monthlyComputeUnitLimit } }`;

interface CostsView {
  networkSlug: string | null;
  defaultUnits: number;
  defaultSource: string;
  methods: { method: string; units: number; source: string }[];
}

/** Method weights (platform table, network overrides) and plan limits in compute units, through GraphQL. */
describe("control-plane: compute units (method weights, plan and app limits)", () => {
  let h: Harness;

  before(async () => {
    h = await startHarness();
    for (const slug of ["cu-a", "cu-b"]) {
      await h.ok(CREATE_NET, { i: { slug, name: slug, protocol: "EVM", chainId: 1 } }, ADMIN_TOKEN);
    }
  });
  after(async () => {
    await h?.close();
  });

  const published = async (slug: string): Promise<NetworkRecord> => {
    const raw = await h.redis.hget(h.names.networks(), slug);
    assert.ok(raw, `network ${slug} published`);
    return NetworkRecordSchema.parse(JSON.parse(raw));
  };
  const costs = async (n: string | null, token = ADMIN_TOKEN) =>
    (await h.ok<{ methodCosts: CostsView }>(COSTS, { n }, token)).methodCosts;
  const unitsOf = (v: CostsView, method: string) => v.methods.find((m) => m.method === method);

  it("seeds the platform table (Alchemy's published weights, default 20); every network record carries it", async () => {
    const platform = await costs(null);
    assert.equal(platform.networkSlug, null);
    assert.equal(platform.defaultUnits, 20);
    assert.deepEqual(unitsOf(platform, "eth_call"), { method: "eth_call", units: 26, source: "PLATFORM" });
    assert.equal(unitsOf(platform, "eth_getLogs")?.units, 75);
    assert.equal(unitsOf(platform, "eth_sendRawTransaction")?.units, 250);
    assert.equal(unitsOf(platform, "eth_blockNumber")?.units, 10);
    assert.equal(unitsOf(platform, "eth_chainId")?.units, 0);
    // A pushed subscription event (Alchemy's typical event: about 1,000 bytes at 0.04 per byte).
    assert.equal(unitsOf(platform, "eth_subscription")?.units, 40);
    assert.equal(unitsOf(platform, "*"), undefined, "the default is its own field");
    const rec = await published("cu-a");
    assert.equal(rec.methodCosts?.defaultUnits, 20);
    assert.equal(rec.methodCosts?.methods.eth_call, 26);
    assert.equal(rec.methodCosts?.methods.eth_chainId, 0);
    assert.equal(rec.methodCosts?.methods.eth_subscription, 40);
  });

  it("a network override applies to that network only; a platform change republishes every network; removal falls back", async () => {
    const set = await h.ok<{ setMethodCost: CostsView }>(
      SET,
      { n: "cu-a", m: "eth_call", u: 40 },
      ADMIN_TOKEN,
    );
    assert.deepEqual(unitsOf(set.setMethodCost, "eth_call"), {
      method: "eth_call",
      units: 40,
      source: "NETWORK",
    });
    assert.equal((await published("cu-a")).methodCosts?.methods.eth_call, 40);
    assert.equal((await published("cu-b")).methodCosts?.methods.eth_call, 26);
    // The platform's weight changes: both networks are republished, the override still wins on cu-a.
    await h.ok(SET, { n: null, m: "eth_call", u: 30 }, ADMIN_TOKEN);
    await h.ok(SET, { n: null, m: "lim_new", u: 7 }, ADMIN_TOKEN);
    await h.ok(SET, { n: null, m: "*", u: 15 }, ADMIN_TOKEN);
    const a = await published("cu-a");
    const b = await published("cu-b");
    assert.equal(a.methodCosts?.methods.eth_call, 40);
    assert.equal(b.methodCosts?.methods.eth_call, 30);
    assert.equal(a.methodCosts?.methods.lim_new, 7);
    assert.equal(b.methodCosts?.defaultUnits, 15);
    // A network's own default weight.
    await h.ok(SET, { n: "cu-b", m: "*", u: 3 }, ADMIN_TOKEN);
    const bView = await costs("cu-b");
    assert.equal(bView.defaultUnits, 3);
    assert.equal(bView.defaultSource, "NETWORK");
    assert.equal((await published("cu-b")).methodCosts?.defaultUnits, 3);
    // Removing the override: the platform's weight applies again.
    await h.ok(REMOVE, { n: "cu-a", m: "eth_call" }, ADMIN_TOKEN);
    assert.equal((await published("cu-a")).methodCosts?.methods.eth_call, 30);
    assert.equal(unitsOf(await costs("cu-a"), "eth_call")?.source, "PLATFORM");
    // Removing a platform entry: the default applies.
    await h.ok(REMOVE, { n: null, m: "lim_new" }, ADMIN_TOKEN);
    assert.equal((await published("cu-a")).methodCosts?.methods.lim_new, undefined);
    assert.equal(code(await h.gql(REMOVE, { n: "cu-a", m: "eth_call" }, ADMIN_TOKEN)), "NOT_FOUND");
    const star = await h.gql(REMOVE, { n: null, m: "*" }, ADMIN_TOKEN);
    assert.equal(code(star), "BAD_USER_INPUT");
    assert.match(star.errors![0]!.message, /can be changed, not removed/);
  });

  it("only the operator changes weights; signed-in tenants may read them; anonymous callers may not", async () => {
    const tenant = await h.signUp();
    const view = await costs("cu-a", tenant.token);
    assert.equal(view.networkSlug, "cu-a");
    assert.ok(view.methods.length > 10);
    assert.equal(code(await h.gql(SET, { n: "cu-a", m: "eth_call", u: 1 }, tenant.token)), "FORBIDDEN");
    assert.equal(code(await h.gql(SET, { n: null, m: "eth_call", u: 1 }, tenant.token)), "FORBIDDEN");
    assert.equal(code(await h.gql(REMOVE, { n: null, m: "eth_call" }, tenant.token)), "FORBIDDEN");
    assert.equal(code(await h.gql(COSTS, { n: null })), "UNAUTHENTICATED");
    assert.equal(code(await h.gql(SET, { n: null, m: "eth_call", u: 1 })), "UNAUTHENTICATED");
    assert.equal(unitsOf(await costs(null), "eth_call")?.units, 30, "nothing changed");
  });

  it("refuses bad method names and units with a clear error, and changes nothing", async () => {
    const before = await h.redis.hget(h.names.networks(), "cu-a");
    for (const m of [
      "",
      " eth_call",
      "eth call",
      "eth_call\n",
      "__proto__",
      "1eth",
      "a".repeat(129),
      "eth_*",
      "**",
    ]) {
      const r = await h.gql(SET, { n: "cu-a", m, u: 5 }, ADMIN_TOKEN);
      assert.equal(code(r), "BAD_USER_INPUT", `method ${JSON.stringify(m)}`);
      assert.equal(r.errors![0]!.extensions!.field, "method");
      assert.match(r.errors![0]!.message, /method must be a JSON-RPC method name/);
    }
    for (const u of [-1, 1_000_001]) {
      const r = await h.gql(SET, { n: "cu-a", m: "eth_call", u }, ADMIN_TOKEN);
      assert.equal(code(r), "BAD_USER_INPUT", `units ${u}`);
      assert.equal(r.errors![0]!.extensions!.field, "units");
      assert.match(r.errors![0]!.message, /units must be a whole number 0\.\.1000000/);
    }
    // Past a 32-bit Int, or not a whole number: GraphQL itself refuses the argument.
    for (const u of [2 ** 40, 1.5]) {
      const r = await h.gql(SET, { n: "cu-a", m: "eth_call", u }, ADMIN_TOKEN);
      assert.ok(r.errors?.length, `units ${u}`);
      assert.match(r.errors![0]!.message, /Int/);
    }
    assert.equal(code(await h.gql(SET, { n: "no-such-net", m: "eth_call", u: 1 }, ADMIN_TOKEN)), "NOT_FOUND");
    assert.equal(code(await h.gql(COSTS, { n: "no-such-net" }, ADMIN_TOKEN)), "NOT_FOUND");
    assert.equal(await h.redis.hget(h.names.networks(), "cu-a"), before, "the record is unchanged");
    // The control plane still answers.
    assert.equal((await costs("cu-a")).networkSlug, "cu-a");
  });

  it("plans set compute-unit limits (seeded plans none); key records carry them; bad values are refused", async () => {
    const seeded = await h.ok<{ plans: { name: string; computeUnitsPerSecond: number | null }[] }>(
      "{ plans { name computeUnitsPerSecond dailyComputeUnitLimit monthlyComputeUnitLimit } }",
      {},
      ADMIN_TOKEN,
    );
    for (const p of seeded.plans) {
      assert.deepEqual(
        [p.computeUnitsPerSecond, (p as Record<string, unknown>).dailyComputeUnitLimit],
        [null, null],
        p.name,
      );
    }
    const input = {
      name: "cu-plan",
      dailyRequestLimit: 1000,
      requestsPerSecond: 10,
      computeUnitsPerSecond: 500,
      dailyComputeUnitLimit: 1_000_000,
      monthlyComputeUnitLimit: 3_000_000_000,
    };
    const up = await h.ok(UPSERT, { i: input }, ADMIN_TOKEN);
    assert.deepEqual(up.upsertPlan, {
      name: "cu-plan",
      computeUnitsPerSecond: 500,
      dailyComputeUnitLimit: 1_000_000,
      monthlyComputeUnitLimit: 3_000_000_000,
    });
    const owner = await h.signUp();
    await h.ok(
      `mutation($w: ID!, $p: String!) { setWorkspacePlan(workspaceId: $w, plan: $p) { id } }`,
      { w: owner.workspaceId, p: "cu-plan" },
      ADMIN_TOKEN,
    );
    const app = await createApp(h, owner.token);
    await h.ok(
      `mutation($a: ID!, $i: AccessRulesInput!) { setAppAccessRules(appId: $a, input: $i) { computeUnitsPerSecond } }`,
      { a: app.id, i: { computeUnitsPerSecond: 120 } },
      owner.token,
    );
    const raw = await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey)));
    const rec = KeyRecordSchema.parse(JSON.parse(raw!));
    assert.equal(rec.plan.computeUnitsPerSecond, 500);
    assert.equal(rec.plan.dailyComputeUnitLimit, 1_000_000);
    assert.equal(rec.plan.monthlyComputeUnitLimit, 3_000_000_000);
    assert.equal(rec.access?.computeUnitsPerSecond, 120);
    for (const [field, v] of [
      ["computeUnitsPerSecond", 0],
      ["dailyComputeUnitLimit", -5],
      ["monthlyComputeUnitLimit", 1.5],
    ] as const) {
      const r = await h.gql(UPSERT, { i: { ...input, [field]: v } }, ADMIN_TOKEN);
      assert.ok(r.errors?.length, `${field} ${v}`);
      if (code(r) === "BAD_USER_INPUT") assert.equal(r.errors![0]!.extensions!.field, field);
    }
    const badCap = await h.gql(
      `mutation($a: ID!, $i: AccessRulesInput!) { setAppAccessRules(appId: $a, input: $i) { computeUnitsPerSecond } }`,
      { a: app.id, i: { computeUnitsPerSecond: 0 } },
      owner.token,
    );
    assert.equal(code(badCap), "BAD_USER_INPUT");
    // Back to no limits in compute units: the record says so.
    await h.ok(
      UPSERT,
      { i: { name: "cu-plan", dailyRequestLimit: 1000, requestsPerSecond: 10 } },
      ADMIN_TOKEN,
    );
    const after = KeyRecordSchema.parse(
      JSON.parse((await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey))))!),
    );
    assert.equal(
      after.plan.computeUnitsPerSecond,
      undefined,
      "absent: a requests-only plan's record as before",
    );
    assert.equal(after.plan.dailyComputeUnitLimit, undefined);
  });
});
