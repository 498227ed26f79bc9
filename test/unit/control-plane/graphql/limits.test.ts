import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { GraphQLError, parse, validate } from "graphql";
import { loadConfig } from "../../../../control-plane/src/config";
import { operationCost } from "../../../../control-plane/src/graphql/cost";
import { apolloArmor, createWsLimits } from "../../../../control-plane/src/graphql/limits";
import { buildControlPlaneSchema } from "../../../../control-plane/src/graphql/schema";

const CONSOLE_SRC = join(__dirname, "../../../../../control-plane/console/src");

/**
 * Every GraphQL document the console sends (string literals passed to `gql(...)`, with its `${CONST}`
 * field lists expanded), so a limit can't be lowered below what the product's own client needs.
 */
function consoleOperations(): { file: string; query: string }[] {
  const files = [
    ...readdirSync(CONSOLE_SRC).map((f) => join(CONSOLE_SRC, f)),
    ...readdirSync(join(CONSOLE_SRC, "pages")).map((f) => join(CONSOLE_SRC, "pages", f)),
  ].filter((f) => /\.tsx?$/.test(f));
  const sources = files.map((file) => ({ file, src: readFileSync(file, "utf8") }));
  const consts: Record<string, string> = {};
  for (const { src } of sources) {
    for (const m of src.matchAll(/const (\w+) =\s*(?:`([^`]*)`|"([^"]*)")/g)) consts[m[1]!] = m[2] ?? m[3]!;
  }
  const out: { file: string; query: string }[] = [];
  for (const { file, src } of sources) {
    for (const m of src.matchAll(/\bgql(?:<[^(]*?>)?\(\s*(?:`([^`]*)`|"([^"]*)")/gs)) {
      const raw = m[1] ?? m[2]!;
      // Nodes.tsx picks one of three same-shaped mutations by name.
      const query = raw.replace(
        /\$\{(\w+)\}/g,
        (_, k: string) => consts[k] ?? (k === "m" ? "stopDedicatedNode" : k),
      );
      out.push({ file, query });
    }
  }
  return out;
}

