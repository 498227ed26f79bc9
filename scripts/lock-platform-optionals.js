#!/usr/bin/env node
// Keeps package-lock.json valid for `npm ci` on this project's machines.
//
// The npm registry mirror reachable here does not serve some other-platform builds that packages list as
// optionalDependencies (e.g. @biomejs/cli-darwin-arm64). `npm install` then leaves them out of the lockfile,
// and `npm ci` refuses the lockfile as out of sync. This adds a lock entry for each missing one, marked
// with the os/cpu/libc it is for, so `npm ci` sees a complete lockfile and skips them on this platform.
// Run after any `npm install` that changes dependencies: `node scripts/lock-platform-optionals.js`.

const fs = require("node:fs");
const path = require("node:path");

const lockPath = path.resolve(__dirname, "..", "package-lock.json");
const lock = JSON.parse(fs.readFileSync(lockPath, "utf8"));
const pkgs = lock.packages;

const OS = [
  "android",
  "darwin",
  "freebsd",
  "linux",
  "netbsd",
  "openbsd",
  "openharmony",
  "sunos",
  "win32",
  "aix",
];
const CPU = ["arm64", "x64", "arm", "ia32", "riscv64", "ppc64", "s390x", "loong64", "wasm32"];

function platformOf(name) {
  const base = name.split("/").pop();
  const parts = base.split("-");
  const os = OS.find((o) => parts.includes(o) || (o === "win32" && parts.includes("windows")));
  const cpu = CPU.find((c) => parts.includes(c) || (c === "arm" && parts.includes("armv7")));
  if (!os && !cpu) return null;
  const entry = {};
  if (os) entry.os = [os];
  if (cpu) entry.cpu = [cpu];
  if (os === "linux" && (parts.includes("musl") || parts.includes("musleabihf"))) entry.libc = ["musl"];
  else if (os === "linux" && parts.includes("gnu")) entry.libc = ["glibc"];
  return entry;
}

/** Where node's resolver would place `dep` required from the package at `from` (nearest node_modules). */
function resolved(from, dep) {
  let dir = from;
  for (;;) {
    const candidate = dir === "" ? `node_modules/${dep}` : `${dir}/node_modules/${dep}`;
    if (pkgs[candidate]) return candidate;
    if (dir === "") return null;
    const i = dir.lastIndexOf("/node_modules/");
    dir = i < 0 ? "" : dir.slice(0, i);
  }
}

let added = 0;
for (const [loc, meta] of Object.entries(pkgs)) {
  for (const [dep, range] of Object.entries(meta.optionalDependencies ?? {})) {
    if (resolved(loc, dep)) continue;
    const platform = platformOf(dep);
    if (!platform) continue;
    const version = range.replace(/^[\^~=]/, "");
    if (!/^\d+\.\d+\.\d+/.test(version)) continue;
    const at = loc === "" ? `node_modules/${dep}` : `${loc}/node_modules/${dep}`;
    pkgs[at] = { version, ...(meta.dev ? { dev: true } : {}), optional: true, ...platform };
    added++;
  }
}

lock.packages = Object.fromEntries(
  Object.entries(pkgs).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : 1)),
);
fs.writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
process.stdout.write(`lock-platform-optionals: added ${added} entr${added === 1 ? "y" : "ies"}\n`);
