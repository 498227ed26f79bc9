import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { Client } from "pg";
import { ADMIN_TOKEN, code, Harness, startHarness } from "./harness";

const SIGN_UP = `mutation($i: SignUpInput!) { signUp(input: $i) { token account { id email } } }`;
const LOG_IN = `mutation($e: String!, $p: String!) { logIn(email: $e, password: $p) { token account { id email } } }`;

describe("control-plane: accounts and tokens", () => {
  let h: Harness;
  before(async () => {
    h = await startHarness({ LOGIN_MAX_ATTEMPTS: "4", LOGIN_WINDOW_SECONDS: "60" });
  });
  after(async () => {
    await h?.close();
  });

  /** All attempts in this file come from 127.0.0.1; each rate-limit test starts from a fresh window. */
  async function clearLoginCounters() {
    const keys = await h.redis.keys(`${h.ns.prefix}login:*`);
    if (keys.length) await h.redis.del(...keys);
  }

  it("signs up: account, workspace on the free plan, caller is OWNER", async () => {
    const d = await h.ok(SIGN_UP, {
      i: { email: "Alice@Example.com", password: "s3cret-password", workspaceName: "Alice Inc" },
    });
    assert.equal(d.signUp.account.email, "alice@example.com");
    assert.match(d.signUp.token, /^rgs_/);
    const ws = await h.ok(
      `{ workspace { id name plan { name dailyRequestLimit requestsPerSecond monthlyRequestLimit } apps { id } } }`,
      {},
      d.signUp.token,
    );
    assert.equal(ws.workspace.name, "Alice Inc");
    assert.deepEqual(ws.workspace.plan, {
      name: "free",
      dailyRequestLimit: 500000,
      requestsPerSecond: 50,
      monthlyRequestLimit: null,
    });
    assert.deepEqual(ws.workspace.apps, []);
    const c = new Client({ connectionString: h.db.url });
    await c.connect();
    const r = await c.query(
      "SELECT role, password_hash FROM memberships m JOIN accounts a ON a.id = m.account_id",
    );
    await c.end();
    assert.equal(r.rows[0].role, "OWNER");
    assert.match(r.rows[0].password_hash, /^\$argon2id\$/);
    // The workspace record is published for the data plane.
    const rec = JSON.parse((await h.redis.get(h.names.workspace(ws.workspace.id))) ?? "null");
    assert.equal(rec.plan.name, "free");
  });

  it("refuses a duplicate email, a bad email, a short password and an over-long workspace name", async () => {
    const dup = await h.gql(SIGN_UP, {
      i: { email: "alice@example.com", password: "another-password", workspaceName: "X" },
    });
    assert.equal(code(dup), "BAD_USER_INPUT");
    assert.equal(dup.errors![0]!.extensions!.field, "email");
    const bad = await h.gql(SIGN_UP, {
      i: { email: "not-an-email", password: "long-enough-pw", workspaceName: "X" },
    });
    assert.equal(bad.errors![0]!.extensions!.field, "email");
    const short = await h.gql(SIGN_UP, {
      i: { email: "b@example.com", password: "short", workspaceName: "X" },
    });
    assert.equal(short.errors![0]!.extensions!.field, "password");
    const long = await h.gql(SIGN_UP, {
      i: { email: "b@example.com", password: "long-enough-pw", workspaceName: "w".repeat(65) },
    });
    assert.equal(code(long), "BAD_USER_INPUT");
    assert.equal(long.errors![0]!.extensions!.field, "workspaceName");
  });

  it("logs in with the right password and refuses a wrong one", async () => {
    const d = await h.ok(LOG_IN, { e: "alice@example.com", p: "s3cret-password" });
    assert.equal(d.logIn.account.email, "alice@example.com");
    const me = await h.ok("{ me { email } }", {}, d.logIn.token);
    assert.equal(me.me.email, "alice@example.com");
    const wrong = await h.gql(LOG_IN, { e: "alice@example.com", p: "wrong-password" });
    assert.equal(code(wrong), "UNAUTHENTICATED");
    assert.equal(wrong.data, null);
    const unknown = await h.gql(LOG_IN, { e: "nobody@example.com", p: "whatever-pw" });
    assert.equal(code(unknown), "UNAUTHENTICATED");
    assert.equal(wrong.errors![0]!.message, unknown.errors![0]!.message);
  });

  it("rate limits login attempts per client IP across emails", async () => {
    await clearLoginCounters();
    const codes: (string | undefined)[] = [];
    for (let i = 0; i < 5; i++)
      codes.push(code(await h.gql(LOG_IN, { e: `ip${i}@example.com`, p: "x-password" })));
    assert.deepEqual(codes, [
      "UNAUTHENTICATED",
      "UNAUTHENTICATED",
      "UNAUTHENTICATED",
      "UNAUTHENTICATED",
      "TOO_MANY_REQUESTS",
    ]);
    // A spoofed X-Forwarded-For from an untrusted peer does not reset the per-IP count.
    const spoofed = await fetch(h.cp.url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": "198.51.100.77" },
      body: JSON.stringify({ query: LOG_IN, variables: { e: "ip9@example.com", p: "x-password" } }),
    });
    const sb = (await spoofed.json()) as { errors: { extensions: { code: string } }[] };
    assert.equal(sb.errors[0]!.extensions.code, "TOO_MANY_REQUESTS");
    const keysAfter = await h.redis.keys(`${h.ns.prefix}login:*`);
    assert.ok(
      keysAfter.every((k) => !k.includes("example.com")),
      "no emails in Redis key names",
    );
    await clearLoginCounters();
  });

  it("creates, lists, uses and revokes personal access tokens", async () => {
    const u = await h.signUp();
    const d = await h.ok(
      `mutation { createAccessToken(name: "ci") { token accessToken { id name kind expiresAt revokedAt } } }`,
      {},
      u.token,
    );
    const pat = d.createAccessToken.token;
    assert.match(pat, /^rgp_/);
    assert.equal(d.createAccessToken.accessToken.kind, "PERSONAL");
    // No lifetime asked: ACCESS_TOKEN_TTL_SECONDS (30 days).
    const ttlMs = Date.parse(d.createAccessToken.accessToken.expiresAt) - Date.now();
    assert.ok(Math.abs(ttlMs - 30 * 24 * 3600 * 1000) < 60_000, String(ttlMs));
    const list = await h.ok("{ accessTokens { id name kind } }", {}, pat);
    assert.ok(list.accessTokens.some((t: { id: string }) => t.id === d.createAccessToken.accessToken.id));
    assert.ok(!JSON.stringify(list).includes(pat), "token secrets never listed");
    assert.equal((await h.ok("{ workspace { id } }", {}, pat)).workspace.id, u.workspaceId);
    const rev = await h.ok(
      `mutation($id: ID!) { revokeAccessToken(id: $id) { id revokedAt } }`,
      { id: d.createAccessToken.accessToken.id },
      u.token,
    );
    assert.ok(rev.revokeAccessToken.revokedAt);
    assert.equal(code(await h.gql("{ workspace { id } }", {}, pat)), "UNAUTHENTICATED");
    // The session token still works.
    assert.equal((await h.ok("{ workspace { id } }", {}, u.token)).workspace.id, u.workspaceId);
  });

  it("logOut revokes the token it is called with, and only that one", async () => {
    const email = `logout-${Date.now()}@example.com`;
    const u = await h.signUp(email);
    const d = await h.ok(`mutation { createAccessToken(name: "ci") { token } }`, {}, u.token);
    const pat = d.createAccessToken.token;
    await clearLoginCounters();
    const other = await h.ok(LOG_IN, { e: email, p: "correct horse battery" }); // a second session
    assert.equal((await h.ok("mutation { logOut }", {}, u.token)).logOut, true);
    const after = await h.gql("{ workspace { id } }", {}, u.token);
    assert.equal(code(after), "UNAUTHENTICATED");
    assert.equal(after.status, 401);
    assert.equal(code(await h.gql("mutation { logOut }", {}, u.token)), "UNAUTHENTICATED"); // twice
    assert.equal((await h.ok("{ workspace { id } }", {}, pat)).workspace.id, u.workspaceId);
    assert.equal((await h.ok("{ workspace { id } }", {}, other.logIn.token)).workspace.id, u.workspaceId);
    assert.equal(code(await h.gql("mutation { logOut }")), "UNAUTHENTICATED");
    assert.equal(code(await h.gql("mutation { logOut }", {}, ADMIN_TOKEN)), "FORBIDDEN");
  });

  it("refuses an expired token, an unknown token and a malformed header with UNAUTHENTICATED", async () => {
    const u = await h.signUp();
    const c = new Client({ connectionString: h.db.url });
    await c.connect();
    await c.query("UPDATE access_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1", [
      createHash("sha256").update(u.token).digest("hex"),
    ]);
    await c.end();
    const r = await h.gql("{ workspace { id } }", {}, u.token);
    assert.equal(code(r), "UNAUTHENTICATED");
    assert.equal(r.status, 401);
    assert.equal(code(await h.gql("{ workspace { id } }", {}, "rgs_unknown")), "UNAUTHENTICATED");
    const res = await fetch(h.cp.url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Basic abc" },
      body: JSON.stringify({ query: "{ workspace { id } }" }),
    });
    const body = (await res.json()) as { errors: { extensions: { code: string } }[] };
    assert.equal(body.errors[0]!.extensions.code, "UNAUTHENTICATED");
    assert.equal(code(await h.gql("{ workspace { id } }")), "UNAUTHENTICATED");
  });

  it("caps token names and refuses token operations with the operator token", async () => {
    const u = await h.signUp();
    const r = await h.gql(
      `mutation($n: String!) { createAccessToken(name: $n) { token } }`,
      { n: "n".repeat(65) },
      u.token,
    );
    assert.equal(code(r), "BAD_USER_INPUT");
    assert.equal(r.errors![0]!.extensions!.field, "name");
    assert.equal(
      code(await h.gql(`mutation { createAccessToken(name: "x") { token } }`, {}, ADMIN_TOKEN)),
      "FORBIDDEN",
    );
  });
});
