import assert from "node:assert/strict";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { ADMIN_TOKEN, APP_FIELDS, code, createApp, Harness, startHarness } from "./harness";

/**
 * Account B tries every resolver that takes an id or reads workspace data with account A's ids: each
 * answers NOT_FOUND (or FORBIDDEN for operator-only operations), and A's data is unchanged afterwards.
 */
describe("control-plane: tenant isolation", () => {
  let h: Harness;
  let a: { token: string; accountId: string; workspaceId: string };
  let b: { token: string; accountId: string; workspaceId: string };
  let aApp: { id: string; apiKey: string };
  let bApp: { id: string; apiKey: string };
  let aEntryId: string;
  let aTokenId: string;
  let aPat: string;
  let upstreamId: string;
  let aOwnerMemberId: string;
  let aInvitationId: string;

  async function snapshotA() {
    const d = await h.ok(
      `query($id: ID!) { workspace { id name plan { name } apps { id name } }
        app(id: $id) { ${APP_FIELDS} }
        accessTokens { id name revokedAt }
        members { id role email } invitations { id status } }`,
      { id: aApp.id },
      a.token,
    );
    const rec = await h.redis.get(h.names.apiKey(hashApiKey(aApp.apiKey)));
    return { d, rec };
  }

  before(async () => {
    h = await startHarness();
    a = await h.signUp();
    b = await h.signUp();
    aApp = await createApp(h, a.token, "A's app");
    bApp = await createApp(h, b.token, "B's app");
    const e = await h.ok(
      `mutation($a: ID!) { addAllowlistEntry(appId: $a, input: { kind: IP, value: "203.0.113.1" }) { id } }`,
      { a: aApp.id },
      a.token,
    );
    aEntryId = e.addAllowlistEntry.id;
    const t = await h.ok(
      `mutation { createAccessToken(name: "a-ci") { token accessToken { id } } }`,
      {},
      a.token,
    );
    aTokenId = t.createAccessToken.accessToken.id;
    aPat = t.createAccessToken.token;
    await h.ok(
      `mutation { createNetwork(input: { slug: "n1", name: "N1", protocol: EVM, chainId: 1 }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    const u = await h.ok(
      `mutation { addUpstream(networkSlug: "n1", input: { httpUrl: "http://10.1.1.1" }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    upstreamId = u.addUpstream.id;
    aOwnerMemberId = (await h.ok("{ members { id } }", {}, a.token)).members[0].id;
    aInvitationId = (
      await h.ok(
        `mutation { inviteMember(email: "a-team@example.com", role: ADMIN) { invitation { id } } }`,
        {},
        a.token,
      )
    ).inviteMember.invitation.id;
  });
  after(async () => {
    await h?.close();
  });

  const attempts: [string, string, () => Record<string, unknown>, string][] = [
    [
      "workspace(id)",
      `query($w: ID) { workspace(id: $w) { id name apps { id apiKey } } }`,
      () => ({ w: a.workspaceId }),
      "NOT_FOUND",
    ],
    [
      "apps(workspaceId)",
      `query($w: ID) { apps(workspaceId: $w) { id apiKey } }`,
      () => ({ w: a.workspaceId }),
      "NOT_FOUND",
    ],
    ["app(id)", `query($id: ID!) { app(id: $id) { id apiKey } }`, () => ({ id: aApp.id }), "NOT_FOUND"],
    [
      "createApp(workspaceId)",
      `mutation($w: ID) { createApp(input: { name: "intruder", environment: PRODUCTION }, workspaceId: $w) { id } }`,
      () => ({ w: a.workspaceId }),
      "NOT_FOUND",
    ],
    [
      "updateApp",
      `mutation($id: ID!) { updateApp(id: $id, input: { name: "pwned" }) { id } }`,
      () => ({ id: aApp.id }),
      "NOT_FOUND",
    ],
    ["deleteApp", `mutation($id: ID!) { deleteApp(id: $id) }`, () => ({ id: aApp.id }), "NOT_FOUND"],
    [
      "regenerateApiKey",
      `mutation($id: ID!) { regenerateApiKey(appId: $id) { apiKey } }`,
      () => ({ id: aApp.id }),
      "NOT_FOUND",
    ],
    [
      "addAllowlistEntry",
      `mutation($id: ID!) { addAllowlistEntry(appId: $id, input: { kind: IP, value: "1.1.1.1" }) { id } }`,
      () => ({ id: aApp.id }),
      "NOT_FOUND",
    ],
    [
      "removeAllowlistEntry (A's app)",
      `mutation($id: ID!, $e: ID!) { removeAllowlistEntry(appId: $id, entryId: $e) { id } }`,
      () => ({ id: aApp.id, e: aEntryId }),
      "NOT_FOUND",
    ],
    [
      "removeAllowlistEntry (B's app, A's entry)",
      `mutation($id: ID!, $e: ID!) { removeAllowlistEntry(appId: $id, entryId: $e) { id } }`,
      () => ({ id: bApp.id, e: aEntryId }),
      "NOT_FOUND",
    ],
    [
      "revokeAccessToken",
      `mutation($id: ID!) { revokeAccessToken(id: $id) { id } }`,
      () => ({ id: aTokenId }),
      "NOT_FOUND",
    ],
    [
      "changePlan(workspaceId)",
      `mutation($w: ID) { changePlan(plan: "growth", workspaceId: $w) { id } }`,
      () => ({ w: a.workspaceId }),
      "NOT_FOUND",
    ],
    [
      "members(workspaceId)",
      `query($w: ID) { members(workspaceId: $w) { id email } }`,
      () => ({ w: a.workspaceId }),
      "NOT_FOUND",
    ],
    [
      "invitations(workspaceId)",
      `query($w: ID) { invitations(workspaceId: $w) { id email } }`,
      () => ({ w: a.workspaceId }),
      "NOT_FOUND",
    ],
    [
      "inviteMember(workspaceId)",
      `mutation($w: ID) { inviteMember(email: "spy@example.com", role: ADMIN, workspaceId: $w) { token } }`,
      () => ({ w: a.workspaceId }),
      "NOT_FOUND",
    ],
    [
      "revokeInvitation",
      `mutation($id: ID!) { revokeInvitation(id: $id) { id } }`,
      () => ({ id: aInvitationId }),
      "NOT_FOUND",
    ],
    [
      "changeMemberRole",
      `mutation($m: ID!) { changeMemberRole(memberId: $m, role: VIEWER) { id } }`,
      () => ({ m: aOwnerMemberId }),
      "NOT_FOUND",
    ],
    [
      "removeMember",
      `mutation($m: ID!) { removeMember(memberId: $m) }`,
      () => ({ m: aOwnerMemberId }),
      "NOT_FOUND",
    ],
    [
      "transferOwnership",
      `mutation($m: ID!) { transferOwnership(memberId: $m) { id } }`,
      () => ({ m: aOwnerMemberId }),
      "NOT_FOUND",
    ],
    [
      "leaveWorkspace",
      `mutation($w: ID!) { leaveWorkspace(workspaceId: $w) }`,
      () => ({ w: a.workspaceId }),
      "NOT_FOUND",
    ],
    [
      "setWorkspacePlan",
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "enterprise") { id } }`,
      () => ({ w: a.workspaceId }),
      "FORBIDDEN",
    ],
    [
      "upsertPlan",
      `mutation { upsertPlan(input: { name: "free", dailyRequestLimit: 1, requestsPerSecond: 1 }) { name } }`,
      () => ({}),
      "FORBIDDEN",
    ],
    [
      "removeUpstream",
      `mutation($id: ID!) { removeUpstream(id: $id) { id } }`,
      () => ({ id: upstreamId }),
      "FORBIDDEN",
    ],
    [
      "updateUpstream",
      `mutation($id: ID!) { updateUpstream(networkSlug: "n1", upstreamId: $id, input: { maxRequestsPerSecond: 1 }) { id } }`,
      () => ({ id: upstreamId }),
      "FORBIDDEN",
    ],
  ];

  for (const [name, query, vars, expected] of attempts) {
    it(`${name}: B gets ${expected} and A's data is unchanged`, async () => {
      const before = await snapshotA();
      const r = await h.gql(query, vars(), b.token);
      assert.equal(code(r), expected, JSON.stringify(r.errors));
      assert.ok(!JSON.stringify(r).includes(aApp.apiKey), "A's key never appears in B's response");
      assert.deepEqual(await snapshotA(), before);
    });
  }

  it("list queries show B only B's data", async () => {
    const d = await h.ok(
      "{ workspace { id apps { id } } workspaces { id } apps { id } accessTokens { id } }",
      {},
      b.token,
    );
    assert.equal(d.workspace.id, b.workspaceId);
    assert.deepEqual(d.workspace.apps, [{ id: bApp.id }]);
    assert.deepEqual(d.workspaces, [{ id: b.workspaceId }]);
    assert.deepEqual(d.apps, [{ id: bApp.id }]);
    assert.ok(d.accessTokens.every((t: { id: string }) => t.id !== aTokenId));
    assert.equal(
      (await h.ok("{ workspace { id } }", {}, aPat)).workspace.id,
      a.workspaceId,
      "A's token still works",
    );
    const intruder = await h.cp.dataSource.query("SELECT 1 FROM apps WHERE name = 'intruder'");
    assert.equal(intruder.length, 0);
  });
});
