import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { ADMIN_TOKEN, code, type GqlResult, type Harness, type Json, startHarness } from "./harness";

/**
 * Every resolver that touches a workspace, tried by every kind of caller: its OWNER, an ADMIN, a MEMBER,
 * a VIEWER, a member who was removed, an account that never belonged (with a workspace of its own) and
 * the platform operator. Each attempt gets fresh targets; an allowed call must succeed, a refused one
 * must answer the expected code and leave the workspace exactly as it was (apps, keys, allowlists,
 * nodes, members, invitations, plan, as read from Postgres).
 */

/** A fresh EC P-256 public key (PEM) for the JWT key cases. */
function ecPublicPem(): string {
  return generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({
    type: "spki",
    format: "pem",
  }) as string;
}

type Actor = "OWNER" | "ADMIN" | "MEMBER" | "VIEWER" | "REMOVED" | "OUTSIDER" | "OPERATOR";
const ACTORS: Actor[] = ["OWNER", "ADMIN", "MEMBER", "VIEWER", "REMOVED", "OUTSIDER", "OPERATOR"];
const ROLES = new Set<Actor>(["OWNER", "ADMIN", "MEMBER", "VIEWER"]);
const ALL_MEMBERS: Actor[] = ["OWNER", "ADMIN", "MEMBER", "VIEWER", "OPERATOR"];
const ADMINS: Actor[] = ["OWNER", "ADMIN", "OPERATOR"];

interface Case {
  name: string;
  query: string;
  /** Fresh targets for one attempt; `actor` is who will run `query`. */
  vars: (actor: Actor) => Promise<Record<string, unknown>>;
  allowed: Actor[];
  /** Expected code per refused actor, where it is not the default (FORBIDDEN for members, else NOT_FOUND). */
  refused?: Partial<Record<Actor, string>>;
  /** Undoes an allowed call that would change the fixture (ownership). */
  undo?: (vars: Record<string, unknown>) => Promise<void>;
  /** Runs the call as a fresh account holding the actor's role (the call consumes the membership). */
  freshActor?: boolean;
}

