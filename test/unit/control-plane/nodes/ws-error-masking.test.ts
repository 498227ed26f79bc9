import assert from "node:assert/strict";
import { GraphQLError } from "graphql";
import { createWsErrorFormatting } from "../../../../control-plane/src/graphql/errors";
import { createLogger } from "../../../../shared/src/log/logger";

/** graphql-ws (dedicatedNodeStatus) errors: the hooks server.ts installs, case by case. */
describe("dedicated nodes: graphql-ws error masking", () => {
  const f = createWsErrorFormatting(createLogger("test", "silent"));

  it("a throw from the event stream (wrapped by graphql-ws, no code) is masked; a public error passes", () => {
    const internal = new GraphQLError("connect ECONNREFUSED 10.0.0.5:5432", {
      originalError: new Error("connect ECONNREFUSED 10.0.0.5:5432"),
    });
    const notFound = new GraphQLError("Dedicated node not found", {
      originalError: new GraphQLError("Dedicated node not found", { extensions: { code: "NOT_FOUND" } }),
    });
    const out = f.onError(undefined, "1", undefined, [internal, notFound]);
    assert.equal(out[0]!.message, "Internal server error");
    assert.deepEqual(out[0]!.extensions, { code: "INTERNAL_SERVER_ERROR" });
    assert.equal(out[1]!.message, "Dedicated node not found");
    assert.equal(out[1]!.extensions?.code, "NOT_FOUND");
  });

  it("validation errors (no code, no original) get GRAPHQL_VALIDATION_FAILED and keep their message", () => {
    const out = f.onError(undefined, "1", undefined, [new GraphQLError('Cannot query field "nope"')]);
    assert.equal(out[0]!.extensions?.code, "GRAPHQL_VALIDATION_FAILED");
    assert.match(out[0]!.message, /nope/);
  });

  it("next payloads: data kept, errors masked; no errors leaves the result alone", () => {
    const r = f.onNext(undefined, "1", undefined, undefined, {
      data: null,
      errors: [new GraphQLError("duplicate key value violates unique constraint", { path: ["x"] })],
    });
    assert.deepEqual(r, {
      data: null,
      errors: [
        { message: "Internal server error", path: ["x"], extensions: { code: "INTERNAL_SERVER_ERROR" } },
      ],
    });
    assert.equal(f.onNext(undefined, "1", undefined, undefined, { data: { a: 1 } }), undefined);
  });

  it("context: a public error (bad token) passes; anything else becomes a bare internal error", async () => {
    const bad = f.context(async () => {
      throw new GraphQLError("Invalid, expired or revoked token", {
        extensions: { code: "UNAUTHENTICATED" },
      });
    });
    await assert.rejects(bad(), /Invalid, expired or revoked token/);
    const broken = f.context(async () => {
      throw new Error("password authentication failed for user rg");
    });
    await assert.rejects(broken(), (e: Error) => e.message === "Internal server error");
  });
});
