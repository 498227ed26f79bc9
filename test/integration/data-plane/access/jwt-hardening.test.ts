import assert from "node:assert/strict";
import { generateKeyPairSync, type KeyObject, randomBytes, sign as rsaSign } from "node:crypto";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import type { AccessRecord, JwtKeyRecord } from "../../../../shared/src/redis/records";
import { eventually } from "../../../helpers/eventually";
import { evmNetwork } from "../../../helpers/seed-redis";
import { type Gateway, post, type RpcResponse, startGateway } from "../harness";
import { call, RecordingUpstream } from "../limits/fixtures";
import { TestWsClient } from "../ws/ws-client";

/**
 * What a JWT costs the data plane, attacked (issue 24, "JWT verification cost"): keys outside RSA
 * 2048..4096 / e = 65537 published to Redis anyway are ignored, a token without `kid` is not tried against
 * every key, and a flood of distinct bad tokens from one address is throttled (429, Retry-After) after a
 * few signature checks while a good token from another address still works. Client addresses are told
 * apart with X-Forwarded-For from a trusted loopback proxy.
 */

type Pair = Awaited<ReturnType<typeof generateKeyPair>>;
const now = () => Math.floor(Date.now() / 1000);
const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");

/** RS256 by hand (jose refuses to sign with keys under 2048 bits). */
function handSigned(key: KeyObject, kid: string, claims: object): string {
  const input = `${b64({ alg: "RS256", kid })}.${b64(claims)}`;
  return `${input}.${rsaSign("sha256", Buffer.from(input), key).toString("base64url")}`;
}

function hugeJwk(): Record<string, string> {
  const n = randomBytes(1024);
  n[0]! |= 0x80;
  n[n.length - 1]! |= 1;
  return { kty: "RSA", n: n.toString("base64url"), e: "AQAB" };
}

