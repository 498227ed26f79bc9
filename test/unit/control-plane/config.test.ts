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
    assert.equal(c.loginMaxAttempts, 10);
    assert.equal(c.loginWindowSeconds, 300);
    assert.equal(c.republishIntervalSeconds, 300);
  });

  it("reads variables and strips trailing slashes from public URLs", () => {
    const c = loadConfig({
      CONTROL_PLANE_PORT: "4100",
      ADMIN_TOKEN: "a-very-long-admin-token",
      KEY_ENCRYPTION_SECRET: "0123456789abcdef0123",
      PUBLIC_HTTP_URL: "https://rpc.example.com/",
      PUBLIC_WS_URL: "wss://rpc.example.com/",
      SESSION_TTL_SECONDS: "3600",
    });
    assert.equal(c.port, 4100);
    assert.equal(c.adminToken, "a-very-long-admin-token");
    assert.equal(c.adminTokenGenerated, false);
    assert.equal(c.keyEncryptionSecretIsDefault, false);
    assert.equal(c.publicHttpUrl, "https://rpc.example.com");
    assert.equal(c.publicWsUrl, "wss://rpc.example.com");
    assert.equal(c.sessionTtlSeconds, 3600);
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
});
