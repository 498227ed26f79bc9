import assert from "node:assert/strict";
import { ADMIN_TOKEN, code, Harness, startHarness } from "./harness";

const LOG_IN = `mutation($e: String!, $p: String!) { logIn(email: $e, password: $p) { token } }`;
const CREATE = `mutation($n: String!, $s: Int) {
  createAccessToken(name: $n, expiresInSeconds: $s) { token accessToken { id expiresAt } } }`;
const CHANGE = `mutation($c: String!, $n: String!) { changePassword(currentPassword: $c, newPassword: $n) }`;
const PASSWORD = "correct horse battery";

/**
 * Token lifetimes, changePassword and logOutEverywhere over HTTP. Time moves on a fake clock: the control
 * plane runs in this process, and token expiry is computed and checked with Date.now.
 */
describe("control-plane: token lifetimes, changePassword, logOutEverywhere", function () {
  this.timeout(30_000);
  let h: Harness;
  const realNow = Date.now;

  before(async () => {
    h = await startHarness({
      ACCESS_TOKEN_TTL_SECONDS: String(3600),
      ACCESS_TOKEN_MAX_TTL_SECONDS: String(86_400),
      SESSION_TTL_SECONDS: String(7200),
    });
  });
  afterEach(() => {
    Date.now = realNow;
  });
  after(async () => {
    await h?.close();
  });

  /** Runs `fn` with the clock `ms` ahead. */
  async function later<T>(ms: number, fn: () => Promise<T>): Promise<T> {
    Date.now = () => realNow() + ms;
    try {
      return await fn();
    } finally {
      Date.now = realNow;
    }
  }

  const whoAmI = (token: string) => h.gql("{ me { id } }", {}, token);

  it("personal tokens get the default lifetime, at most the maximum, and are refused once expired", async () => {
    const u = await h.signUp();
    const dflt = (await h.ok(CREATE, { n: "default" }, u.token)).createAccessToken;
    const asked = (await h.ok(CREATE, { n: "one minute", s: 60 }, u.token)).createAccessToken;
    const ttl = Date.parse(dflt.accessToken.expiresAt) - Date.now();
    assert.ok(Math.abs(ttl - 3600_000) < 60_000, String(ttl));
    const tooLong = await h.gql(CREATE, { n: "forever", s: 86_401 }, u.token);
    assert.equal(code(tooLong), "BAD_USER_INPUT");
    assert.equal(tooLong.errors![0]!.extensions!.field, "expiresInSeconds");
    assert.match(tooLong.errors![0]!.message, /86400/);
    assert.equal(code(await h.gql(CREATE, { n: "too short", s: 59 }, u.token)), "BAD_USER_INPUT");

    assert.equal(code(await whoAmI(asked.token)), undefined);
    await later(59_000, async () => assert.equal(code(await whoAmI(asked.token)), undefined));
    await later(61_000, async () => {
      const r = await whoAmI(asked.token);
      assert.equal(r.status, 401);
      assert.equal(code(r), "UNAUTHENTICATED");
      assert.equal(code(await whoAmI(dflt.token)), undefined, "the default one still works");
      // Expired tokens are not listed.
      const list = (await h.ok("{ accessTokens { id } }", {}, u.token)).accessTokens as { id: string }[];
      assert.ok(!list.some((t) => t.id === asked.accessToken.id));
      assert.ok(list.some((t) => t.id === dflt.accessToken.id));
    });
    await later(3601_000, async () => assert.equal(code(await whoAmI(dflt.token)), "UNAUTHENTICATED"));
    // Log-in tokens: SESSION_TTL_SECONDS.
    await later(7199_000, async () => assert.equal(code(await whoAmI(u.token)), undefined));
    await later(7201_000, async () => assert.equal(code(await whoAmI(u.token)), "UNAUTHENTICATED"));
  });

  it("changePassword: a wrong current password is refused and changes nothing", async () => {
    const email = `wrong-current-${Date.now()}@example.com`;
    const u = await h.signUp(email);
    const r = await h.gql(CHANGE, { c: "not-my-password", n: "a brand new password" }, u.token);
    assert.equal(code(r), "BAD_USER_INPUT");
    assert.equal(r.errors![0]!.extensions!.field, "currentPassword");
    assert.equal(code(await h.gql(LOG_IN, { e: email, p: "a brand new password" })), "UNAUTHENTICATED");
    assert.ok((await h.ok(LOG_IN, { e: email, p: PASSWORD })).logIn.token);
    assert.equal(code(await whoAmI(u.token)), undefined, "nothing revoked");
    const short = await h.gql(CHANGE, { c: PASSWORD, n: "short" }, u.token);
    assert.equal(short.errors![0]!.extensions!.field, "newPassword");
    assert.equal(code(await h.gql(CHANGE, { c: PASSWORD, n: "a brand new password" })), "UNAUTHENTICATED");
  });

  it("changePassword revokes every other token of the account and keeps the caller's", async () => {
    const email = `changer-${Date.now()}@example.com`;
    const u = await h.signUp(email);
    const other = await h.signUp();
    const second = (await h.ok(LOG_IN, { e: email, p: PASSWORD })).logIn.token as string;
    const pat = (await h.ok(CREATE, { n: "ci" }, u.token)).createAccessToken.token as string;
    assert.equal(
      (await h.ok(CHANGE, { c: PASSWORD, n: "a brand new password" }, u.token)).changePassword,
      true,
    );
    assert.equal(code(await whoAmI(u.token)), undefined, "the caller's token still works");
    for (const t of [second, pat]) {
      const r = await whoAmI(t);
      assert.equal(r.status, 401);
      assert.equal(code(r), "UNAUTHENTICATED");
    }
    assert.equal(code(await whoAmI(other.token)), undefined, "another account is untouched");
    assert.equal(code(await h.gql(LOG_IN, { e: email, p: PASSWORD })), "UNAUTHENTICATED");
    assert.ok((await h.ok(LOG_IN, { e: email, p: "a brand new password" })).logIn.token);
  });

  it("logOutEverywhere makes every token of the account 401, the caller's included", async () => {
    const email = `everywhere-${Date.now()}@example.com`;
    const u = await h.signUp(email);
    const other = await h.signUp();
    const second = (await h.ok(LOG_IN, { e: email, p: PASSWORD })).logIn.token as string;
    const pat = (await h.ok(CREATE, { n: "ci" }, u.token)).createAccessToken.token as string;
    assert.equal((await h.ok("mutation { logOutEverywhere }", {}, second)).logOutEverywhere, true);
    for (const t of [u.token, second, pat]) {
      const r = await whoAmI(t);
      assert.equal(r.status, 401);
      assert.equal(code(r), "UNAUTHENTICATED");
    }
    assert.equal(code(await whoAmI(other.token)), undefined, "another account is untouched");
    // The password still works: a new session.
    assert.ok((await h.ok(LOG_IN, { e: email, p: PASSWORD })).logIn.token);
    assert.equal(code(await h.gql("mutation { logOutEverywhere }")), "UNAUTHENTICATED");
    // The operator token belongs to no account.
    assert.equal(code(await h.gql("mutation { logOutEverywhere }", {}, ADMIN_TOKEN)), "FORBIDDEN");
    assert.equal(code(await h.gql(CHANGE, { c: "x-password", n: "y-password-y" }, ADMIN_TOKEN)), "FORBIDDEN");
  });
});