async function metric(g: Gateway, name: string, labels = ""): Promise<number> {
  const res = await fetch(`${g.metricsBase}/metrics`);
  assert.equal(res.status, 200, "metrics served on METRICS_PORT");
  const text = await res.text();
  const escaped = `${name}${labels}`.replace(/[{}"=]/g, (c) => `\\${c}`);
  const m = new RegExp(`^${escaped} (\\d+)$`, "m").exec(text);
  return m === null ? 0 : Number(m[1]);
}

const reasonOf = (r: RpcResponse): string | undefined => r.json?.error?.data?.reason;

describe("data plane: JWT verification cost under attack (key sizes, kid, failed-check throttle)", function () {
  // One test may wait up to 30 s for the start of a failure window.
  this.timeout(120_000);
  let up: RecordingUpstream;
  let g: Gateway;
  let good: Pair;
  let second: Pair;
  let stranger: Pair;
  const weak = generateKeyPairSync("rsa", { modulusLength: 1024 });
  const e3 = generateKeyPairSync("rsa", { modulusLength: 2048, publicExponent: 3 });
  let url = "";
  let keyText = "";
  let brokenKey = "";
  const PER_ADDRESS = 8;

  before(async () => {
    good = await generateKeyPair("RS256", { extractable: true });
    second = await generateKeyPair("RS256", { extractable: true });
    stranger = await generateKeyPair("RS256", { extractable: true });
    const rec = async (kid: string, k: KeyObject | CryptoKey): Promise<JwtKeyRecord> => ({
      kid,
      alg: "RS256",
      jwk: (await exportJWK(k)) as Record<string, string>,
    });
    const access = (keys: JwtKeyRecord[]): AccessRecord => ({
      methodMode: "DENY",
      methods: [],
      requestsPerSecond: null,
      requestsPerDay: null,
      userAgents: [],
      jwt: { keys, audience: null, subject: null },
    });
    const main = access([await rec("main", good.publicKey), await rec("second", second.publicKey)]);
    // As if written to Redis by hand or an older control plane: every key breaks the key rules.
    const broken = access([
      await rec("weak", weak.publicKey),
      await rec("e3", e3.publicKey),
      { kid: "huge", alg: "RS256", jwk: hugeJwk() },
    ]);
    up = await new RecordingUpstream().start();
    g = await startGateway(
      {
        TRUSTED_PROXIES: "127.0.0.1/32",
        JWT_FAILURE_WINDOW_MS: "60000",
        JWT_MAX_FAILURES_PER_ADDRESS: String(PER_ADDRESS),
        JWT_MAX_FAILURES_PER_APP: "1000",
      },
      async (s) => {
        await s.putNetwork(evmNetwork("eth", [{ id: "up", httpUrl: up.url }]));
        keyText = await s.putKey({ appId: "app-jwt-hard", access: main });
        brokenKey = await s.putKey({ appId: "app-jwt-broken", access: broken });
      },
    );
    url = `${g.base}/eth/rpc?apikey=${keyText}`;
  });

  after(async () => {
    await g?.stop();
    await up?.stop();
  });

  const from = (ip: string, token: string) => ({ "x-forwarded-for": ip, authorization: `Bearer ${token}` });

  it("keys of 1024 bits, e = 3 or 8192 bits in Redis are ignored: their tokens are unknown keys", async () => {
    const before = up.count("eth_chainId");
    const claims = { exp: now() + 60 };
    for (const [kid, token] of [
      ["weak", handSigned(weak.privateKey, "weak", claims)],
      ["e3", handSigned(e3.privateKey, "e3", claims)],
      // No private key exists for the random modulus: any signature will do, none is checked.
      [
        "huge",
        `${b64({ alg: "RS256", kid: "huge" })}.${b64(claims)}.${randomBytes(1024).toString("base64url")}`,
      ],
    ] as const) {
      const r = await post(
        `${g.base}/eth/rpc?apikey=${brokenKey}`,
        call("eth_chainId"),
        from("10.20.0.1", token),
      );
      assert.equal(r.status, 401, `${kid}: ${r.text}`);
      assert.equal(reasonOf(r), "jwt_unknown_key", kid);
    }
    assert.equal(up.count("eth_chainId"), before, "nothing forwarded");
    // Keys within the rules work.
    const ok = await new SignJWT(claims)
      .setProtectedHeader({ alg: "RS256", kid: "second" })
      .sign(second.privateKey);
    assert.equal((await post(url, call("eth_chainId"), from("10.20.0.1", ok))).status, 200);
  });

  it("a token without kid against an app with two keys is refused without trying them", async () => {
    const checksBefore = await metric(g, "rpcgw_jwt_verifications_total", '{result="jwt_bad_signature"}');
    const token = await new SignJWT({ exp: now() + 60 })
      .setProtectedHeader({ alg: "RS256" })
      .sign(good.privateKey);
    const r = await post(url, call("eth_chainId"), from("10.30.0.1", token));
    assert.equal(r.status, 401);
    assert.equal(reasonOf(r), "jwt_malformed");
    assert.match(r.json.error.message, /kid required: the app has 2 keys/);
    assert.equal(
      await metric(g, "rpcgw_jwt_verifications_total", '{result="jwt_bad_signature"}'),
      checksBefore,
      "no signature was checked",
    );
  });

  it("a flood of bad signatures from one address is throttled (429, Retry-After) while a good token from another address works", async () => {
    const attacker = "10.66.0.1";
    // The throttle counts in fixed windows aligned to the epoch (JWT_FAILURE_WINDOW_MS, 60 s here): a flood
    // that crossed a window's end would get PER_ADDRESS more checks in the next one. It starts with at
    // least 30 s of its window left (waiting for the next window when less is), far more than it takes.
    await eventually(() => Date.now() % 60_000 <= 30_000, "a failure window with 30 s left", 35_000, 50);
    const badBefore = await metric(g, "rpcgw_jwt_verifications_total", '{result="jwt_bad_signature"}');
    const forwardedBefore = up.count("lim_jwt");
    const statuses = new Map<string, number>();
    let throttled: RpcResponse | undefined;
    // 200 distinct bad tokens (each would miss every cache), 20 at a time.
    for (let round = 0; round < 10; round++) {
      const tokens = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          new SignJWT({ exp: now() + 60, jti: `${round}-${i}` })
            .setProtectedHeader({ alg: "RS256", kid: "main" })
            .sign(stranger.privateKey),
        ),
      );
      const rs = await Promise.all(tokens.map((t) => post(url, call("lim_jwt"), from(attacker, t))));
      for (const r of rs) {
        const k = `${r.status} ${reasonOf(r)}`;
        statuses.set(k, (statuses.get(k) ?? 0) + 1);
        if (r.status === 429) throttled ??= r;
      }
    }
    assert.deepEqual([...statuses].sort(), [
      ["401 jwt_bad_signature", PER_ADDRESS],
      ["429 jwt_throttled", 200 - PER_ADDRESS],
    ]);
    assert.equal(
      await metric(g, "rpcgw_jwt_verifications_total", '{result="jwt_bad_signature"}'),
      badBefore + PER_ADDRESS,
      "only the first few were checked",
    );
    assert.ok(throttled);
    assert.equal(throttled.json.error.code, -32005);
    assert.equal(throttled.json.error.data.limit, PER_ADDRESS);
    assert.ok(throttled.json.error.data.retryAfterMs > 0 && throttled.json.error.data.retryAfterMs <= 60_000);
    assert.equal(
      throttled.headers.get("retry-after"),
      String(Math.ceil(throttled.json.error.data.retryAfterMs / 1000)),
    );
    // A good, never-seen token from another address is checked and served; the attacker's own good
    // token needs a check too and waits for the window.
    const fresh = await new SignJWT({ exp: now() + 60, jti: "fresh" })
      .setProtectedHeader({ alg: "RS256", kid: "main" })
      .sign(good.privateKey);
    const served = await post(url, call("lim_jwt"), from("10.77.0.1", fresh));
    assert.equal(served.status, 200, served.text);
    assert.equal(served.json.result, "0x1");
    const another = await new SignJWT({ exp: now() + 60, jti: "attacker-good" })
      .setProtectedHeader({ alg: "RS256", kid: "main" })
      .sign(good.privateKey);
    assert.equal(reasonOf(await post(url, call("lim_jwt"), from(attacker, another))), "jwt_throttled");
    // A WebSocket upgrade from the attacker with a new token is refused the same way, before any check.
    const wsToken = await new SignJWT({ exp: now() + 60, jti: "ws" })
      .setProtectedHeader({ alg: "RS256", kid: "main" })
      .sign(stranger.privateKey);
    const upgrade = await TestWsClient.open(`ws://127.0.0.1:${g.port()}/eth/rpc?apikey=${keyText}`, {
      "x-forwarded-for": attacker,
      authorization: `Bearer ${wsToken}`,
    }).then(
      (c) => {
        c.close();
        return undefined;
      },
      (e: { status?: number; body?: { error?: { data?: { reason?: string; retryAfterMs?: number } } } }) => e,
    );
    assert.equal(upgrade?.status, 429);
    assert.equal(upgrade?.body?.error?.data?.reason, "jwt_throttled");
    assert.ok((upgrade?.body?.error?.data?.retryAfterMs ?? 0) > 0);
    // A token verified before the flood is served from the cache, even from the attacker's address.
    assert.equal((await post(url, call("lim_jwt"), from(attacker, fresh))).status, 200);
    assert.equal(up.count("lim_jwt"), forwardedBefore + 2, "no refused request was forwarded");
    // The process is up and serving.
    assert.equal((await fetch(`${g.base}/healthz`)).status, 200);
  });
});
