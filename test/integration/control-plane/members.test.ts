import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { ADMIN_TOKEN, code, createApp, type Harness, type Json, startHarness } from "./harness";

const CONSOLE = "https://console.example.test/console";
const INVITE = `mutation($e: String!, $r: WorkspaceRole!, $w: ID) {
  inviteMember(email: $e, role: $r, workspaceId: $w) { token link invitation { id email role status expiresAt createdAt invitedByEmail workspaceId } } }`;
const ACCEPT = `mutation($t: String!) { acceptInvitation(token: $t) { id name myRole } }`;
const SIGN_UP = `mutation($i: SignUpInput!) { signUp(input: $i) { token account { id email } } }`;
const sha256 = (s: string) => createHash("sha256").update(s, "utf8").digest("hex");

type Account = { token: string; accountId: string; workspaceId: string; email: string };

describe("control-plane: members, invitations and ownership", function () {
  this.timeout(60_000);
  let h: Harness;
  let n = 0;

  async function account(): Promise<Account> {
    const email = `m${++n}-${Date.now()}@example.com`;
    return { ...(await h.signUp(email)), email };
  }

  async function invite(by: string, email: string, role: string, workspaceId?: string) {
    return (await h.ok(INVITE, { e: email, r: role, w: workspaceId }, by)).inviteMember as Json;
  }

  /** `who` joins `owner`'s workspace with `role` through a real invitation. */
  async function join(owner: Account, who: Account, role: string): Promise<string> {
    const inv = await invite(owner.token, who.email, role);
    await h.ok(ACCEPT, { t: inv.token }, who.token);
    const members = (await h.ok("{ members { id accountId } }", {}, owner.token)).members as Json[];
    return members.find((m) => m.accountId === who.accountId)!.id;
  }

  const owners = async (workspaceId: string) =>
    (
      await h.cp.dataSource.query(
        "SELECT account_id FROM memberships WHERE workspace_id = $1 AND role = 'OWNER'",
        [workspaceId],
      )
    ).map((r: { account_id: string }) => r.account_id);

  before(async () => {
    h = await startHarness({ PUBLIC_CONSOLE_URL: `${CONSOLE}/` });
  });
  after(async () => {
    await h?.close();
  });

  it("inviteMember: a single-use token and its console link; only the token's hash is stored; listed as pending", async () => {
    const owner = await account();
    const inv = await invite(owner.token, "  New.Person@Example.COM ", "ADMIN");
    assert.match(inv.token, /^rgi_[A-Za-z0-9_-]{43}$/);
    assert.equal(inv.link, `${CONSOLE}/invite#${inv.token}`);
    assert.equal(inv.invitation.email, "new.person@example.com");
    assert.equal(inv.invitation.role, "ADMIN");
    assert.equal(inv.invitation.status, "PENDING");
    assert.equal(inv.invitation.invitedByEmail, owner.email);
    assert.equal(inv.invitation.workspaceId, owner.workspaceId);
    const ttl = Date.parse(inv.invitation.expiresAt) - Date.parse(inv.invitation.createdAt);
    assert.ok(Math.abs(ttl - 7 * 24 * 3600 * 1000) < 5_000, `expires 7 days after creation (${ttl} ms)`);
    const rows = await h.cp.dataSource.query("SELECT * FROM invitations WHERE id = $1", [inv.invitation.id]);
    assert.equal(rows[0].token_hash, sha256(inv.token));
    assert.ok(!JSON.stringify(rows).includes(inv.token), "the token itself is not stored");
    const listed = await h.ok("{ invitations { id email role status } }", {}, owner.token);
    assert.deepEqual(listed.invitations, [
      { id: inv.invitation.id, email: "new.person@example.com", role: "ADMIN", status: "PENDING" },
    ]);
    // Anyone holding the token sees what it offers (the accept page, before logging in).
    const preview = await h.ok(
      `query($t: String!) { invitation(token: $t) { workspaceName email role status } }`,
      {
        t: inv.token,
      },
    );
    assert.deepEqual(preview.invitation, {
      workspaceName: `WS ${owner.email}`,
      email: "new.person@example.com",
      role: "ADMIN",
      status: "PENDING",
    });
    assert.equal(code(await h.gql(`query { invitation(token: "rgi_nope") { email } }`)), "NOT_FOUND");
  });

  it("refuses inviting as OWNER, a bad email and an existing member", async () => {
    const owner = await account();
    const r1 = await h.gql(INVITE, { e: "x@example.com", r: "OWNER" }, owner.token);
    assert.equal(code(r1), "BAD_USER_INPUT");
    assert.equal(r1.errors?.[0]?.extensions?.field, "role");
    const r2 = await h.gql(INVITE, { e: "not-an-email", r: "MEMBER" }, owner.token);
    assert.equal(r2.errors?.[0]?.extensions?.field, "email");
    const r3 = await h.gql(INVITE, { e: owner.email, r: "MEMBER" }, owner.token);
    assert.equal(code(r3), "BAD_USER_INPUT");
    assert.match(r3.errors![0]!.message, /already a member/);
    assert.equal((await h.cp.dataSource.query("SELECT 1 FROM invitations")).length > 0, true);
    assert.equal(
      (await h.cp.dataSource.query("SELECT 1 FROM invitations WHERE workspace_id = $1", [owner.workspaceId]))
        .length,
      0,
    );
  });

  it("acceptInvitation: the account joins with the role; a second use, a revoked and an expired token are refused", async () => {
    const owner = await account();
    const bob = await account();
    const inv = await invite(owner.token, bob.email, "MEMBER");
    const d = await h.ok(ACCEPT, { t: inv.token }, bob.token);
    assert.deepEqual(d.acceptInvitation, {
      id: owner.workspaceId,
      name: `WS ${owner.email}`,
      myRole: "MEMBER",
    });
    // Bob now belongs to two workspaces: his own (the default) and the owner's.
    const ws = await h.ok("{ workspaces { id myRole } workspace { id } }", {}, bob.token);
    assert.deepEqual(ws.workspaces, [
      { id: bob.workspaceId, myRole: "OWNER" },
      { id: owner.workspaceId, myRole: "MEMBER" },
    ]);
    assert.equal(ws.workspace.id, bob.workspaceId);
    // Single use: the same token again (by anyone) is refused, and it is no longer pending.
    const carol = await account();
    const again = await h.gql(ACCEPT, { t: inv.token }, bob.token);
    assert.equal(again.errors?.[0]?.extensions?.reason, "INVITATION_USED");
    const reuse = await h.gql(ACCEPT, { t: inv.token }, carol.token);
    assert.equal(code(reuse), "BAD_USER_INPUT");
    assert.equal(reuse.errors?.[0]?.extensions?.reason, "INVITATION_USED");
    assert.deepEqual((await h.ok("{ invitations { id } }", {}, owner.token)).invitations, []);
    const preview = await h.ok(`query($t: String!) { invitation(token: $t) { status } }`, { t: inv.token });
    assert.equal(preview.invitation.status, "ACCEPTED");
    // An accepted invitation cannot be revoked.
    const rv = await h.gql(
      `mutation($id: ID!) { revokeInvitation(id: $id) { id } }`,
      { id: inv.invitation.id },
      owner.token,
    );
    assert.equal(code(rv), "BAD_USER_INPUT");

    // Revoked: refused, status REVOKED, not listed.
    const revoked = await invite(owner.token, carol.email, "VIEWER");
    const r = await h.ok(
      `mutation($id: ID!) { revokeInvitation(id: $id) { id status } }`,
      { id: revoked.invitation.id },
      owner.token,
    );
    assert.equal(r.revokeInvitation.status, "REVOKED");
    const rr = await h.gql(ACCEPT, { t: revoked.token }, carol.token);
    assert.equal(rr.errors?.[0]?.extensions?.reason, "INVITATION_REVOKED");
    assert.deepEqual((await h.ok("{ invitations { id } }", {}, owner.token)).invitations, []);

    // Expired (7 days later): refused, status EXPIRED, not listed.
    const expired = await invite(owner.token, carol.email, "VIEWER");
    await h.cp.dataSource.query(
      "UPDATE invitations SET expires_at = now() - interval '1 second' WHERE id = $1",
      [expired.invitation.id],
    );
    const re = await h.gql(ACCEPT, { t: expired.token }, carol.token);
    assert.equal(code(re), "BAD_USER_INPUT");
    assert.equal(re.errors?.[0]?.extensions?.reason, "INVITATION_EXPIRED");
    assert.deepEqual((await h.ok("{ invitations { id } }", {}, owner.token)).invitations, []);
    const ep = await h.ok(`query($t: String!) { invitation(token: $t) { status } }`, { t: expired.token });
    assert.equal(ep.invitation.status, "EXPIRED");
    // None of them let Carol in.
    assert.deepEqual(
      (await h.ok("{ workspaces { id } }", {}, carol.token)).workspaces.map((w: Json) => w.id),
      [carol.workspaceId],
    );
    assert.equal(code(await h.gql(ACCEPT, { t: "rgi_unknown" }, carol.token)), "NOT_FOUND");
    assert.equal(code(await h.gql(ACCEPT, { t: inv.token })), "UNAUTHENTICATED");
  });

  it("an invitation is for its email: another account cannot use it, and it stays pending", async () => {
    const owner = await account();
    const mallory = await account();
    const inv = await invite(owner.token, "someone.else@example.com", "ADMIN");
    const r = await h.gql(ACCEPT, { t: inv.token }, mallory.token);
    assert.equal(code(r), "BAD_USER_INPUT");
    assert.equal(r.errors?.[0]?.extensions?.reason, "INVITATION_EMAIL_MISMATCH");
    assert.match(r.errors![0]!.message, /someone\.else@example\.com/);
    assert.equal(
      code(
        await h.gql(
          "query($w: ID) { apps(workspaceId: $w) { id } }",
          { w: owner.workspaceId },
          mallory.token,
        ),
      ),
      "NOT_FOUND",
    );
    assert.equal(
      (await h.ok("{ invitations { status } }", {}, owner.token)).invitations[0].status,
      "PENDING",
    );
  });

  it("inviting the same email again replaces the pending invitation (the old link stops working)", async () => {
    const owner = await account();
    const dave = await account();
    const first = await invite(owner.token, dave.email, "VIEWER");
    const second = await invite(owner.token, dave.email, "MEMBER");
    const listed = (await h.ok("{ invitations { id role } }", {}, owner.token)).invitations;
    assert.deepEqual(listed, [{ id: second.invitation.id, role: "MEMBER" }]);
    const old = await h.gql(ACCEPT, { t: first.token }, dave.token);
    assert.equal(old.errors?.[0]?.extensions?.reason, "INVITATION_REVOKED");
    assert.equal((await h.ok(ACCEPT, { t: second.token }, dave.token)).acceptInvitation.myRole, "MEMBER");
  });

  it("one token used twice at once adds one membership", async () => {
    const owner = await account();
    const erin = await account();
    const inv = await invite(owner.token, erin.email, "MEMBER");
    const results = await Promise.all([1, 2, 3].map(() => h.gql(ACCEPT, { t: inv.token }, erin.token)));
    assert.equal(results.filter((r) => !r.errors).length, 1, JSON.stringify(results));
    const count = await h.cp.dataSource.query(
      "SELECT count(*)::int AS n FROM memberships WHERE workspace_id = $1 AND account_id = $2",
      [owner.workspaceId, erin.accountId],
    );
    assert.equal(count[0].n, 1);
  });

  it("signUp with an invitation: the new account joins only the invited workspace; a refused invitation creates nothing", async () => {
    const owner = await account();
    const email = `invited-${Date.now()}@example.com`;
    const inv = await invite(owner.token, email, "VIEWER");
    // A wrong email (the invitation is for someone else): no account is created.
    const wrong = await h.gql(SIGN_UP, {
      i: { email: `other-${email}`, password: "correct horse battery", invitationToken: inv.token },
    });
    assert.equal(wrong.errors?.[0]?.extensions?.reason, "INVITATION_EMAIL_MISMATCH");
    assert.equal(
      (await h.cp.dataSource.query("SELECT 1 FROM accounts WHERE email = $1", [`other-${email}`])).length,
      0,
    );
    // Without an invitation a workspace name is still required.
    const noName = await h.gql(SIGN_UP, { i: { email: `x-${email}`, password: "correct horse battery" } });
    assert.equal(noName.errors?.[0]?.extensions?.field, "workspaceName");

    const d = await h.ok(SIGN_UP, {
      i: { email: email.toUpperCase(), password: "correct horse battery", invitationToken: inv.token },
    });
    const ws = await h.ok("{ workspaces { id myRole } workspace { id } }", {}, d.signUp.token);
    assert.deepEqual(ws.workspaces, [{ id: owner.workspaceId, myRole: "VIEWER" }]);
    assert.equal(ws.workspace.id, owner.workspaceId, "the default workspace is the only one");
    // The token is spent: signing up again with it fails and creates no account.
    const again = await h.gql(SIGN_UP, {
      i: { email: `again-${email}`, password: "correct horse battery", invitationToken: inv.token },
    });
    assert.equal(again.errors?.[0]?.extensions?.reason, "INVITATION_USED");
    assert.equal(
      (await h.cp.dataSource.query("SELECT 1 FROM accounts WHERE email = $1", [`again-${email}`])).length,
      0,
    );
    const expired = await invite(owner.token, `late-${email}`, "MEMBER");
    await h.cp.dataSource.query(
      "UPDATE invitations SET expires_at = now() - interval '1 second' WHERE id = $1",
      [expired.invitation.id],
    );
    const late = await h.gql(SIGN_UP, {
      i: { email: `late-${email}`, password: "correct horse battery", invitationToken: expired.token },
    });
    assert.equal(late.errors?.[0]?.extensions?.reason, "INVITATION_EXPIRED");
    assert.equal(
      (await h.cp.dataSource.query("SELECT 1 FROM accounts WHERE email = $1", [`late-${email}`])).length,
      0,
    );
    // With a workspace name as well, the account also gets a workspace of its own.
    const both = await invite(owner.token, `both-${email}`, "MEMBER");
    const b = await h.ok(SIGN_UP, {
      i: {
        email: `both-${email}`,
        password: "correct horse battery",
        workspaceName: "Mine",
        invitationToken: both.token,
      },
    });
    const bws = await h.ok("{ workspaces { name myRole } }", {}, b.signUp.token);
    assert.deepEqual(bws.workspaces.map((w: Json) => w.myRole).sort(), ["MEMBER", "OWNER"]);
  });

  it("roles: the OWNER changes and removes members; an ADMIN manages only MEMBERs and VIEWERs", async () => {
    const owner = await account();
    const admin = await account();
    const member = await account();
    const viewer = await account();
    const adminId = await join(owner, admin, "ADMIN");
    const memberId = await join(owner, member, "MEMBER");
    const viewerId = await join(owner, viewer, "VIEWER");
    const CHANGE = `mutation($m: ID!, $r: WorkspaceRole!) { changeMemberRole(memberId: $m, role: $r) { id role } }`;
    // The ADMIN makes the MEMBER a VIEWER and back; it may not make anyone ADMIN or touch another ADMIN.
    assert.equal(
      (await h.ok(CHANGE, { m: memberId, r: "VIEWER" }, admin.token)).changeMemberRole.role,
      "VIEWER",
    );
    assert.equal(
      (await h.ok(CHANGE, { m: memberId, r: "MEMBER" }, admin.token)).changeMemberRole.role,
      "MEMBER",
    );
    assert.equal(code(await h.gql(CHANGE, { m: viewerId, r: "ADMIN" }, admin.token)), "FORBIDDEN");
    assert.equal(code(await h.gql(CHANGE, { m: adminId, r: "VIEWER" }, admin.token)), "FORBIDDEN");
    assert.equal(code(await h.gql(CHANGE, { m: memberId, r: "OWNER" }, owner.token)), "BAD_USER_INPUT");
    // The OWNER promotes the VIEWER to ADMIN.
    assert.equal(
      (await h.ok(CHANGE, { m: viewerId, r: "ADMIN" }, owner.token)).changeMemberRole.role,
      "ADMIN",
    );
    const members = (await h.ok("{ members { email role isCaller } }", {}, owner.token)).members as Json[];
    assert.deepEqual(
      members.map((m) => [m.email, m.role, m.isCaller]),
      [
        [owner.email, "OWNER", true],
        [admin.email, "ADMIN", false],
        [viewer.email, "ADMIN", false],
        [member.email, "MEMBER", false],
      ],
    );
    // The ADMIN removes the MEMBER: its token still works, but the workspace is gone for it.
    assert.equal(
      (await h.ok(`mutation($m: ID!) { removeMember(memberId: $m) }`, { m: memberId }, admin.token))
        .removeMember,
      memberId,
    );
    const gone = await h.gql(
      "query($w: ID) { workspace(id: $w) { id } }",
      { w: owner.workspaceId },
      member.token,
    );
    assert.equal(code(gone), "NOT_FOUND");
    assert.equal((await h.ok("{ workspace { id } }", {}, member.token)).workspace.id, member.workspaceId);
    // A member leaves by itself.
    assert.equal(
      (
        await h.ok(
          `mutation($w: ID!) { leaveWorkspace(workspaceId: $w) }`,
          { w: owner.workspaceId },
          viewer.token,
        )
      ).leaveWorkspace,
      viewerId,
    );
    assert.equal(
      code(
        await h.gql(
          "query($w: ID) { members(workspaceId: $w) { id } }",
          { w: owner.workspaceId },
          viewer.token,
        ),
      ),
      "NOT_FOUND",
    );
  });

  it("ownership: exactly one OWNER; the owner cannot leave or be demoted; transfer makes the old owner ADMIN", async () => {
    const owner = await account();
    const next = await account();
    const nextId = await join(owner, next, "MEMBER");
    const ownerId = (await h.ok("{ members { id isCaller } }", {}, owner.token)).members.find(
      (m: Json) => m.isCaller,
    ).id;
    const leave = await h.gql(
      `mutation($w: ID!) { leaveWorkspace(workspaceId: $w) }`,
      { w: owner.workspaceId },
      owner.token,
    );
    assert.equal(code(leave), "FORBIDDEN");
    assert.match(leave.errors![0]!.message, /transfers ownership first/);
    const demote = await h.gql(
      `mutation($m: ID!) { changeMemberRole(memberId: $m, role: ADMIN) { id } }`,
      { m: ownerId },
      owner.token,
    );
    assert.equal(code(demote), "BAD_USER_INPUT");
    assert.deepEqual(await owners(owner.workspaceId), [owner.accountId]);

    const t = await h.ok(
      `mutation($m: ID!) { transferOwnership(memberId: $m) { id role email } }`,
      { m: nextId },
      owner.token,
    );
    assert.deepEqual(t.transferOwnership, { id: nextId, role: "OWNER", email: next.email });
    assert.deepEqual(await owners(owner.workspaceId), [next.accountId]);
    const mine = await h.ok(
      `query($w: ID) { workspace(id: $w) { myRole } }`,
      { w: owner.workspaceId },
      owner.token,
    );
    assert.equal(mine.workspace.myRole, "ADMIN");
    // The new owner has the owner's rights; the old one no longer.
    const plan = `mutation($w: ID) { changePlan(plan: "growth", workspaceId: $w) { plan { name } } }`;
    assert.equal(code(await h.gql(plan, { w: owner.workspaceId }, owner.token)), "FORBIDDEN");
    assert.equal((await h.ok(plan, { w: owner.workspaceId }, next.token)).changePlan.plan.name, "growth");
    // ... and the former owner may now leave.
    await h.ok(
      `mutation($w: ID!) { leaveWorkspace(workspaceId: $w) }`,
      { w: owner.workspaceId },
      owner.token,
    );
    assert.deepEqual(await owners(owner.workspaceId), [next.accountId]);
    // Two transfers at once still leave one owner.
    const a = await account();
    const b = await account();
    const aId = await join(next, a, "ADMIN");
    const bId = await join(next, b, "ADMIN");
    const TRANSFER = `mutation($m: ID!) { transferOwnership(memberId: $m) { id } }`;
    const rs = await Promise.all([
      h.gql(TRANSFER, { m: aId }, next.token),
      h.gql(TRANSFER, { m: bId }, next.token),
    ]);
    assert.equal(rs.filter((r) => !r.errors).length, 1, JSON.stringify(rs));
    assert.equal(code(rs.find((r) => r.errors)!), "FORBIDDEN", "the loser is no longer the owner");
    assert.equal((await owners(owner.workspaceId)).length, 1);
  });

  it("a removed, leaving or demoted inviter's pending invitations are revoked; others' stay", async () => {
    const CHANGE = `mutation($m: ID!, $r: WorkspaceRole!) { changeMemberRole(memberId: $m, role: $r) { id role } }`;
    const owner = await account();
    const [demoted, removed, leaver, bystander] = [
      await account(),
      await account(),
      await account(),
      await account(),
    ];
    const ids: Record<string, string> = {};
    for (const [name, a] of Object.entries({ demoted, removed, leaver, bystander })) {
      ids[name] = await join(owner, a, "ADMIN");
    }
    /** Two pending invitations (MEMBER and VIEWER) sent by `by`; their tokens. */
    const sent = async (by: Account) => [
      (await invite(by.token, `to-member-${by.accountId}@example.com`, "MEMBER", owner.workspaceId))
        .token as string,
      (await invite(by.token, `to-viewer-${by.accountId}@example.com`, "VIEWER", owner.workspaceId))
        .token as string,
    ];
    const tokens = {
      demoted: await sent(demoted),
      removed: await sent(removed),
      leaver: await sent(leaver),
      bystander: await sent(bystander),
      owner: await sent(owner),
    };
    const status = async (t: string) =>
      (await h.ok("query($t: String!) { invitation(token: $t) { status } }", { t })).invitation.status;

    // ADMIN -> MEMBER: may no longer invite at all.
    await h.ok(CHANGE, { m: ids.demoted, r: "MEMBER" }, owner.token);
    await h.ok(`mutation($m: ID!) { removeMember(memberId: $m) }`, { m: ids.removed }, owner.token);
    await h.ok(
      `mutation($w: ID!) { leaveWorkspace(workspaceId: $w) }`,
      { w: owner.workspaceId },
      leaver.token,
    );
    for (const who of ["demoted", "removed", "leaver"] as const) {
      for (const t of tokens[who]) assert.equal(await status(t), "REVOKED", who);
    }
    for (const who of ["bystander", "owner"] as const) {
      for (const t of tokens[who]) assert.equal(await status(t), "PENDING", who);
    }
    // A revoked link cannot be used.
    const invitee = await h.signUp(`to-member-${demoted.accountId}@example.com`);
    const refused = await h.gql(ACCEPT, { t: tokens.demoted[0] }, invitee.token);
    assert.equal(refused.errors![0]!.extensions!.reason, "INVITATION_REVOKED");
    const listed = (
      await h.ok(
        "query($w: ID) { invitations(workspaceId: $w) { id invitedByEmail } }",
        { w: owner.workspaceId },
        owner.token,
      )
    ).invitations as Json[];
    assert.deepEqual(new Set(listed.map((i) => i.invitedByEmail)), new Set([bystander.email, owner.email]));

    // Ownership moves: the old owner (now ADMIN) keeps invitations it could still send, loses ADMIN ones.
    const adminInvite = (await invite(owner.token, "future-admin@example.com", "ADMIN")).token as string;
    await h.ok(
      `mutation($m: ID!) { transferOwnership(memberId: $m) { id } }`,
      { m: ids.bystander },
      owner.token,
    );
    assert.equal(await status(adminInvite), "REVOKED");
    for (const t of tokens.owner) assert.equal(await status(t), "PENDING");
    // Promotion revokes nothing.
    const newcomer = await account();
    await h.ok(
      ACCEPT,
      { t: (await invite(bystander.token, newcomer.email, "VIEWER", owner.workspaceId)).token },
      newcomer.token,
    );
    const memberId = (
      (
        await h.ok(
          "query($w: ID) { members(workspaceId: $w) { id accountId } }",
          { w: owner.workspaceId },
          bystander.token,
        )
      ).members as Json[]
    ).find((m) => m.accountId === newcomer.accountId)!.id;
    await h.ok(CHANGE, { m: memberId, r: "ADMIN" }, bystander.token);
    const fromNewcomer = (
      await invite(newcomer.token, "by-newcomer@example.com", "VIEWER", owner.workspaceId)
    ).token as string;
    await h.ok(CHANGE, { m: memberId, r: "ADMIN" }, bystander.token);
    assert.equal(await status(fromNewcomer), "PENDING");
  });

  it("several workspaces: workspaceId is honoured everywhere and defaults to the oldest membership", async () => {
    const owner = await account();
    const bob = await account();
    await join(owner, bob, "ADMIN");
    const mine = await createApp(h, bob.token, "bob's own");
    const created = await h.ok(
      `mutation($w: ID) { createApp(input: { name: "team app", environment: PRODUCTION }, workspaceId: $w) { id workspaceId } }`,
      { w: owner.workspaceId },
      bob.token,
    );
    assert.equal(created.createApp.workspaceId, owner.workspaceId);
    const lists = await h.ok(
      `query($w: ID) { def: apps { id } team: apps(workspaceId: $w) { id } teamWs: workspace(id: $w) { apps { id } } }`,
      { w: owner.workspaceId },
      bob.token,
    );
    assert.deepEqual(lists.def, [{ id: mine.id }]);
    assert.deepEqual(lists.team, [{ id: created.createApp.id }]);
    assert.deepEqual(lists.teamWs.apps, [{ id: created.createApp.id }]);
    // Usage of an app in the non-default workspace, by app alone.
    const u = await h.ok(
      `query($a: ID) { usage(filter: { appId: $a }) { workspaceId today { count } } }`,
      { a: created.createApp.id },
      bob.token,
    );
    assert.equal(u.usage.workspaceId, owner.workspaceId);
    // A workspaceId that disagrees with the app is refused.
    const bad = await h.gql(
      `query($a: ID, $w: ID) { usage(filter: { appId: $a, workspaceId: $w }) { workspaceId } }`,
      { a: created.createApp.id, w: bob.workspaceId },
      bob.token,
    );
    assert.equal(code(bad), "NOT_FOUND");
    // Members and invitations of each workspace.
    const m = await h.ok(
      `query($w: ID) { team: members(workspaceId: $w) { email } own: members { email } }`,
      { w: owner.workspaceId },
      bob.token,
    );
    assert.equal(m.team.length, 2);
    assert.deepEqual(m.own, [{ email: bob.email }]);
    // A new workspace of one's own.
    const nw = await h.ok(
      `mutation { createWorkspace(name: "Side") { id name myRole plan { name } } }`,
      {},
      bob.token,
    );
    assert.deepEqual(
      { ...nw.createWorkspace, id: undefined },
      { id: undefined, name: "Side", myRole: "OWNER", plan: { name: "free" } },
    );
    const all = await h.ok("{ workspaces { id } }", {}, bob.token);
    assert.equal(all.workspaces.length, 3);
    assert.equal(
      code(await h.gql(`mutation { createWorkspace(name: "  ") { id } }`, {}, bob.token)),
      "BAD_USER_INPUT",
    );
  });

  it("an ADMIN of workspace A cannot touch workspace B (NOT_FOUND, B unchanged)", async () => {
    const a = await account();
    const b = await account();
    const adminOfA = await account();
    await join(a, adminOfA, "ADMIN");
    const bMember = await account();
    const bMemberId = await join(b, bMember, "MEMBER");
    const bInv = await invite(b.token, "pending@example.com", "VIEWER");
    const bApp = await createApp(h, b.token, "B app");
    const snapshot = async () => ({
      members: await h.cp.dataSource.query(
        "SELECT id, role FROM memberships WHERE workspace_id = $1 ORDER BY id",
        [b.workspaceId],
      ),
      invitations: await h.cp.dataSource.query(
        "SELECT id, revoked_at, accepted_at FROM invitations WHERE workspace_id = $1 ORDER BY id",
        [b.workspaceId],
      ),
      apps: await h.cp.dataSource.query("SELECT id, name FROM apps WHERE workspace_id = $1", [b.workspaceId]),
    });
    const before = await snapshot();
    const attempts: [string, Record<string, unknown>][] = [
      [`query($w: ID) { members(workspaceId: $w) { id } }`, { w: b.workspaceId }],
      [`query($w: ID) { invitations(workspaceId: $w) { id } }`, { w: b.workspaceId }],
      [
        `mutation($w: ID) { inviteMember(email: "x@example.com", role: VIEWER, workspaceId: $w) { token } }`,
        { w: b.workspaceId },
      ],
      [`mutation($id: ID!) { revokeInvitation(id: $id) { id } }`, { id: bInv.invitation.id }],
      [`mutation($m: ID!) { changeMemberRole(memberId: $m, role: VIEWER) { id } }`, { m: bMemberId }],
      [`mutation($m: ID!) { removeMember(memberId: $m) }`, { m: bMemberId }],
      [`mutation($m: ID!) { transferOwnership(memberId: $m) { id } }`, { m: bMemberId }],
      [`mutation($w: ID!) { leaveWorkspace(workspaceId: $w) }`, { w: b.workspaceId }],
      [`mutation($id: ID!) { deleteApp(id: $id) }`, { id: bApp.id }],
      [
        `mutation($w: ID) { createApp(input: { name: "x", environment: PRODUCTION }, workspaceId: $w) { id } }`,
        { w: b.workspaceId },
      ],
    ];
    for (const [q, v] of attempts) {
      const r = await h.gql(q, v, adminOfA.token);
      assert.equal(code(r), "NOT_FOUND", `${q}: ${JSON.stringify(r.errors)}`);
    }
    assert.deepEqual(await snapshot(), before);
  });

  it("the operator manages any workspace's members (its invitations have no inviter)", async () => {
    const owner = await account();
    const inv = await invite(ADMIN_TOKEN, "ops-invite@example.com", "ADMIN", owner.workspaceId);
    assert.equal(inv.invitation.invitedByEmail, null);
    const r = await h.gql(INVITE, { e: "y@example.com", r: "MEMBER" }, ADMIN_TOKEN);
    assert.equal(code(r), "BAD_USER_INPUT", "the operator must name a workspace");
    const listed = await h.ok(
      `query($w: ID) { invitations(workspaceId: $w) { id } }`,
      { w: owner.workspaceId },
      ADMIN_TOKEN,
    );
    assert.deepEqual(listed.invitations, [{ id: inv.invitation.id }]);
  });
});