describe("control-plane: GraphQL limits", () => {
  const defaults = loadConfig({});

  it("defaults: depth 10, aliases 15, tokens 2000, cost 5000, directives 50, 1 MiB, no introspection", () => {
    assert.deepEqual(defaults.graphqlLimits, {
      maxDepth: 10,
      maxAliases: 15,
      maxTokens: 2000,
      maxCost: 5000,
      maxListCost: 20_000,
      maxDirectives: 50,
    });
    assert.equal(defaults.graphqlMaxBodyBytes, 1024 * 1024);
    assert.equal(defaults.graphqlIntrospection, false);
    assert.equal(defaults.graphqlWsAuthRecheckMs, 5000);
    assert.equal(defaults.graphqlWsMaxOperations, 100);
    assert.equal(defaults.signUpMaxPerIp, 10);
    assert.equal(defaults.signUpWindowSeconds, 3600);
    assert.equal(defaults.usageMaxRangeDays, 400);
    assert.equal(defaults.usageMaxSeriesPoints, 500);
    const c = loadConfig({ GRAPHQL_MAX_DEPTH: "6", GRAPHQL_INTROSPECTION: "true", SIGNUP_MAX_PER_IP: "2" });
    assert.equal(c.graphqlLimits.maxDepth, 6);
    assert.equal(c.graphqlIntrospection, true);
    assert.equal(c.signUpMaxPerIp, 2);
    assert.throws(
      () => loadConfig({ GRAPHQL_MAX_TOKENS: "0", GRAPHQL_MAX_COST: "lots" }),
      (e: Error) => /GRAPHQL_MAX_TOKENS/.test(e.message) && /GRAPHQL_MAX_COST/.test(e.message),
    );
  });

  it("every query the console sends passes the default limits, its list cost included", async () => {
    const schema = await buildControlPlaneSchema();
    const ops = consoleOperations();
    let worst = 0;
    assert.ok(ops.length >= 20, `found only ${ops.length} console operations`);
    const { validationRules, parseOptions } = apolloArmor(defaults.graphqlLimits);
    for (const { file, query } of ops) {
      const doc = parse(query, parseOptions);
      const errors = validate(schema, doc, undefined).concat(validate(schema, doc, validationRules));
      assert.deepEqual(
        errors.map((e) => e.message),
        [],
        `${file}: ${query}`,
      );
      // Variables unknown here: every list counts at its maximum, so any value the console sends passes.
      const cost = operationCost({ schema, document: doc });
      assert.ok(cost <= defaults.graphqlLimits.maxListCost, `${file}: cost ${cost}: ${query}`);
      worst = Math.max(worst, cost);
    }
    assert.ok(worst > 0, "the costs were computed");
  });

  it("list cost: lists count at their size argument or maximum, nested lists multiply, report rows are free", async () => {
    const schema = await buildControlPlaneSchema();
    const cost = (query: string, variables?: Record<string, unknown>) =>
      operationCost({ schema, document: parse(query), variables });
    assert.equal(cost("{ apps { id name } }"), 1000);
    assert.equal(cost("{ apps(first: 10) { id name } }"), 10);
    assert.equal(cost("query($n: Int) { apps(first: $n) { id } }", { n: 7 }), 7);
    assert.equal(cost("query($n: Int = 4) { apps(first: $n) { id } }"), 4);
    assert.equal(
      cost("query($n: Int) { apps(first: $n) { id } }", { n: 5000 }),
      1000,
      "clamped to the maximum",
    );
    assert.equal(cost("{ apps(first: 10) { apiKey } }"), 20, "a decrypted key counts");
    assert.equal(cost("{ apps(first: 10) { allowlist { value } jwtKeys { kid } } }"), 10 * (1 + 100 + 3));
    assert.equal(cost("{ apps(first: 2) { endpoints { network { slug } } } }"), 2 * (1 + 100 * 2));
    assert.equal(cost("{ requestLog(filter: {}, first: 20) { edges { node { requestId } } } }"), 1 + 20 * 2);
    assert.equal(
      cost("{ requestLog(filter: {}) { edges { node { requestId } } } }"),
      1 + 500 * 2,
      "no first: the largest page",
    );
    assert.equal(cost("{ usage(filter: {}) { history(days: 400) { byApp { app { id } count } } } }"), 1);
    assert.equal(
      cost("{ apps(first: 3) { ...F ...F } } fragment F on App { allowlist { id } }"),
      3 * (1 + 200),
    );
    assert.equal(cost("{ workspace { apps(first: 5) { id } } }"), 1 + 5);
    assert.ok(
      cost(
        "{ apps { id apiKey allowlist { value } endpoints { httpsUrl } jwtKeys { kid } accessRules { methods } } }",
      ) > 100_000,
    );
  });

  it("graphql-ws limits return errors (never throw): syntax, tokens, rules, introspection", async () => {
    const schema = await buildControlPlaneSchema();
    const ws = createWsLimits({ ...defaults.graphqlLimits, maxTokens: 100 }, false);
    const syntax = ws.parse("{ networks {");
    assert.ok(Array.isArray(syntax));
    assert.equal((syntax as GraphQLError[])[0]!.extensions.code, "GRAPHQL_PARSE_FAILED");
    const tokens = ws.parse(`{ networks { ${"slug ".repeat(200)}} }`);
    assert.match((tokens as GraphQLError[])[0]!.message, /more that 100 tokens/);
    const doc = ws.parse("{ __schema { types { name } } }");
    assert.ok(!Array.isArray(doc));
    const errors = ws.validate(schema, doc as never);
    assert.ok(errors.length > 0);
    assert.ok(errors.every((e) => e.extensions.code === "GRAPHQL_VALIDATION_FAILED"));
    assert.match(errors[0]!.message, /introspection/);
    const withIntrospection = createWsLimits(defaults.graphqlLimits, true);
    assert.deepEqual(withIntrospection.validate(schema, doc as never), []);
  });
});
