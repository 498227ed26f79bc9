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
// biome-ignore lint/suspicious/noExplicitAny: an untyped CommonJS script
const compat = require(join(__dirname, "../../../../../scripts/uws-glibc-compat.js")) as any;
const NO_NATIVE_UWS = join(__dirname, "../../../helpers/no-native-uws.js");

describe("data-plane: native uWS binding check", () => {
  it("accepts the addon this process loaded, one of the package's binaries (which include Node 24's ABI 137)", () => {
    assert.equal(isNativeUws(uWS), true);
    assert.doesNotThrow(() => assertNativeUws(uWS));
    const abis = shippedAbis();
    assert.ok(abis.includes(process.versions.modules), `ABI ${process.versions.modules}; shipped: ${abis}`);
    assert.ok(abis.includes("137"), `shipped: ${abis}`);
  });

  it("loads the untouched binary on glibc 2.38 or later and the retargeted copy only below it", () => {
    const version: string | null = compat.glibcVersion();
    const loaded = Object.keys(require.cache).filter((f) => /uws_\w+_\w+_\d+\.node$/.test(f));
    assert.equal(loaded.length, 1, loaded.join(", "));
    if (version !== null && compat.versionLess(version, "2.38"))
      assert.match(loaded[0], /node_modules\/\.uws-glibc-compat\//);
    else assert.match(loaded[0], /node_modules\/@btc-vision\/uwebsockets\.js\//);
  });

  it("refuses a stand-in that is not the addon, and says why it did not load", () => {
    const jsApp = () => undefined;
    const stub = { loadError: "libfoo.so: cannot open shared object file", App: jsApp };
    assert.equal(isNativeUws(stub), false);
    assert.throws(
      () => assertNativeUws(stub),
      (err: Error) => {
        assert.ok(err instanceof NativeUwsError);
        assert.match(
          err.message,
          /native binding did not load .*: libfoo\.so: cannot open shared object file/,
        );
        assert.match(err.message, /Node 24/);
        return true;
      },
    );
    for (const bad of [undefined, null, {}, { App: jsApp }, { App: "x" }]) {
      assert.equal(isNativeUws(bad), false, JSON.stringify(bad));
    }
  });

  it("main.js exits 1 with a clear message when no uWS binary loads, before touching Redis", () => {
    const r = spawnSync(process.execPath, ["--require", NO_NATIVE_UWS, MAIN], {
      // REDIS_URL points at a closed loopback port: the check must come before any connection attempt.
      env: {
        PATH: process.env.PATH,
        DATA_PLANE_PORT: "0",
        REDIS_URL: "redis://127.0.0.1:1",
      },
      encoding: "utf8",
      timeout: 20_000,
    });
    assert.equal(r.status, 1, `exit ${r.status} ${r.signal}; stderr: ${r.stderr}`);
    assert.match(r.stderr, /native binding did not load \(Node v\d+/);
    assert.match(r.stderr, /simulated by test\/helpers\/no-native-uws/);
    assert.match(r.stderr, /Run the data plane on Node 24/);
    assert.doesNotMatch(r.stdout + r.stderr, /listening|ECONNREFUSED/);
  });
});
