import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  LoginRateLimiter,
  type LoginThrottleOptions,
} from "../../../control-plane/src/auth/login-rate-limit";
import { code, GqlResult, Harness, Json, startHarness } from "./harness";

const LOG_IN = `mutation($e: String!, $p: String!) { logIn(email: $e, password: $p) { token } }`;
const PASSWORD = "correct horse battery";

/**
 * The log-in throttle against a guesser: one email's failures from one client address back off
 * exponentially, and the account's owner logging in from another address is not held up. Client
 * addresses are spoken for through X-Forwarded-For (the peer, 127.0.0.1, is a trusted proxy here).
 */
describe("control-plane: log-in throttle per (email, client address)", function () {
  this.timeout(60_000);
  let h: Harness;
  const BASE_MS = 60_000;

  before(async () => {
    h = await startHarness({
      TRUSTED_PROXIES: "127.0.0.1",
      // The per-address window stays out of the way: the pair back-off is the subject.
      LOGIN_MAX_ATTEMPTS: "1000",
      LOGIN_FREE_FAILURES: "5",
      // Long enough that no back-off lapses while the test runs on a loaded machine.
      LOGIN_BACKOFF_BASE_MS: String(BASE_MS),
      LOGIN_BACKOFF_MAX_MS: String(3600_000),
    });
  });
  after(async () => {
    await h?.close();
  });

  async function logIn(email: string, password: string, ip: string): Promise<GqlResult> {
    const res = await fetch(h.cp.url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": ip },
      body: JSON.stringify({ query: LOG_IN, variables: { e: email, p: password } }),
    });
    const body = (await res.json()) as { data?: Json; errors?: GqlResult["errors"] };
    return { status: res.status, data: body.data ?? null, errors: body.errors };
  }

  const retryAfter = (r: GqlResult) => r.errors![0]!.extensions!.retryAfterSeconds as number;

  /** Moves the pair's last attempt `ms` into the past: the back-off it set has run out. */
  async function agePair(email: string, ip: string, ms: number) {
    const key = h.names.loginAttempts(
      "pair",
      createHash("sha256").update(`${email}\n${ip}`, "utf8").digest("hex").slice(0, 32),
    );
    assert.equal(await h.redis.exists(key), 1, "the pair's record exists");
    await h.redis.hincrby(key, "last", -ms);
  }

  it("50 bad passwords from address A: the owner logs in from B at once; A waits longer each time", async () => {
    const email = "owner@example.com";
    const A = "203.0.113.10";
    const B = "198.51.100.20";
    await h.signUp(email);
    const codes: (string | undefined)[] = [];
    let firstRefusal: GqlResult | undefined;
    for (let i = 0; i < 50; i++) {
      const r = await logIn(email, `wrong-password-${i}`, A);
      codes.push(code(r));
      if (code(r) === "TOO_MANY_REQUESTS") firstRefusal ??= r;
    }
    assert.deepEqual(codes.slice(0, 5), Array(5).fill("UNAUTHENTICATED"), "5 free failures");
    assert.deepEqual(codes.slice(5), Array(45).fill("TOO_MANY_REQUESTS"), "then refused, unchecked");
    assert.equal(retryAfter(firstRefusal!), BASE_MS / 1000);

    // The owner, elsewhere: in at once, with the right password.
    const fromB = await logIn(email, PASSWORD, B);
    assert.equal(fromB.errors, undefined, JSON.stringify(fromB.errors));
    assert.match(fromB.data!.logIn.token, /^rgs_/);
    // A stays refused, even with the right password (it is not checked).
    const rightFromA = await logIn(email, PASSWORD, A);
    assert.equal(code(rightFromA), "TOO_MANY_REQUESTS");

    // Each failure after the back-off ran out doubles the next wait.
    const waits = [retryAfter(rightFromA)];
    for (let round = 0; round < 3; round++) {
      await agePair(email, A, waits[waits.length - 1]! * 1000);
      assert.equal(code(await logIn(email, "still-wrong", A)), "UNAUTHENTICATED", "checked once more");
      const refused = await logIn(email, "still-wrong", A);
      assert.equal(code(refused), "TOO_MANY_REQUESTS");
      waits.push(retryAfter(refused));
    }
    assert.ok(waits[0]! <= BASE_MS / 1000, String(waits));
    assert.deepEqual(waits.slice(1), [120, 240, 480], `waits grow: ${waits}`);
    // B is still not held up, and nothing but hashes names the pair in Redis.
    assert.equal((await logIn(email, PASSWORD, B)).errors, undefined);
    const keys = await h.redis.keys(`${h.ns.prefix}login:*`);
    assert.ok(keys.length >= 3);
    assert.ok(keys.every((k) => !k.includes("example.com") && !k.includes(A) && !k.includes(B)));
  });

  it("a right password clears the pair's failures", async () => {
    const email = "forgetful@example.com";
    const C = "192.0.2.30";
    await h.signUp(email);
    for (let i = 0; i < 4; i++) assert.equal(code(await logIn(email, "nope-nope", C)), "UNAUTHENTICATED");
    assert.equal((await logIn(email, PASSWORD, C)).errors, undefined);
    // Five more free failures, not one.
    for (let i = 0; i < 5; i++) assert.equal(code(await logIn(email, "nope-nope", C)), "UNAUTHENTICATED");
    assert.equal(code(await logIn(email, "nope-nope", C)), "TOO_MANY_REQUESTS");
  });

  describe("the limiter on a fake clock", () => {
    let now = 1_800_000_000_000;
    const opts: LoginThrottleOptions = {
      maxAttemptsPerAddress: 1_000_000,
      windowSeconds: 300,
      freeFailures: 3,
      backoffBaseMs: 1000,
      backoffMaxMs: 8000,
      maxAttemptsPerEmail: 40,
      emailWindowSeconds: 3600,
    };
    const limiter = () => new LoginRateLimiter(h.redis, h.names, opts, () => now);

    /** The wait (ms) the limiter asks for, or 0 when it lets the attempt through. */
    async function attempt(l: LoginRateLimiter, email: string, ip: string): Promise<number> {
      try {
        await l.hit(email, ip);
        return 0;
      } catch (err) {
        const e = err as { extensions?: { code?: string; retryAfterSeconds?: number } };
        assert.equal(e.extensions?.code, "TOO_MANY_REQUESTS");
        return e.extensions!.retryAfterSeconds! * 1000;
      }
    }

    it("doubles the wait per failure up to the maximum; the wait runs on the clock", async () => {
      const l = limiter();
      const seen: number[] = [];
      for (let i = 0; i < 3; i++) assert.equal(await attempt(l, "clock@example.com", "10.1.0.1"), 0);
      for (let round = 0; round < 6; round++) {
        const wait = await attempt(l, "clock@example.com", "10.1.0.1");
        seen.push(wait);
        now += wait - 1;
        assert.ok((await attempt(l, "clock@example.com", "10.1.0.1")) > 0, "1 ms early: still refused");
        now += 1;
        assert.equal(await attempt(l, "clock@example.com", "10.1.0.1"), 0, "on time: let through");
      }
      assert.deepEqual(seen, [1000, 2000, 4000, 8000, 8000, 8000]);
      // Another address for the same email is not affected.
      assert.equal(await attempt(l, "clock@example.com", "10.1.0.2"), 0);
    });

    it("parallel guesses from one pair: only the free ones get through", async () => {
      const l = limiter();
      const waits = await Promise.all(
        Array.from({ length: 20 }, () => attempt(l, "burst@example.com", "10.2.0.1")),
      );
      assert.equal(waits.filter((w) => w === 0).length, 3, String(waits));
    });

    it("a ceiling per email over all addresses, out of reach of a handful of addresses", async () => {
      const l = limiter();
      let passed = 0;
      // 20 addresses, each until its back-off: 3 free attempts each = 60 attempts offered.
      for (let a = 0; a < 20; a++) {
        for (let i = 0; i < 3; i++)
          if ((await attempt(l, "spread@example.com", `10.3.0.${a}`)) === 0) passed++;
      }
      assert.equal(passed, 40, "LOGIN_EMAIL_MAX_ATTEMPTS = 40 in this window");
      // Five addresses alone stay under it: 15 attempts.
      let five = 0;
      for (let a = 0; a < 5; a++) {
        for (let i = 0; i < 3; i++) if ((await attempt(l, "few@example.com", `10.4.0.${a}`)) === 0) five++;
      }
      assert.equal(five, 15);
    });
  });
});