describe("control-plane: roles (every workspace resolver x every role)", function () {
  this.timeout(120_000);
  let h: Harness;
  let ws: string;
  let other: string;
  const tokens = new Map<Actor, string>();
  const emails = new Map<Actor, string>();
  const accountIds = new Map<Actor, string>();
  let ownerMemberId: string;
  let n = 0;

  const t = (a: Actor) => tokens.get(a)!;

  async function freshMember(role: "ADMIN" | "MEMBER" | "VIEWER", workspaceId = ws) {
    const email = `fresh${++n}-${Date.now()}@example.com`;
    const [acc] = await h.cp.dataSource.query(
      "INSERT INTO accounts (email, password_hash) VALUES ($1, 'unused') RETURNING id",
      [email],
    );
    const [ms] = await h.cp.dataSource.query(
      "INSERT INTO memberships (account_id, workspace_id, role) VALUES ($1, $2, $3) RETURNING id",
      [acc.id, workspaceId, role],
    );
    const token = await h.cp.services.auth.issueSessionToken(acc.id);
    return { accountId: acc.id as string, memberId: ms.id as string, token, email };
  }

  async function newApp(): Promise<{ id: string; apiKey: string }> {
    const d = await h.ok(
      `mutation($w: ID) { createApp(input: { name: "fixture", environment: PRODUCTION }, workspaceId: $w) { id apiKey } }`,
      { w: ws },
      ADMIN_TOKEN,
    );
    return d.createApp;
  }

  async function newNode(kind: "evm" | "validator" = "evm"): Promise<string> {
    const d = await h.ok(
      `mutation($i: DeployDedicatedNodeInput!, $w: ID) { deployDedicatedNode(input: $i, workspaceId: $w) { id } }`,
      {
        w: ws,
        i:
          kind === "evm"
            ? {
                displayName: `node${++n}`,
                network: "evm1",
                nodeType: "FULL",
                region: "local",
                launchArgs: { rpcMethods: "SAFE" },
              }
            : {
                displayName: `val${++n}`,
                network: "sub1",
                nodeType: "VALIDATOR",
                region: "local",
                launchArgs: { rpcMethods: "UNSAFE" },
              },
      },
      ADMIN_TOKEN,
    );
    return d.deployDedicatedNode.id;
  }

  async function newInvitation(role = "MEMBER", workspaceId = ws, email?: string) {
    const d = await h.ok(
      `mutation($e: String!, $r: WorkspaceRole!, $w: ID) { inviteMember(email: $e, role: $r, workspaceId: $w) { token invitation { id } } }`,
      { e: email ?? `invitee${++n}@example.com`, r: role, w: workspaceId },
      ADMIN_TOKEN,
    );
    return { id: d.inviteMember.invitation.id as string, token: d.inviteMember.token as string };
  }

  /** The workspace as stored: what a refused call must not change. */
  async function snapshot() {
    const q = (sql: string) => h.cp.dataSource.query(sql, [ws]);
    return {
      workspace: await q("SELECT name, plan_id FROM workspaces WHERE id = $1"),
      apps: await q("SELECT id, name, environment FROM apps WHERE workspace_id = $1 ORDER BY id"),
      keys: await q(
        "SELECT k.id, k.key_hash, k.expires_at, k.revoked_at FROM api_keys k JOIN apps a ON a.id = k.app_id WHERE a.workspace_id = $1 ORDER BY k.id",
      ),
      allowlist: await q(
        "SELECT e.id, e.value FROM allowlist_entries e JOIN apps a ON a.id = e.app_id WHERE a.workspace_id = $1 ORDER BY e.id",
      ),
      accessRules: await q(
        "SELECT r.app_id, r.method_mode, r.methods, r.requests_per_second, r.requests_per_day, r.user_agents, r.jwt_required FROM app_access_rules r JOIN apps a ON a.id = r.app_id WHERE a.workspace_id = $1 ORDER BY r.app_id",
      ),
      jwtKeys: await q(
        "SELECT k.id, k.kid FROM app_jwt_keys k JOIN apps a ON a.id = k.app_id WHERE a.workspace_id = $1 ORDER BY k.id",
      ),
      nodes: await q(
        "SELECT id, display_name, status, desired_state, generation, key_hash, validator_stash FROM dedicated_nodes WHERE workspace_id = $1 ORDER BY id",
      ),
      members: await q("SELECT id, account_id, role FROM memberships WHERE workspace_id = $1 ORDER BY id"),
      invitations: await q(
        "SELECT id, revoked_at, accepted_at FROM invitations WHERE workspace_id = $1 ORDER BY id",
      ),
    };
  }

  before(async () => {
    h = await startHarness();
    const owner = await h.signUp();
    ws = owner.workspaceId;
    tokens.set("OWNER", owner.token);
    accountIds.set("OWNER", owner.accountId);
    tokens.set("OPERATOR", ADMIN_TOKEN);
    await h.ok(
      `mutation {
        a: createNetwork(input: { slug: "evm1", name: "EVM", protocol: EVM, chainId: 1 }) { id }
        b: createNetwork(input: { slug: "sub1", name: "Sub", protocol: SUBSTRATE }) { id }
        p: upsertPlan(input: { name: "team-test", dailyRequestLimit: 1000000, requestsPerSecond: 100, maxDedicatedNodes: 1000, selfService: true }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "team-test") { id } }`,
      { w: ws },
      ADMIN_TOKEN,
    );
    // The members join through real invitations.
    for (const role of ["ADMIN", "MEMBER", "VIEWER", "REMOVED"] as const) {
      const who = await h.signUp();
      const email = (await h.ok("{ me { email } }", {}, who.token)).me.email;
      const inv = await h.ok(
        `mutation($e: String!, $r: WorkspaceRole!) { inviteMember(email: $e, role: $r) { token } }`,
        { e: email, r: role === "REMOVED" ? "MEMBER" : role },
        owner.token,
      );
      await h.ok(
        `mutation($t: String!) { acceptInvitation(token: $t) { id } }`,
        { t: inv.inviteMember.token },
        who.token,
      );
      tokens.set(role, who.token);
      emails.set(role, email);
      accountIds.set(role, who.accountId);
    }
    const members = (await h.ok("{ members { id accountId role } }", {}, owner.token)).members as Json[];
    ownerMemberId = members.find((m) => m.role === "OWNER")!.id;
    const removed = members.find((m) => m.accountId === accountIds.get("REMOVED"))!;
    await h.ok(`mutation($m: ID!) { removeMember(memberId: $m) }`, { m: removed.id }, owner.token);
    const outsider = await h.signUp();
    tokens.set("OUTSIDER", outsider.token);
    emails.set("OUTSIDER", (await h.ok("{ me { email } }", {}, outsider.token)).me.email);
    other = outsider.workspaceId;
    emails.set("OWNER", (await h.ok("{ me { email } }", {}, owner.token)).me.email);
  });

  after(async () => {
    await h?.close();
  });

  const cases: Case[] = [
    {
      name: "workspace(id)",
      query: `query($w: ID) { workspace(id: $w) { id myRole apps { id } } }`,
      vars: async () => ({ w: ws }),
      allowed: ALL_MEMBERS,
    },
    {
      name: "apps(workspaceId)",
      query: `query($w: ID) { apps(workspaceId: $w) { id } }`,
      vars: async () => ({ w: ws }),
      allowed: ALL_MEMBERS,
    },
    {
      name: "app(id) with its key, endpoints and allowlist",
      query: `query($id: ID!) { app(id: $id) { id apiKey apiKeyMasked allowlist { id } endpoints { httpsUrl } } }`,
      vars: async () => ({ id: (await newApp()).id }),
      allowed: ALL_MEMBERS,
    },
    {
      name: "dedicatedNodes(workspaceId)",
      query: `query($w: ID) { dedicatedNodes(workspaceId: $w) { id } }`,
      vars: async () => ({ w: ws }),
      allowed: ALL_MEMBERS,
    },
    {
      name: "dedicatedNode(id) with its key and events",
      query: `query($id: ID!) { dedicatedNode(id: $id) { id apiKey apiKeyMasked endpoints { httpUrl } events { type } } }`,
      vars: async () => ({ id: await newNode() }),
      allowed: ALL_MEMBERS,
    },
    {
      name: "usage(filter: { workspaceId })",
      query: `query($w: ID) { usage(filter: { workspaceId: $w }) { today { count limit } } }`,
      vars: async () => ({ w: ws }),
      allowed: ALL_MEMBERS,
    },
    {
      name: "usage(filter: { appId })",
      query: `query($a: ID) { usage(filter: { appId: $a }) { today { count } } }`,
      vars: async () => ({ a: (await newApp()).id }),
      allowed: ALL_MEMBERS,
    },
    {
      name: "usageStatement(workspaceId)",
      query: `query($w: ID, $m: String!) { usageStatement(workspaceId: $w, month: $m) { requests computeUnits csv } }`,
      vars: async () => ({ w: ws, m: new Date().toISOString().slice(0, 7) }),
      allowed: ADMINS,
    },
    {
      name: "members(workspaceId)",
      query: `query($w: ID) { members(workspaceId: $w) { id email role } }`,
      vars: async () => ({ w: ws }),
      allowed: ALL_MEMBERS,
    },
    {
      name: "invitations(workspaceId)",
      query: `query($w: ID) { invitations(workspaceId: $w) { id email } }`,
      vars: async () => ({ w: ws }),
      allowed: ADMINS,
    },
    {
      name: "createApp(workspaceId)",
      query: `mutation($w: ID) { createApp(input: { name: "new", environment: DEVELOPMENT }, workspaceId: $w) { id } }`,
      vars: async () => ({ w: ws }),
      allowed: ["OWNER", "ADMIN", "MEMBER", "OPERATOR"],
    },
    {
      name: "updateApp",
      query: `mutation($id: ID!) { updateApp(id: $id, input: { name: "renamed" }) { id } }`,
      vars: async () => ({ id: (await newApp()).id }),
      allowed: ADMINS,
    },
    {
      name: "deleteApp",
      query: `mutation($id: ID!) { deleteApp(id: $id) }`,
      vars: async () => ({ id: (await newApp()).id }),
      allowed: ADMINS,
    },
    {
      name: "regenerateApiKey",
      query: `mutation($id: ID!) { regenerateApiKey(appId: $id) { apiKey } }`,
      vars: async () => ({ id: (await newApp()).id }),
      allowed: ADMINS,
    },
    {
      name: "addAllowlistEntry",
      query: `mutation($id: ID!) { addAllowlistEntry(appId: $id, input: { kind: IP, value: "203.0.113.9" }) { id } }`,
      vars: async () => ({ id: (await newApp()).id }),
      allowed: ADMINS,
    },
    {
      name: "removeAllowlistEntry",
      query: `mutation($id: ID!, $e: ID!) { removeAllowlistEntry(appId: $id, entryId: $e) { id } }`,
      vars: async () => {
        const app = await newApp();
        const e = await h.ok(
          `mutation($a: ID!) { addAllowlistEntry(appId: $a, input: { kind: IP, value: "198.51.100.1" }) { id } }`,
          { a: app.id },
          ADMIN_TOKEN,
        );
        return { id: app.id, e: e.addAllowlistEntry.id };
      },
      allowed: ADMINS,
    },
    {
      name: "app(id) with its access rules and JWT keys",
      query: `query($id: ID!) { app(id: $id) { accessRules { methodMode methods requestsPerSecond jwtRequired } jwtKeys { kid thumbprint } } }`,
      vars: async () => ({ id: (await newApp()).id }),
      allowed: ALL_MEMBERS,
    },
    {
      name: "setAppAccessRules",
      query: `mutation($id: ID!) { setAppAccessRules(appId: $id, input: { methods: ["eth_getLogs"], requestsPerSecond: 5, userAgents: ["MyWallet/*"] }) { methods } }`,
      vars: async () => ({ id: (await newApp()).id }),
      allowed: ADMINS,
    },
    {
      name: "addJwtKey",
      query: `mutation($id: ID!, $k: String!) { addJwtKey(appId: $id, input: { kid: "k1", key: $k }) { id } }`,
      vars: async () => ({ id: (await newApp()).id, k: ecPublicPem() }),
      allowed: ADMINS,
    },
    {
      name: "removeJwtKey",
      query: `mutation($id: ID!, $k: ID!) { removeJwtKey(appId: $id, keyId: $k) { id } }`,
      vars: async () => {
        const app = await newApp();
        const k = await h.ok(
          `mutation($a: ID!, $k: String!) { addJwtKey(appId: $a, input: { kid: "k1", key: $k }) { id } }`,
          { a: app.id, k: ecPublicPem() },
          ADMIN_TOKEN,
        );
        return { id: app.id, k: k.addJwtKey.id };
      },
      allowed: ADMINS,
    },
    {
      name: "deployDedicatedNode(workspaceId)",
      query: `mutation($w: ID) { deployDedicatedNode(workspaceId: $w, input: { displayName: "d", network: "evm1", nodeType: FULL, region: "local", launchArgs: { rpcMethods: SAFE } }) { id } }`,
      vars: async () => ({ w: ws }),
      allowed: ADMINS,
    },
    {
      name: "updateDedicatedNode",
      query: `mutation($id: ID!) { updateDedicatedNode(id: $id, input: { displayName: "renamed" }) { id } }`,
      vars: async () => ({ id: await newNode() }),
      allowed: ADMINS,
    },
    {
      name: "restartDedicatedNode",
      query: `mutation($id: ID!) { restartDedicatedNode(id: $id) { id } }`,
      vars: async () => ({ id: await newNode() }),
      allowed: ADMINS,
    },
    {
      name: "stopDedicatedNode",
      query: `mutation($id: ID!) { stopDedicatedNode(id: $id) { id } }`,
      vars: async () => ({ id: await newNode() }),
      allowed: ADMINS,
    },
    {
      name: "deleteDedicatedNode",
      query: `mutation($id: ID!) { deleteDedicatedNode(id: $id) { id status } }`,
      vars: async () => ({ id: await newNode() }),
      allowed: ADMINS,
    },
    {
      name: "regenerateDedicatedNodeApiKey",
      query: `mutation($id: ID!) { regenerateDedicatedNodeApiKey(id: $id) { id } }`,
      vars: async () => ({ id: await newNode() }),
      allowed: ADMINS,
    },
    {
      name: "setValidatorStash",
      query: `mutation($id: ID!) { setValidatorStash(nodeId: $id, stash: "0x${"11".repeat(32)}") { id } }`,
      vars: async () => ({ id: await newNode("validator") }),
      allowed: ADMINS,
    },
    {
      name: "changePlan(workspaceId)",
      query: `mutation($w: ID) { changePlan(plan: "team-test", workspaceId: $w) { id } }`,
      vars: async () => ({ w: ws }),
      allowed: ["OWNER", "OPERATOR"],
    },
    {
      name: "inviteMember(role: MEMBER)",
      query: `mutation($w: ID, $e: String!) { inviteMember(email: $e, role: MEMBER, workspaceId: $w) { token link } }`,
      vars: async () => ({ w: ws, e: `new${++n}@example.com` }),
      allowed: ADMINS,
    },
    {
      name: "inviteMember(role: ADMIN)",
      query: `mutation($w: ID, $e: String!) { inviteMember(email: $e, role: ADMIN, workspaceId: $w) { token link } }`,
      vars: async () => ({ w: ws, e: `new${++n}@example.com` }),
      allowed: ["OWNER", "OPERATOR"],
    },
    {
      name: "revokeInvitation (a MEMBER invitation)",
      query: `mutation($id: ID!) { revokeInvitation(id: $id) { id status } }`,
      vars: async () => ({ id: (await newInvitation("MEMBER")).id }),
      allowed: ADMINS,
    },
    {
      name: "revokeInvitation (an ADMIN invitation)",
      query: `mutation($id: ID!) { revokeInvitation(id: $id) { id status } }`,
      vars: async () => ({ id: (await newInvitation("ADMIN")).id }),
      allowed: ["OWNER", "OPERATOR"],
    },
    {
      name: "changeMemberRole (a MEMBER to VIEWER)",
      query: `mutation($m: ID!) { changeMemberRole(memberId: $m, role: VIEWER) { id role } }`,
      vars: async () => ({ m: (await freshMember("MEMBER")).memberId }),
      allowed: ADMINS,
    },
    {
      name: "changeMemberRole (an ADMIN to MEMBER)",
      query: `mutation($m: ID!) { changeMemberRole(memberId: $m, role: MEMBER) { id role } }`,
      vars: async () => ({ m: (await freshMember("ADMIN")).memberId }),
      allowed: ["OWNER", "OPERATOR"],
    },
    {
      name: "changeMemberRole (the OWNER to ADMIN)",
      query: `mutation($m: ID!) { changeMemberRole(memberId: $m, role: ADMIN) { id role } }`,
      vars: async () => ({ m: ownerMemberId }),
      allowed: [],
      // The owner itself and the operator are told to transfer ownership: one OWNER always.
      refused: { OWNER: "BAD_USER_INPUT", OPERATOR: "BAD_USER_INPUT" },
    },
    {
      name: "removeMember (a VIEWER)",
      query: `mutation($m: ID!) { removeMember(memberId: $m) }`,
      vars: async () => ({ m: (await freshMember("VIEWER")).memberId }),
      allowed: ADMINS,
    },
    {
      name: "removeMember (an ADMIN)",
      query: `mutation($m: ID!) { removeMember(memberId: $m) }`,
      vars: async () => ({ m: (await freshMember("ADMIN")).memberId }),
      allowed: ["OWNER", "OPERATOR"],
    },
    {
      name: "removeMember (the OWNER)",
      query: `mutation($m: ID!) { removeMember(memberId: $m) }`,
      vars: async () => ({ m: ownerMemberId }),
      allowed: [],
      // The owner removing itself is leaving, which its role may not do.
      refused: { OPERATOR: "BAD_USER_INPUT" },
    },
    {
      name: "transferOwnership",
      query: `mutation($m: ID!) { transferOwnership(memberId: $m) { id role } }`,
      vars: async () => {
        const target = await freshMember("ADMIN");
        return { m: target.memberId, token: target.token };
      },
      allowed: ["OWNER", "OPERATOR"],
      undo: async (v) => {
        await h.ok(
          `mutation($m: ID!) { transferOwnership(memberId: $m) { id } }`,
          { m: ownerMemberId },
          v.token as string,
        );
      },
    },
    {
      name: "leaveWorkspace",
      query: `mutation($w: ID!) { leaveWorkspace(workspaceId: $w) }`,
      vars: async () => ({ w: ws }),
      allowed: ["ADMIN", "MEMBER", "VIEWER"],
      refused: { OPERATOR: "FORBIDDEN" },
      freshActor: true,
    },
    {
      name: "acceptInvitation (to another workspace, for the caller's email)",
      query: `mutation($t: String!) { acceptInvitation(token: $t) { id myRole } }`,
      vars: async (actor) => {
        // Each actor is invited to a workspace it is not in yet (the outsider: into the owner's).
        const target = actor === "OUTSIDER" ? ws : other;
        const email = emails.get(actor) ?? "operator@example.com";
        const { token } = await newInvitation("VIEWER", target, email);
        return { t: token };
      },
      allowed: ["OWNER", "ADMIN", "MEMBER", "VIEWER", "REMOVED", "OUTSIDER"],
      refused: { OPERATOR: "FORBIDDEN" },
      undo: async () => {
        // The outsider joined the fixture workspace as a VIEWER: take it out again.
        await h.cp.dataSource.query("DELETE FROM memberships WHERE workspace_id = $1 AND account_id = $2", [
          ws,
          (
            await h.cp.dataSource.query("SELECT id FROM accounts WHERE email = $1", [emails.get("OUTSIDER")])
          )[0].id,
        ]);
      },
    },
    {
      name: "createWorkspace",
      query: `mutation { createWorkspace(name: "Side project") { id myRole } }`,
      vars: async () => ({}),
      allowed: ["OWNER", "ADMIN", "MEMBER", "VIEWER", "REMOVED", "OUTSIDER"],
      refused: { OPERATOR: "FORBIDDEN" },
    },
  ];

  function expectedRefusal(c: Case, actor: Actor): string {
    return c.refused?.[actor] ?? (ROLES.has(actor) || actor === "OPERATOR" ? "FORBIDDEN" : "NOT_FOUND");
  }

  for (const c of cases) {
    describe(c.name, () => {
      for (const actor of ACTORS) {
        const allowed = c.allowed.includes(actor);
        it(`${actor}: ${allowed ? "allowed" : expectedRefusal(c, actor)}`, async () => {
          const vars = await c.vars(actor);
          let token = t(actor);
          if (c.freshActor && (actor === "ADMIN" || actor === "MEMBER" || actor === "VIEWER")) {
            token = (await freshMember(actor)).token;
          }
          const before = await snapshot();
          const r: GqlResult = await h.gql(c.query, vars, token);
          if (allowed) {
            assert.equal(r.errors, undefined, JSON.stringify(r.errors));
            assert.ok(r.data);
            await c.undo?.(vars);
            return;
          }
          const expected = expectedRefusal(c, actor);
          assert.equal(code(r), expected, JSON.stringify(r.errors));
          if (expected === "FORBIDDEN" && ROLES.has(actor)) {
            const ext = r.errors?.[0]?.extensions ?? {};
            // The rule that refused: the caller's role (and, from the role table, the permission).
            assert.equal(ext.role, actor);
          }
          assert.deepEqual(await snapshot(), before, "a refused call changed nothing");
        });
      }
    });
  }

  it("a VIEWER sees keys masked everywhere (apps, endpoints, nodes); a MEMBER sees them in clear", async () => {
    const app = await newApp();
    const nodeId = await newNode();
    const q = `query($a: ID!, $n: ID!, $w: ID) {
      app(id: $a) { apiKey apiKeyMasked endpoints { httpsUrl wssUrl exampleCommand } }
      apps(workspaceId: $w) { id apiKey }
      workspace(id: $w) { apps { id apiKey } }
      dedicatedNode(id: $n) { apiKey apiKeyMasked endpoints { httpUrl wsUrl } } }`;
    const vars = { a: app.id, n: nodeId, w: ws };
    const nodeKey = (
      await h.ok(`query($n: ID!) { dedicatedNode(id: $n) { apiKey } }`, { n: nodeId }, t("OWNER"))
    ).dedicatedNode.apiKey as string;
    const member = await h.ok(q, vars, t("MEMBER"));
    assert.equal(member.app.apiKey, app.apiKey);
    assert.equal(member.app.apiKeyMasked, false);
    assert.equal(member.dedicatedNode.apiKey, nodeKey);
    const viewer = await h.ok(q, vars, t("VIEWER"));
    const text = JSON.stringify(viewer);
    assert.ok(!text.includes(app.apiKey), "the app key never reaches a VIEWER");
    assert.ok(!text.includes(nodeKey), "the node key never reaches a VIEWER");
    assert.equal(viewer.app.apiKeyMasked, true);
    assert.equal(viewer.app.apiKey, `${app.apiKey.slice(0, 4)}********${app.apiKey.slice(-4)}`);
    assert.equal(viewer.dedicatedNode.apiKeyMasked, true);
    assert.match(viewer.dedicatedNode.apiKey, /^.{4}\*{8}.{4}$/);
    for (const e of viewer.app.endpoints)
      assert.ok(e.httpsUrl.includes(encodeURIComponent(viewer.app.apiKey)));
    // The masked key is not a key: the data plane's lookup hash of it matches nothing published.
    assert.equal(await h.redis.get(h.names.apiKey(hashApiKey(viewer.app.apiKey))), null);
  });

  it("the VIEWER's own view of roles: myRole per workspace, FORBIDDEN names role and permission", async () => {
    const d = await h.ok(`query($w: ID) { workspace(id: $w) { myRole } }`, { w: ws }, t("VIEWER"));
    assert.equal(d.workspace.myRole, "VIEWER");
    const r = await h.gql(
      `mutation($w: ID) { createApp(input: { name: "x", environment: DEVELOPMENT }, workspaceId: $w) { id } }`,
      { w: ws },
      t("VIEWER"),
    );
    assert.equal(code(r), "FORBIDDEN");
    assert.equal(r.errors?.[0]?.extensions?.permission, "CREATE_APPS");
    assert.match(r.errors![0]!.message, /A VIEWER of this workspace may not create apps/);
  });
});
