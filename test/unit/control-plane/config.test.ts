import assert from "node:assert/strict";
import { DEV_KEY_ENCRYPTION_SECRET, loadConfig } from "../../../control-plane/src/config";
import { ConfigError } from "../../../shared/src/config/env";

describe("control-plane: config", () => {
  it("has working defaults with no variable set", () => {
    const c = loadConfig({});
    assert.equal(c.port, 4000);
    assert.equal(c.publicHttpUrl, "http://127.0.0.1:8080");
    assert.equal(c.publicWsUrl, "ws://127.0.0.1:8080");
    assert.equal(c.keyEncryptionSecret, DEV_KEY_ENCRYPTION_SECRET);
    assert.equal(c.keyEncryptionSecretIsDefault, true);
    assert.equal(c.adminTokenGenerated, true);
    assert.ok(c.adminToken.length >= 40);
    assert.notEqual(loadConfig({}).adminToken, c.adminToken, "a fresh random admin token per start");
    assert.equal(c.sessionTtlSeconds, 7 * 24 * 3600);
    assert.equal(c.loginMaxAttempts, 30);
    assert.equal(c.loginWindowSeconds, 300);
    assert.equal(c.loginFreeFailures, 5);
    assert.equal(c.loginBackoffBaseMs, 1000);
    assert.equal(c.loginBackoffMaxMs, 900_000);
    assert.equal(c.loginEmailMaxAttempts, 1000);
    assert.equal(c.loginEmailWindowSeconds, 3600);
    assert.equal(c.accessTokenTtlSeconds, 30 * 24 * 3600);
    assert.equal(c.accessTokenMaxTtlSeconds, 365 * 24 * 3600);
    // A default above the maximum is cut to it.
    assert.equal(
      loadConfig({ ACCESS_TOKEN_TTL_SECONDS: "7200", ACCESS_TOKEN_MAX_TTL_SECONDS: "3600" })
        .accessTokenTtlSeconds,
      3600,
    );
    assert.equal(c.republishIntervalSeconds, 300);
    assert.equal(c.planContact, null);
  });

  it("reads variables and strips trailing slashes from public URLs", () => {
    const c = loadConfig({
      CONTROL_PLANE_PORT: "4100",
      ADMIN_TOKEN: "a-very-long-admin-token",
      KEY_ENCRYPTION_SECRET: "0123456789abcdef0123",
      PUBLIC_HTTP_URL: "https://rpc.example.com/",
      PUBLIC_WS_URL: "wss://rpc.example.com/",
      SESSION_TTL_SECONDS: "3600",
      PLAN_CONTACT: " sales@example.com ",
    });
    assert.equal(c.port, 4100);
    assert.equal(c.adminToken, "a-very-long-admin-token");
    assert.equal(c.adminTokenGenerated, false);
    assert.equal(c.keyEncryptionSecretIsDefault, false);
    assert.equal(c.publicHttpUrl, "https://rpc.example.com");
    assert.equal(c.publicWsUrl, "wss://rpc.example.com");
    assert.equal(c.sessionTtlSeconds, 3600);
    assert.equal(c.planContact, "sales@example.com");
    assert.equal(loadConfig({ PLAN_CONTACT: "  " }).planContact, null);
    assert.throws(() => loadConfig({ PLAN_CONTACT: "x".repeat(201) }), /PLAN_CONTACT/);
  });

  it("names every bad variable in one error", () => {
    assert.throws(
      () => loadConfig({ CONTROL_PLANE_PORT: "x", PUBLIC_WS_URL: "http://nope", ADMIN_TOKEN: "short" }),
      (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.match(e.message, /CONTROL_PLANE_PORT/);
        assert.match(e.message, /PUBLIC_WS_URL/);
        assert.match(e.message, /ADMIN_TOKEN/);
        assert.ok(!e.message.includes("short"), "secret values are not echoed");
        return true;
      },
    );
  });

  describe("NODE_ENV=production", () => {
    const SECRET = "k".repeat(32);
    const TOKEN = "t".repeat(32);

    it("refuses to start without KEY_ENCRYPTION_SECRET and ADMIN_TOKEN, naming both", () => {
      assert.throws(
        () => loadConfig({ NODE_ENV: "production" }),
        (e: unknown) => {
          assert.ok(e instanceof ConfigError);
          assert.match(
            e.message,
            /KEY_ENCRYPTION_SECRET: required with NODE_ENV=production: at least 32 bytes/,
          );
          assert.match(e.message, /ADMIN_TOKEN: required with NODE_ENV=production/);
          return true;
        },
      );
    });

    it("refuses a KEY_ENCRYPTION_SECRET of 31 bytes (counted in UTF-8 bytes) without echoing it", () => {
      const short = "s".repeat(31);
      assert.throws(
        () => loadConfig({ NODE_ENV: "production", ADMIN_TOKEN: TOKEN, KEY_ENCRYPTION_SECRET: short }),
        (e: unknown) => {
          assert.ok(e instanceof ConfigError);
          assert.match(e.message, /KEY_ENCRYPTION_SECRET/);
          assert.doesNotMatch(e.message, /ADMIN_TOKEN/);
          assert.ok(!e.message.includes(short), "secret values are not echoed");
          return true;
        },
      );
      // 16 characters of 2 bytes each = 32 bytes.
      const c = loadConfig({
        NODE_ENV: "production",
        ADMIN_TOKEN: TOKEN,
        KEY_ENCRYPTION_SECRET: "é".repeat(16),
      });
      assert.equal(c.keyEncryptionSecret, "é".repeat(16));
    });

    it("refuses the published development secret and a short ADMIN_TOKEN", () => {
      assert.throws(
        () =>
          loadConfig({
            NODE_ENV: "production",
            ADMIN_TOKEN: TOKEN,
            KEY_ENCRYPTION_SECRET: DEV_KEY_ENCRYPTION_SECRET,
          }),
        /KEY_ENCRYPTION_SECRET: the published development secret is refused/,
      );
      assert.throws(
        () =>
          loadConfig({ NODE_ENV: "production", ADMIN_TOKEN: "t".repeat(31), KEY_ENCRYPTION_SECRET: SECRET }),
        /ADMIN_TOKEN: required with NODE_ENV=production/,
      );
    });

    it("starts with both set; the worker needs KEY_ENCRYPTION_SECRET only; other NODE_ENV values keep the defaults", () => {
      const c = loadConfig({ NODE_ENV: "production", ADMIN_TOKEN: TOKEN, KEY_ENCRYPTION_SECRET: SECRET });
      assert.equal(c.keyEncryptionSecret, SECRET);
      assert.equal(c.keyEncryptionSecretIsDefault, false);
      assert.equal(c.adminToken, TOKEN);
      // The worker signs webhooks with secrets sealed by KEY_ENCRYPTION_SECRET; it authenticates nobody.
      assert.throws(
        () => loadConfig({ NODE_ENV: "production" }, { worker: true }),
        /KEY_ENCRYPTION_SECRET: required with NODE_ENV=production/,
      );
      assert.throws(
        () =>
          loadConfig(
            { NODE_ENV: "production", KEY_ENCRYPTION_SECRET: DEV_KEY_ENCRYPTION_SECRET },
            { worker: true },
          ),
        /the published development secret is refused/,
      );
      const w = loadConfig({ NODE_ENV: "production", KEY_ENCRYPTION_SECRET: SECRET }, { worker: true });
      assert.equal(w.keyEncryptionSecret, SECRET);
      assert.equal(w.adminTokenGenerated, true);
      for (const NODE_ENV of ["development", "test", "Production"]) {
        assert.equal(loadConfig({ NODE_ENV }).keyEncryptionSecretIsDefault, true, NODE_ENV);
      }
    });

    it("reports the production secrets together with other bad variables", () => {
      assert.throws(
        () => loadConfig({ NODE_ENV: "production", CONTROL_PLANE_PORT: "x" }),
        (e: unknown) => {
          assert.ok(e instanceof ConfigError);
          assert.match(e.message, /CONTROL_PLANE_PORT/);
          assert.match(e.message, /KEY_ENCRYPTION_SECRET/);
          return true;
        },
      );
    });
  });
});
