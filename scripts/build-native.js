#!/usr/bin/env node
// Builds the data plane's C batch scan (data-plane/native, node-gyp) when this machine has the toolchain
// node-gyp needs: Python 3, make and a C compiler. Without one, or when the build fails, it says so and
// what to install; the data plane then runs the JavaScript scan (same results, slower) and logs
// "batch scan addon not loaded". Used by `npm start` (scripts/start.js); `npm run build` requires it.

const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const root = path.resolve(__dirname, "..");
const ADDON = path.join(root, "data-plane", "native", "build", "Release", "json_scan.node");

function onPath(name, env = process.env) {
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (dir === "") continue;
    try {
      fs.accessSync(path.join(dir, name), fs.constants.X_OK);
      return true;
    } catch {}
  }
  return false;
}

/** The tools node-gyp needs that are not on PATH (empty: all there). */
function missingTools(env = process.env) {
  const missing = [];
  if (!onPath("python3", env)) missing.push("python3");
  if (!onPath("make", env)) missing.push("make");
  if (!["cc", "gcc", "clang"].some((c) => onPath(c, env)) && !(env.CC && onPath(env.CC, env))) {
    missing.push("a C compiler (cc)");
  }
  return missing;
}

/**
 * Builds the addon; returns { built: true } or { built: false, reason } and never throws: a missing
 * toolchain costs speed, not function.
 */
function buildNative({ env = process.env, stdio = "inherit" } = {}) {
  const missing = missingTools(env);
  if (missing.length > 0) {
    return {
      built: false,
      reason:
        `no ${missing.join(", ")} on PATH, so the C batch scan is not built and the data plane uses the ` +
        "JavaScript scan (slower on large batches); install them (Debian: `apt-get install python3 make gcc`) " +
        "and run `npm start` again for the fast path",
    };
  }
  // npm puts its own node-gyp on PATH for scripts (`build:native`); npm_execpath is the npm running us.
  const npm = env.npm_execpath ? [process.execPath, env.npm_execpath] : ["npm"];
  const r = spawnSync(npm[0], [...npm.slice(1), "run", "build:native", "--silent"], {
    cwd: root,
    env,
    stdio,
  });
  if (r.status !== 0 || !fs.existsSync(ADDON)) {
    return {
      built: false,
      reason:
        `the C batch scan did not build ("npm run build:native" exit ${r.status ?? r.signal ?? r.error?.message}), so the ` +
        "data plane uses the JavaScript scan (slower on large batches)",
    };
  }
  return { built: true };
}

module.exports = { buildNative, missingTools, ADDON };

if (require.main === module) {
  const r = buildNative();
  process.stdout.write(
    r.built ? `build-native: built ${path.relative(root, ADDON)}\n` : `build-native: ${r.reason}\n`,
  );
}
