import uWS from "uWebSockets.js";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import {
  assertNativeUws,
  isNativeUws,
  NativeUwsError,
  shippedAbis,
} from "../../../../data-plane/src/server/native-uws";

const MAIN = join(__dirname, "../../../../data-plane/src/main.js");

describe("data-plane: native uWS binding check", () => {
  it("accepts the addon this process loaded (Node 20, ABI 115)", () => {
    assert.equal(process.versions.modules, "115", "tests run on Node 20, the one Node the fork supports");
    assert.equal(isNativeUws(uWS), true);
    assert.doesNotThrow(() => assertNativeUws(uWS));
    assert.ok(shippedAbis().includes("115"), `shipped: ${shippedAbis().join(",")}`);
  });

  it("refuses the fork's JavaScript fallback and anything that is not the addon", () => {
    // The fallback as the fork returns it (dist/index.js), loaded directly.
    const fallback = require("uWebSockets.js/dist/index.js");
    assert.equal(typeof fallback.App, "function", "the shim has an App, so a naive check would pass it");
    assert.equal(isNativeUws(fallback), false);
    assert.throws(() => assertNativeUws(fallback), NativeUwsError);
    const jsApp = () => undefined;
    for (const bad of [undefined, null, {}, { App: jsApp }, { App: "x" }]) {
      assert.equal(isNativeUws(bad), false, JSON.stringify(bad));
    }
  });

  it("main.js exits 1 with a clear message when the fallback is loaded, before touching Redis", () => {
    const r = spawnSync(process.execPath, [MAIN], {
      // UWS_USE_FALLBACK makes the fork load its shim, as a Node without a matching binary would.
      // REDIS_URL points at a closed loopback port: the check must come before any connection attempt.
      env: {
        PATH: process.env.PATH,
        UWS_USE_FALLBACK: "1",
        DATA_PLANE_PORT: "0",
        REDIS_URL: "redis://127.0.0.1:1",
      },
      encoding: "utf8",
      timeout: 20_000,
    });
    assert.equal(r.status, 1, `exit ${r.status} ${r.signal}; stderr: ${r.stderr}`);
    assert.match(r.stderr, /native binding did not load \(UWS_USE_FALLBACK is set\)/);
    assert.match(r.stderr, /run the data plane on Node 20/);
    assert.doesNotMatch(r.stdout + r.stderr, /listening/);
  });
});
