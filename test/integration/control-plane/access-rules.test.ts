import assert from "node:assert/strict";
import { createPublicKey, generateKeyPairSync, randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { type KeyRecord, KeyRecordSchema, type PlaneEvent } from "../../../shared/src/redis/records";
import { planeEventsBarrier } from "../../helpers/plane-events";
import { TEST_REDIS_URL } from "../../helpers/redis";
import { ADMIN_TOKEN, code, createApp, type Harness, startHarness } from "./harness";

/**
 * Access rules and JWT keys through GraphQL against real Postgres and Redis: validation, the published
 * key records (`KeyRecord.access`) and their events, tenant isolation. The role matrix for these mutations
 * is in roles.test.ts with every other workspace resolver.
 */

const RULES = `accessRules { methodMode methods requestsPerSecond requestsPerDay userAgents jwtRequired jwtAudience jwtSubject updatedAt }`;

/** A self-signed EC P-256 certificate (its private key was discarded when it was made). */
/** An RSA public JWK with a random odd modulus of `bits` bits (readable as a key; never verifies anything). */
function rsaJwkOfBits(bits: number): string {
  const n = randomBytes(bits / 8);
  n[0]! |= 0x80;
  n[n.length - 1]! |= 1;
  return JSON.stringify({ kty: "RSA", n: n.toString("base64url"), e: "AQAB" });
}

const CERTIFICATE = `-----BEGIN CERTIFICATE-----
MIIBfjCCASOgAwIBAgIUVylFUqtIaf6Kqd+x6VW/v7BkAMgwCgYIKoZIzj0EAwIw
EzERMA8GA1UEAwwIand0LXRlc3QwIBcNMjYxMTI0MDAzNTU1WhgPMjEyNjEwMzEw
MDM1NTVaMBMxETAPBgNVBAMMCGp3dC10ZXN0MFkwEwYHKoZIzj0CAQYIKoZIzj0D
AQcDQgAEzpEd7TnJO3T8NsWl7yU9eP4KFlYFkDvfZ+qmIzze5XVRAn1TX6NEpUxo
p9es40IYYqLBSrHre+N96RCkxJLx1KNTMFEwHQYDVR0OBBYEFHDgXe4RCW5zOeFo
/rhG/nru1Hb6MB8GA1UdIwQYMBaAFHDgXe4RCW5zOeFo/rhG/nru1Hb6MA8GA1Ud
EwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAN0o8nI7LNoPfK7kanYEcz93
S4mhYJquNuu69j5FvA6cAiEAg67vEcOJ+wSIDs4/ujqIA3fzpTSGv+16oorf/SWN
LXg=
-----END CERTIFICATE-----`;

function rsaPem(bits = 2048): string {
  return generateKeyPairSync("rsa", { modulusLength: bits }).publicKey.export({
    type: "spki",
    format: "pem",
  }) as string;
}

function ecJwk(): string {
  return JSON.stringify(
    generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ format: "jwk" }),
  );
}

