// The package the code imports as "uWebSockets.js". It loads @btc-vision/uwebsockets.js unchanged; where
// that fails only because this glibc lacks GLIBC_2.38 (2.36 and 2.37), it loads the retargeted copy that
// `npm ci` wrote (scripts/uws-glibc-compat.js, docs/runtime.md). When neither loads it exports an object
// whose functions are not native and throw the reason: the data plane's check (data-plane/src/server/
// native-uws.ts) refuses to start on it with that reason, before anything connects.

const fs = require("node:fs");
const path = require("node:path");

const PACKAGE = "@btc-vision/uwebsockets.js";

function compatEntry() {
  const pkgDir = path.dirname(require.resolve(PACKAGE));
  return path.join(pkgDir, "..", "..", ".uws-glibc-compat", "uws.js");
}

function unavailable(reason) {
  const fail = () => {
    throw new Error(`uWebSockets.js: the native binding did not load: ${reason}`);
  };
  return {
    loadError: reason,
    App: fail,
    SSLApp: fail,
    getParts: fail,
    us_listen_socket_close: fail,
    us_socket_local_port: fail,
  };
}

function firstLine(err) {
  return String(err?.message ?? err)
    .split("\n")
    .filter((l) => l.trim() !== "")
    .pop();
}

function load() {
  let original;
  try {
    return require(PACKAGE);
  } catch (err) {
    original = err;
  }
  const why = firstLine(original);
  if (!/GLIBC_2\.38/.test(String(original?.message))) return unavailable(why);
  const entry = compatEntry();
  if (!fs.existsSync(entry)) {
    return unavailable(
      `${why} (this glibc is older than 2.38 and node_modules/.uws-glibc-compat is missing: ` +
        "run `node scripts/uws-glibc-compat.js`, which `npm ci` runs)",
    );
  }
  try {
    return require(entry);
  } catch (err) {
    return unavailable(`${why}; the glibc 2.36 copy did not load either: ${firstLine(err)}`);
  }
}

module.exports = load();
