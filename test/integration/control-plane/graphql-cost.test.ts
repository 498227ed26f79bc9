import assert from "node:assert/strict";
import { type Client, createClient } from "graphql-ws";
import { Client as PgClient } from "pg";
import WebSocket from "ws";
import { ADMIN_TOKEN, code, createApp, GqlResult, Harness, Json, startHarness } from "./harness";

const HEAVY_FIELDS = `id name apiKey allowlist { value } endpoints { httpsUrl network { slug } } jwtKeys { kid } accessRules { methods }`;
const APPS = 50;

/**
 * The list cost (GRAPHQL_MAX_LIST_COST): a query over every app with its keys, allowlists, endpoints and
 * rules is refused before it runs; the same query paged with `first` runs, in a number of SQL statements
 * that does not grow with the number of apps (one batched query per field, not one per app).
 */
describe("control-plane: GraphQL list cost and batched per-app fields", function () {
  this.timeout(60_000);
  let h: Harness;
  let user: { token: string; workspaceId: string };

  before(async () => {
    h = await startHarness();
    user = await h.signUp();
    for (const slug of ["eth-a", "eth-b"]) {
      await h.ok(
        `mutation($i: CreateNetworkInput!) { createNetwork(input: $i) { id } }`,
        { i: { slug, name: slug, protocol: "EVM", chainId: 1 } },
        ADMIN_TOKEN,
      );
    }
    // More apps than the free plan's maxApps (20): on enterprise, which has no app limit.
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "enterprise") { id } }`,
      { w: user.workspaceId },
      ADMIN_TOKEN,
    );
    for (let i = 0; i < APPS; i++) await createApp(h, user.token, `app ${String(i).padStart(2, "0")}`);
  });
  after(async () => {
    await h?.close();
  });

  /** Runs `fn` and counts the SQL statements the control plane sends meanwhile. */
  async function countingSql<T>(fn: () => Promise<T>): Promise<{ result: T; statements: number }> {
    const proto = PgClient.prototype as unknown as { query: (...a: unknown[]) => unknown };
    const real = proto.query;
    let statements = 0;
    proto.query = function (this: unknown, ...args: unknown[]) {
      statements++;
      return real.apply(this, args);
    };
    try {
      return { result: await fn(), statements };
    } finally {
      proto.query = real;
    }
  }

  it("a query over every app with keys, allowlists, endpoints and rules is refused by cost (400), unrun", async () => {
    const baseline = (await countingSql(() => h.gql("{ __typename }", {}, user.token))).statements;
    const { result: r, statements } = await countingSql(() =>
      h.gql(`{ apps { ${HEAVY_FIELDS} } }`, {}, user.token),
    );
    assert.equal(r.status, 400);
    assert.equal(r.data, null);
    assert.equal(code(r), "GRAPHQL_VALIDATION_FAILED");
    assert.match(r.errors![0]!.message, /list cost limit of 20000 exceeded/);
    assert.ok((r.errors![0]!.extensions!.cost as number) > 100_000, JSON.stringify(r.errors));
    // Only the token check ran, nothing of the operation.
    assert.equal(statements, baseline);
    // Through the workspace and with a variable asking for more than the maximum: the same.
    assert.equal(
      code(await h.gql(`{ workspace { apps { ${HEAVY_FIELDS} } } }`, {}, user.token)),
      "GRAPHQL_VALIDATION_FAILED",
    );
    const big = await h.gql(
      `query($n: Int) { apps(first: $n) { ${HEAVY_FIELDS} } }`,
      { n: 100_000 },
      user.token,
    );
    assert.equal(big.status, 400);
    assert.equal(code(big), "GRAPHQL_VALIDATION_FAILED");
    // A fragment spread many times counts every time.
    const spreads = await h.gql(
      `{ apps(first: 60) { ...A ...A } workspace { apps(first: 60) { ...A } } } fragment A on App { allowlist { value } endpoints { httpsUrl } }`,
      {},
      user.token,
    );
    assert.equal(code(spreads), "GRAPHQL_VALIDATION_FAILED");
  });

  it("paged with first, the same fields run; SQL statements do not grow with the number of apps", async () => {
    // Each app counts 1 + key 1 + allowlist 100 + endpoints 2 x 100 + JWT keys 3 + rules 1 = 306.
    const q = `query($n: Int) { apps(first: $n) { ${HEAVY_FIELDS} } }`;
    const PAGE = 30;
    const small = await countingSql(() => h.gql(q, { n: 5 }, user.token));
    const large = await countingSql(() => h.gql(q, { n: PAGE }, user.token));
    for (const r of [small.result, large.result] as GqlResult[]) {
      assert.equal(r.status, 200, JSON.stringify(r.errors));
      assert.equal(r.errors, undefined);
    }
    const apps = large.result.data!.apps as Json[];
    assert.equal(apps.length, PAGE);
    assert.ok(apps.every((a) => /^rpcg_/.test(a.apiKey) && a.endpoints.length === 2));
    assert.equal(new Set(apps.map((a) => a.apiKey)).size, PAGE, "each app its own key");
    assert.equal(
      large.statements,
      small.statements,
      `5 apps: ${small.statements} statements, ${PAGE} apps: ${large.statements}`,
    );
    assert.ok(large.statements <= 12, String(large.statements));
    console.log(
      `      [measure] ${PAGE} apps with key, allowlist, endpoints, JWT keys, rules: ${large.statements} SQL statements (5 apps: ${small.statements})`,
    );
  });

  it("pages with first/after cover every app once, oldest first", async () => {
    const seen: string[] = [];
    let after: string | null = null;
    for (;;) {
      const d: Json = await h.ok(
        `query($a: ID) { apps(first: 20, after: $a) { id name } }`,
        { a: after },
        user.token,
      );
      if (d.apps.length === 0) break;
      seen.push(...d.apps.map((a: Json) => a.name));
      after = d.apps[d.apps.length - 1].id;
    }
    assert.deepEqual(
      seen,
      Array.from({ length: APPS }, (_, i) => `app ${String(i).padStart(2, "0")}`),
    );
    assert.equal(code(await h.gql(`{ apps(first: 0) { id } }`, {}, user.token)), "BAD_USER_INPUT");
    assert.equal(code(await h.gql(`{ apps(first: 1001) { id } }`, {}, user.token)), "BAD_USER_INPUT");
    assert.equal(code(await h.gql(`{ apps(after: "nope") { id } }`, {}, user.token)), "BAD_USER_INPUT");
    // A normal console query passes: the apps list and the workspace's day.
    const page = await h.ok(
      `query($w: ID) { apps(workspaceId: $w) { id name environment createdAt } workspace(id: $w) { today { count limit } } }`,
      { w: user.workspaceId },
      user.token,
    );
    assert.equal(page.apps.length, APPS);
  });

  it("graphql-ws applies the same cost, with the operation's variables", async () => {
    const c: Client = createClient({
      url: h.cp.url.replace(/^http/, "ws"),
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${user.token}` },
      retryAttempts: 0,
    });
    try {
      const run = (n: number) =>
        new Promise<Json>((resolve) => {
          c.subscribe(
            { query: `query($n: Int) { apps(first: $n) { ${HEAVY_FIELDS} } }`, variables: { n } },
            {
              next: (r) => resolve(r as Json),
              error: (e) => resolve({ errors: e }),
              complete: () => undefined,
            },
          );
        });
      const refused = await run(1000);
      const errors = refused.errors as { message: string; extensions: Json }[];
      assert.ok(Array.isArray(errors), JSON.stringify(refused));
      assert.match(errors[0]!.message, /list cost limit of 20000 exceeded/);
      assert.equal(errors[0]!.extensions.code, "GRAPHQL_VALIDATION_FAILED");
      const ok = await run(3);
      assert.equal((ok.data as Json).apps.length, 3, JSON.stringify(ok));
    } finally {
      await c.dispose();
    }
  });
});