describe("control-plane: access rules and JWT keys (GraphQL, Postgres, publication to Redis)", function () {
  this.timeout(60_000);
  let h: Harness;
  let owner: { token: string; workspaceId: string };
  let outsider: { token: string; workspaceId: string };

  before(async () => {
    h = await startHarness();
    owner = await h.signUp();
    outsider = await h.signUp();
  });

  after(async () => {
    await h?.close();
  });

  async function record(apiKey: string): Promise<KeyRecord> {
    const raw = await h.redis.get(h.names.apiKey(hashApiKey(apiKey)));
    assert.ok(raw, "key record published");
    return KeyRecordSchema.parse(JSON.parse(raw));
  }

  const setRules = (appId: string, input: Record<string, unknown>, token = owner.token) =>
    h.gql(
      `mutation($a: ID!, $i: AccessRulesInput!) { setAppAccessRules(appId: $a, input: $i) { methodMode methods requestsPerSecond requestsPerDay userAgents jwtRequired jwtAudience jwtSubject } }`,
      { a: appId, i: input },
      token,
    );

  const addKey = (appId: string, kid: string, key: string, algorithm?: string, token = owner.token) =>
    h.gql(
      `mutation($a: ID!, $i: JwtKeyInput!) { addJwtKey(appId: $a, input: $i) { id kid algorithm thumbprint createdAt } }`,
      { a: appId, i: algorithm ? { kid, key, algorithm } : { kid, key } },
      token,
    );

  it("an app starts with no rules and no keys; its key record carries access: null", async () => {
    const app = await createApp(h, owner.token, "plain");
    const d = await h.ok(
      `query($a: ID!) { app(id: $a) { ${RULES} jwtKeys { id } } }`,
      { a: app.id },
      owner.token,
    );
    assert.deepEqual(d.app.accessRules, {
      methodMode: "DENY",
      methods: [],
      requestsPerSecond: null,
      requestsPerDay: null,
      userAgents: [],
      jwtRequired: false,
      jwtAudience: null,
      jwtSubject: null,
      updatedAt: null,
    });
    assert.deepEqual(d.app.jwtKeys, []);
    assert.equal((await record(app.apiKey)).access, null);
  });

  it("sets rules (partial updates keep the rest, null clears); every change is published with key.upsert", async () => {
    const app = await createApp(h, owner.token, "rules");
    const sub = new Redis(TEST_REDIS_URL);
    const events: PlaneEvent[] = [];
    try {
      await sub.subscribe(h.names.eventsChannel());
      sub.on("message", (_c, m) => events.push(JSON.parse(m) as PlaneEvent));
      const r1 = await setRules(app.id, {
        methodMode: "DENY",
        methods: ["eth_getLogs", " debug_* ", "ETH_GETLOGS"],
        requestsPerSecond: 5,
        requestsPerDay: 1000,
        userAgents: ["MyWallet/*"],
      });
      assert.equal(r1.errors, undefined, JSON.stringify(r1.errors));
      assert.deepEqual(
        r1.data!.setAppAccessRules.methods,
        ["eth_getLogs", "debug_*"],
        "trimmed, deduplicated",
      );
      assert.deepEqual((await record(app.apiKey)).access, {
        methodMode: "DENY",
        methods: ["eth_getLogs", "debug_*"],
        requestsPerSecond: 5,
        requestsPerDay: 1000,
        userAgents: ["MyWallet/*"],
        jwt: null,
      });
      const hash = hashApiKey(app.apiKey);
      await planeEventsBarrier(h.redis, h.names.eventsChannel(), events);
      assert.ok(
        events.some((e) => e.type === "key.upsert" && e.keyHash === hash),
        JSON.stringify(events),
      );

      // Only the cap changes; null clears the daily cap and the list.
      const r2 = await setRules(app.id, { requestsPerSecond: 7, requestsPerDay: null, userAgents: null });
      assert.equal(r2.errors, undefined, JSON.stringify(r2.errors));
      assert.deepEqual(r2.data!.setAppAccessRules, {
        methodMode: "DENY",
        methods: ["eth_getLogs", "debug_*"],
        requestsPerSecond: 7,
        requestsPerDay: null,
        userAgents: [],
        jwtRequired: false,
        jwtAudience: null,
        jwtSubject: null,
      });
      assert.equal((await record(app.apiKey)).access?.requestsPerSecond, 7);
      assert.equal((await record(app.apiKey)).access?.requestsPerDay, null);
      // Everything cleared: no rules left, the record says none.
      await h.ok(
        `mutation($a: ID!) { setAppAccessRules(appId: $a, input: { methods: [], requestsPerSecond: null }) { methods } }`,
        { a: app.id },
        owner.token,
      );
      assert.equal((await record(app.apiKey)).access, null);
      // A regenerated key inherits the rules (they are the app's).
      await setRules(app.id, { methodMode: "ALLOW", methods: ["eth_chainId"] });
      const regen = await h.ok(
        `mutation($a: ID!) { regenerateApiKey(appId: $a, gracePeriodSeconds: 600) { apiKey } }`,
        { a: app.id },
        owner.token,
      );
      assert.deepEqual((await record(regen.regenerateApiKey.apiKey)).access?.methods, ["eth_chainId"]);
      assert.deepEqual(
        (await record(app.apiKey)).access?.methods,
        ["eth_chainId"],
        "the old key in its grace period too",
      );
    } finally {
      sub.disconnect();
    }
  });

  it("refuses invalid rules with BAD_USER_INPUT naming the field, and changes nothing", async () => {
    const app = await createApp(h, owner.token, "invalid");
    await setRules(app.id, { methods: ["eth_call"] });
    const cases: [Record<string, unknown>, string][] = [
      [{ methodMode: "ALLOW", methods: [] }, "methods"],
      [{ methods: ["eth_call", "not a method"] }, "methods"],
      [{ methods: ["eth_*_x"] }, "methods"],
      [{ requestsPerSecond: 0 }, "requestsPerSecond"],
      [{ requestsPerSecond: 1_000_001 }, "requestsPerSecond"],
      [{ requestsPerDay: -5 }, "requestsPerDay"],
      [{ userAgents: ["*"] }, "userAgents"],
      [{ jwtAudience: "x".repeat(300) }, "jwtAudience"],
      [{ jwtRequired: true }, "jwtRequired"],
    ];
    for (const [input, field] of cases) {
      const r = await setRules(app.id, input);
      assert.equal(code(r), "BAD_USER_INPUT", `${JSON.stringify(input)}: ${JSON.stringify(r.errors)}`);
      assert.equal(r.errors?.[0]?.extensions?.field, field, JSON.stringify(input));
    }
    assert.deepEqual((await record(app.apiKey)).access?.methods, ["eth_call"]);
    const d = await h.ok(`query($a: ID!) { app(id: $a) { ${RULES} } }`, { a: app.id }, owner.token);
    assert.equal(d.app.accessRules.methodMode, "DENY");
    assert.deepEqual(d.app.accessRules.methods, ["eth_call"]);
  });

  it("JWT keys: RS256 PEM, ES256 JWK, a certificate; bad PEM / JWK, private keys, a 4th key and duplicates refused", async () => {
    const app = await createApp(h, owner.token, "jwt");
    const a = await addKey(app.id, "rsa-1", rsaPem());
    assert.equal(a.errors, undefined, JSON.stringify(a.errors));
    assert.equal(a.data!.addJwtKey.algorithm, "RS256");
    assert.match(a.data!.addJwtKey.thumbprint, /^[A-Za-z0-9_-]{43}$/);
    const ecKey = ecJwk();
    const b = await addKey(app.id, "ec-1", ecKey, "ES256");
    assert.equal(b.errors, undefined, JSON.stringify(b.errors));
    assert.equal(b.data!.addJwtKey.algorithm, "ES256");
    // The same public key again, under another kid and as PEM: refused.
    const samePem = createPublicKey({ key: JSON.parse(ecKey), format: "jwk" }).export({
      type: "spki",
      format: "pem",
    }) as string;
    const dup = await addKey(app.id, "ec-dup", samePem);
    assert.equal(code(dup), "BAD_USER_INPUT");
    assert.match(dup.errors![0]!.message, /already registered/);

    const refusals: [string, string, string | undefined, string, RegExp][] = [
      ["bad-pem", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----", undefined, "key", /PEM/],
      ["bad-jwk", '{"kty":"EC","crv":"P-256","x":"AAAA"}', undefined, "key", /not a valid/],
      ["not-a-key", "hello", undefined, "key", /PEM .* or a JWK/],
      [
        "private",
        generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({
          type: "pkcs8",
          format: "pem",
        }) as string,
        undefined,
        "key",
        /private key/,
      ],
      ["weak", rsaPem(1024), undefined, "key", /2,?048 to 4,?096 bits \(this one: 1024\)/],
      // 8192 bits: a verification per uncached token would cost the data plane about 16 times a 2048-bit
      // one. A random odd modulus stands in for a real key (generating one takes seconds).
      ["huge", rsaJwkOfBits(8192), undefined, "key", /2,?048 to 4,?096 bits \(this one: 8192\)/],
      [
        "e3",
        generateKeyPairSync("rsa", { modulusLength: 2048, publicExponent: 3 }).publicKey.export({
          type: "spki",
          format: "pem",
        }) as string,
        undefined,
        "key",
        /exponent 65537 \(this one: 3\)/,
      ],
      ["mismatch", rsaPem(), "ES256", "algorithm", /RS256 key, not ES256/],
      ["rsa-1", rsaPem(), undefined, "kid", /already has a key with kid rsa-1/],
      ["bad kid", rsaPem(), undefined, "kid", /kid/],
    ];
    for (const [kid, key, alg, field, message] of refusals) {
      const r = await addKey(app.id, kid, key, alg);
      assert.equal(code(r), "BAD_USER_INPUT", `${kid}: ${JSON.stringify(r.errors)}`);
      assert.equal(r.errors?.[0]?.extensions?.field, field, kid);
      assert.match(r.errors![0]!.message, message, kid);
    }
    // An X.509 certificate: its public key is registered.
    const cert = await addKey(app.id, "cert-1", CERTIFICATE);
    assert.equal(cert.errors, undefined, JSON.stringify(cert.errors));
    assert.equal(cert.data!.addJwtKey.algorithm, "ES256");
    // Three keys now: a fourth is refused whatever it is.
    const fourth = await addKey(app.id, "rsa-4", rsaPem());
    assert.equal(code(fourth), "BAD_USER_INPUT");
    assert.equal(fourth.errors?.[0]?.extensions?.field, "key");
    assert.match(fourth.errors![0]!.message, /at most 3 JWT keys/);
    const list = await h.ok(
      `query($a: ID!) { app(id: $a) { jwtKeys { kid algorithm } } }`,
      { a: app.id },
      owner.token,
    );
    assert.deepEqual(
      list.app.jwtKeys.map((k: { kid: string }) => k.kid),
      ["rsa-1", "ec-1", "cert-1"],
    );
    // Not required yet: the record carries no JWT settings.
    assert.equal((await record(app.apiKey)).access, null);
  });

  it("requiring JWTs publishes the public keys and claims; the last key cannot go while required", async () => {
    const app = await createApp(h, owner.token, "jwt-required");
    const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const k1 = await h.ok(
      `mutation($a: ID!, $k: String!) { addJwtKey(appId: $a, input: { kid: "main", key: $k }) { id } }`,
      { a: app.id, k: rsa.publicKey.export({ type: "spki", format: "pem" }) },
      owner.token,
    );
    const r = await setRules(app.id, {
      jwtRequired: true,
      jwtAudience: " https://rpc.example ",
      jwtSubject: "svc",
    });
    assert.equal(r.errors, undefined, JSON.stringify(r.errors));
    const access = (await record(app.apiKey)).access!;
    const jwk = rsa.publicKey.export({ format: "jwk" });
    assert.deepEqual(access.jwt, {
      keys: [{ kid: "main", alg: "RS256", jwk: { kty: "RSA", n: jwk.n, e: jwk.e } }],
      audience: "https://rpc.example",
      subject: "svc",
    });
    const lastKey = await h.gql(
      `mutation($a: ID!, $k: ID!) { removeJwtKey(appId: $a, keyId: $k) { id } }`,
      { a: app.id, k: k1.addJwtKey.id },
      owner.token,
    );
    assert.equal(code(lastKey), "BAD_USER_INPUT");
    assert.match(lastKey.errors![0]!.message, /requires JWTs/);
    // A second key, then the first can go: the record follows.
    await addKey(app.id, "next", ecJwk());
    await h.ok(
      `mutation($a: ID!, $k: ID!) { removeJwtKey(appId: $a, keyId: $k) { kid } }`,
      { a: app.id, k: k1.addJwtKey.id },
      owner.token,
    );
    assert.deepEqual(
      (await record(app.apiKey)).access!.jwt!.keys.map((k) => [k.kid, k.alg]),
      [["next", "ES256"]],
    );
    // Not required any more: no JWT settings published (the keys stay registered).
    await setRules(app.id, { jwtRequired: false });
    assert.equal((await record(app.apiKey)).access, null);
    // A full re-publish rebuilds the same records.
    await setRules(app.id, { jwtRequired: true, methods: ["debug_*"] });
    const before = await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey)));
    await h.redis.del(h.names.apiKey(hashApiKey(app.apiKey)));
    await h.cp.services.publication.republishAll();
    assert.equal(await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey))), before);
  });

  it("tenant isolation: another workspace's app is NOT_FOUND for reads and every mutation", async () => {
    const app = await createApp(h, owner.token, "isolated");
    await setRules(app.id, { methods: ["eth_getLogs"] });
    const key = await h.ok(
      `mutation($a: ID!, $k: String!) { addJwtKey(appId: $a, input: { kid: "k", key: $k }) { id } }`,
      { a: app.id, k: ecJwk() },
      owner.token,
    );
    const attempts = [
      h.gql(`query($a: ID!) { app(id: $a) { ${RULES} jwtKeys { id } } }`, { a: app.id }, outsider.token),
      setRules(app.id, { methods: [] }, outsider.token),
      addKey(app.id, "x", ecJwk(), undefined, outsider.token),
      h.gql(
        `mutation($a: ID!, $k: ID!) { removeJwtKey(appId: $a, keyId: $k) { id } }`,
        { a: app.id, k: key.addJwtKey.id },
        outsider.token,
      ),
      // The outsider's own app with the owner's key id: the key is not found there either.
      createApp(h, outsider.token, "mine").then((mine) =>
        h.gql(
          `mutation($a: ID!, $k: ID!) { removeJwtKey(appId: $a, keyId: $k) { id } }`,
          { a: mine.id, k: key.addJwtKey.id },
          outsider.token,
        ),
      ),
    ];
    for (const r of await Promise.all(attempts)) assert.equal(code(r), "NOT_FOUND", JSON.stringify(r.errors));
    assert.deepEqual((await record(app.apiKey)).access?.methods, ["eth_getLogs"]);
    const keys = await h.ok(`query($a: ID!) { app(id: $a) { jwtKeys { id } } }`, { a: app.id }, owner.token);
    assert.equal(keys.app.jwtKeys.length, 1);
    // The operator may act on any workspace.
    const op = await setRules(app.id, { requestsPerDay: 50 }, ADMIN_TOKEN);
    assert.equal(op.errors, undefined, JSON.stringify(op.errors));
    assert.equal((await record(app.apiKey)).access?.requestsPerDay, 50);
  });

  it("deleting an app deletes its rules and keys", async () => {
    const app = await createApp(h, owner.token, "doomed");
    await setRules(app.id, { methods: ["eth_getLogs"] });
    await addKey(app.id, "k", ecJwk());
    await h.ok(`mutation($a: ID!) { deleteApp(id: $a) }`, { a: app.id }, owner.token);
    const q = (sql: string) => h.cp.dataSource.query(sql, [app.id]);
    assert.deepEqual(await q("SELECT app_id FROM app_access_rules WHERE app_id = $1"), []);
    assert.deepEqual(await q("SELECT id FROM app_jwt_keys WHERE app_id = $1"), []);
  });
});
