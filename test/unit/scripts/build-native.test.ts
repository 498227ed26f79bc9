import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

// Plain JS script module (not compiled): loaded from the source tree.
const root = path.resolve(__dirname, "../../../..");
// biome-ignore lint/suspicious/noExplicitAny: an untyped CommonJS script
const { buildNative, missingTools } = require(path.join(root, "scripts/build-native.js")) as any;

describe("scripts/build-native.js (npm start's C batch scan)", () => {
  let bin: string;
  beforeEach(() => {
    bin = mkdtempSync(path.join(tmpdir(), "build-native-"));
    symlinkSync(process.execPath, path.join(bin, "node"));
  });
  afterEach(() => rmSync(bin, { recursive: true, force: true }));

  function tool(name: string, script = "#!/bin/sh\nexit 0\n") {
    writeFileSync(path.join(bin, name), script);
    chmodSync(path.join(bin, name), 0o755);
  }

  it("names each tool node-gyp needs that is not on PATH", () => {
    assert.deepEqual(missingTools({ PATH: bin }), ["python3", "make", "a C compiler (cc)"]);
    tool("python3");
    tool("make");
    assert.deepEqual(missingTools({ PATH: bin }), ["a C compiler (cc)"]);
    tool("gcc");
    assert.deepEqual(missingTools({ PATH: bin }), []);
  });

  it("without a toolchain: not built, and says the JavaScript scan runs and what to install", () => {
    const r = buildNative({ env: { PATH: bin }, stdio: "pipe" });
    assert.equal(r.built, false);
    assert.match(r.reason, /no python3, make, a C compiler \(cc\) on PATH/);
    assert.match(r.reason, /uses the JavaScript scan/);
    assert.match(r.reason, /apt-get install python3 make gcc/);
  });

  it("a failing build: not built, and says so instead of stopping npm start", () => {
    tool("python3");
    tool("make");
    tool("cc");
    // An `npm` whose build:native fails, as node-gyp does on a broken toolchain.
    const npmCli = path.join(bin, "npm-cli.js");
    writeFileSync(npmCli, "process.exit(1);\n");
    const r = buildNative({ env: { PATH: bin, npm_execpath: npmCli }, stdio: "pipe" });
    assert.equal(r.built, false);
    assert.match(r.reason, /did not build \("npm run build:native" exit 1\)/);
  });
});
