import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { printControlPlaneSchema } from "../../../../control-plane/src/graphql/schema";

const SCHEMA_FILE = join(__dirname, "../../../../../schema.graphql");

describe("control-plane: schema.graphql", () => {
  it("is up to date with the code (run `npm run schema` after changing resolvers)", async () => {
    const printed = await printControlPlaneSchema();
    assert.ok(printed === readFileSync(SCHEMA_FILE, "utf8"), "schema.graphql is stale: run `npm run schema`");
  });

  it("keeps the contract names", async () => {
    const sdl = await printControlPlaneSchema();
    for (const name of [
      "input SignUpInput",
      "input CreateAppInput",
      "input UpdateAppInput",
      "input AllowlistEntryInput",
      "input CreateNetworkInput",
      "input AddUpstreamInput",
      "input PlanInput",
      "signUp(input: SignUpInput!): AuthPayload!",
      "logIn(email: String!, password: String!): AuthPayload!",
      "createAccessToken(",
      "revokeAccessToken(id: ID!)",
      "createApp(input: CreateAppInput!",
      "updateApp(id: ID!, input: UpdateAppInput!)",
      "deleteApp(id: ID!)",
      "regenerateApiKey(appId: ID!, gracePeriodSeconds: Int! = 0)",
      "addAllowlistEntry(appId: ID!, input: AllowlistEntryInput!)",
      "removeAllowlistEntry(appId: ID!, entryId: ID!)",
      "createNetwork(input: CreateNetworkInput!)",
      "addUpstream(input: AddUpstreamInput!, networkSlug: String!)",
      "removeUpstream(id: ID!)",
      "upsertPlan(input: PlanInput!)",
      "setWorkspacePlan(plan: String!, workspaceId: ID!)",
      "changePlan(plan: String!",
      "enum WorkspaceRole {\n  ADMIN\n  MEMBER\n  OWNER\n  VIEWER\n}",
      "inviteMember(email: String!, role: WorkspaceRole!, workspaceId: ID): CreatedInvitation!",
      "type CreatedInvitation {",
      "acceptInvitation(token: String!)",
    ]) {
      assert.ok(sdl.includes(name), `schema lacks ${name}`);
    }
  });
});
