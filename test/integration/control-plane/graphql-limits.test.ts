import assert from "node:assert/strict";
import { code, GqlResult, Harness, Json, startHarness } from "./harness";

const SIGN_UP = `mutation($i: SignUpInput!) { signUp(input: $i) { token account { id } } }`;

/**
 * Hostile GraphQL over HTTP: each attack is refused with a 400 and a message naming the limit (no 500,
 * no stack trace), and the server answers a normal query afterwards. Default limits except the sign-up
 * throttle (3 per IP here) and TRUSTED_PROXIES (so the test can speak for several client IPs).
 */
describe("control-plane: GraphQL limits (HTTP)", function () {
  this.timeout(30_000);
  let h: Harness;
  before(async () => {
    h = await startHarness({
      SIGNUP_MAX_PER_IP: "3",
      SIGNUP_WINDOW_SECONDS: "600",
      TRUSTED_PROXIES: "127.0.0.1",
    });
  });
  after(async () => {
    await h?.close();
  });

  async function post(
    body: unknown,
    headers: Record<string, string> = {},
  ): Promise<GqlResult & { raw: string }> {
    const res = await fetch(h.cp.url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    const raw = await res.text();
    const parsed = JSON.parse(raw) as { data?: Json; errors?: GqlResult["errors"] };
    return { status: res.status, data: parsed.data ?? null, errors: parsed.errors, raw };
  }

  /** Refused with HTTP 400, the given code, a message matching `re`; no stack trace; nothing executed. */
  function assertRefused(r: GqlResult & { raw: string }, errCode: string, re: RegExp) {
    assert.equal(r.status, 400, r.raw);
    assert.equal(r.data, null);
    assert.equal(code(r), errCode, r.raw);
    assert.ok(
      r.errors!.some((e) => re.test(e.message)),
      r.raw,
    );
    assert.doesNotMatch(r.raw, /stacktrace|\.ts:\d|\.js:\d|node_modules/);
  }

  async function assertAlive() {
    const r = await post({ query: "{ networks { slug } }" });
    assert.equal(r.status, 200, r.raw);
    assert.deepEqual(r.data, { networks: [] });
  }

  it("a query deeper than 10 levels is refused (nested inline fragments: valid GraphQL, no schema cycle needed)", async () => {
    const deep = (n: number) => `{ ${"... on Query { ".repeat(n)}networks { slug }${" }".repeat(n)} }`;
    assert.equal((await post({ query: deep(7) })).status, 200, "depth 9 passes");
    assertRefused(await post({ query: deep(12) }), "GRAPHQL_VALIDATION_FAILED", /depth limit of 10 exceeded/);
    await assertAlive();
  });

  it("an alias bomb is refused past 15 aliases (15 pass)", async () => {
    const aliases = (n: number) =>
      `{ ${Array.from({ length: n }, (_, i) => `a${i}: networks { slug }`).join(" ")} }`;
    const ok = await post({ query: aliases(15) });
    assert.equal(ok.status, 200, ok.raw);
    assert.equal(Object.keys(ok.data!).length, 15);
    assertRefused(
      await post({ query: aliases(100) }),
      "GRAPHQL_VALIDATION_FAILED",
      /Aliases limit of 15 exceeded/,
    );
    await assertAlive();
  });

  it("a document over 2000 tokens is refused while parsing; a 100k-level nesting bomb too (no stack overflow)", async () => {
    assertRefused(
      await post({ query: `{ networks { ${"slug ".repeat(3000)}} }` }),
      "GRAPHQL_PARSE_FAILED",
      /more that 2000 tokens/,
    );
    const n = 100_000;
    assertRefused(
      await post({ query: `${"{ a ".repeat(n)}${"}".repeat(n)}` }),
      "GRAPHQL_PARSE_FAILED",
      /2000 tokens/,
    );
    await assertAlive();
  });

  it("a costly query is refused (cost over 5000), also through a fragment spread many times", async () => {
    assertRefused(
      await post({ query: `{ usage(filter: {}) { requests24h { series { ${"at ".repeat(1800)}} } } }` }),
      "GRAPHQL_VALIDATION_FAILED",
      /Query Cost limit of 5000 exceeded/,
    );
    const fields =
      "at success errors serviceError nodeError clientError tooManyRequests unknownError ".repeat(20);
    const started = Date.now();
    assertRefused(
      await post({
        query: `{ usage(filter: {}) { requests24h { series { ${"...F ".repeat(700)}} } } } fragment F on UsageSeriesPoint { ${fields} }`,
      }),
      "GRAPHQL_VALIDATION_FAILED",
      /Query Cost limit of 5000 exceeded/,
    );
    // Not a speed target: a guard against validation that degrades into seconds (overlapping-fields checks).
    assert.ok(Date.now() - started < 10_000);
    await assertAlive();
  });

  it("a batched (array) body is refused whole: nothing runs", async () => {
    const before = Number((await h.cp.dataSource.query("SELECT count(*) FROM accounts"))[0].count);
    const r = await post(
      Array.from({ length: 50 }, (_, i) => ({
        query: SIGN_UP,
        variables: {
          i: { email: `batch${i}@example.com`, password: "correct horse battery", workspaceName: "b" },
        },
      })),
    );
    assertRefused(r, "BAD_REQUEST", /batching disabled/);
    const after = Number((await h.cp.dataSource.query("SELECT count(*) FROM accounts"))[0].count);
    assert.equal(after, before, "no account created");
    await assertAlive();
  });

  it("introspection is off by default; unknown fields get no suggestions", async () => {
    assertRefused(
      await post({ query: "{ __schema { types { name } } }" }),
      "GRAPHQL_VALIDATION_FAILED",
      /introspection/,
    );
    const r = await post({ query: "{ network { slug } }" });
    assertRefused(r, "GRAPHQL_VALIDATION_FAILED", /Cannot query field "network"/);
    assert.doesNotMatch(r.raw, /Did you mean/);
    // `__typename` is not introspection of the schema: still allowed.
    assert.equal((await post({ query: "{ __typename }" })).status, 200);
  });

  it("automatic persisted queries are off: a coded error (not a 500), nothing run", async () => {
    for (const hash of ["abc", "0".repeat(64)]) {
      for (const query of [undefined, "{ networks { slug } }"]) {
        const r = await post({ query, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
        // 200 is the APQ protocol's answer (clients then resend the whole document).
        assert.equal(r.status, 200, r.raw);
        assert.equal(r.data, null);
        assert.equal(code(r), "PERSISTED_QUERY_NOT_SUPPORTED", r.raw);
      }
    }
    await assertAlive();
  });

  it("a body over 1 MiB is refused with 413 before it is parsed; the server stays up", async () => {
    const r = await fetch(h.cp.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "{ networks { slug } }", pad: "x".repeat(2 * 1024 * 1024) }),
    });
    assert.equal(r.status, 413);
    assert.match(await r.text(), /Body too large/);
    await assertAlive();
  });

  it("sign-up flood from one client IP is throttled (nothing written); another IP still signs up", async () => {
    const signUp = (email: string, ip: string) =>
      post(
        {
          query: SIGN_UP,
          variables: { i: { email, password: "correct horse battery", workspaceName: "Flood" } },
        },
        { "x-forwarded-for": ip },
      );
    for (let i = 0; i < 3; i++) {
      const r = await signUp(`flood${i}@example.com`, "203.0.113.7");
      assert.equal(r.status, 200, r.raw);
      assert.ok(r.data?.signUp.token);
    }
    const refused = await signUp("flood3@example.com", "203.0.113.7");
    assert.equal(code(refused), "TOO_MANY_REQUESTS", refused.raw);
    assert.match(refused.errors![0]!.message, /Too many sign-ups from this address \(limit 3 per 600 s\)/);
    const retry = refused.errors![0]!.extensions!.retryAfterSeconds as number;
    assert.ok(retry >= 1 && retry <= 600, String(retry));
    const rows = await h.cp.dataSource.query("SELECT 1 FROM accounts WHERE email = 'flood3@example.com'");
    assert.equal(rows.length, 0, "the refused sign-up wrote nothing");
    // Invalid input counts too: a flood of bad sign-ups costs no hashing or writes.
    assert.equal(code(await signUp("not-an-email", "203.0.113.7")), "TOO_MANY_REQUESTS");
    const other = await signUp("other-ip@example.com", "198.51.100.9");
    assert.equal(other.status, 200, other.raw);
    assert.ok(other.data?.signUp.token);
    // A spoofed X-Forwarded-For from an untrusted peer would be ignored; here the peer (127.0.0.1) is
    // trusted, so the header's address is the client: the key names hold only hashes.
    const keys = await h.redis.keys(`${h.ns.prefix}signup:*`);
    assert.equal(keys.length, 2);
    assert.ok(keys.every((k) => !k.includes("203.0.113.7") && !k.includes("198.51.100.9")));
  });

  it("throttles sign-ups from IPv6 clients per /64: new addresses in one /64 share the limit", async () => {
    const signUp = (email: string, ip: string) =>
      post(
        {
          query: SIGN_UP,
          variables: { i: { email, password: "correct horse battery", workspaceName: "Flood6" } },
        },
        { "x-forwarded-for": ip },
      );
    // A client holding 2001:db8:6:1::/64 rotates its address on every call.
    for (let i = 0; i < 3; i++) {
      const r = await signUp(`v6flood${i}@example.com`, `2001:db8:6:1::${i + 1}`);
      assert.equal(r.status, 200, r.raw);
    }
    const refused = await signUp("v6flood3@example.com", "2001:db8:6:1:ffff::42");
    assert.equal(code(refused), "TOO_MANY_REQUESTS", refused.raw);
    const otherNet = await signUp("v6other@example.com", "2001:db8:6:2::1");
    assert.equal(otherNet.status, 200, otherNet.raw);
    assert.ok(otherNet.data?.signUp.token);
  });
});
