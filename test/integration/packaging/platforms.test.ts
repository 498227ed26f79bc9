import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

// `npm ci` on another platform (macOS, arm64) must not fail on a linux-x64-only package: npm refuses a
// required package whose os/cpu/libc excludes the platform (EBADPLATFORM) and skips an optional one.
// `--dry-run` alone does not check platforms, hence the lockfile rule below as well.
const root = path.resolve(__dirname, "../../../..");
const lock = JSON.parse(readFileSync(path.join(root, "package-lock.json"), "utf8"));

interface LockEntry {
  os?: string[];
  cpu?: string[];
  libc?: string[];
  optional?: boolean;
}

function excluded(list: string[] | undefined, value: string | null): boolean {
  if (list === undefined || value === null) return false;
  if (list.includes(`!${value}`)) return true;
  return !list.some((x) => x.startsWith("!")) && !list.includes(value);
}

function excludes(e: LockEntry, os: string, cpu: string, libc: string | null): boolean {
  return excluded(e.os, os) || excluded(e.cpu, cpu) || (os === "linux" && excluded(e.libc, libc));
}

/** `npm ci --dry-run` for a platform in a copy of what the install reads; its "add NAME VERSION" lines. */
function dryRun(dir: string, os: string, cpu: string): string {
  const r = spawnSync("npm", ["ci", `--os=${os}`, `--cpu=${cpu}`, "--dry-run", "--no-audit", "--no-fund"], {
    cwd: dir,
    encoding: "utf8",
    timeout: 120_000,
  });
  assert.equal(r.status, 0, `npm ci --os=${os} --cpu=${cpu} --dry-run: ${r.stderr}`);
  return r.stdout;
}

describe("packaging: installs off linux-x64", function () {
  this.timeout(300_000);

  for (const [os, cpu, libc] of [
    ["darwin", "arm64", null],
    ["darwin", "x64", null],
    ["linux", "arm64", "glibc"],
    ["linux", "x64", "glibc"],
  ] as const) {
    it(`every locked package that excludes ${os}-${cpu} is optional, so npm skips it there`, () => {
      const required = Object.entries(lock.packages as Record<string, LockEntry>)
        .filter(([k, e]) => k !== "" && !e.optional && excludes(e, os, cpu, libc))
        .map(([k]) => k);
      assert.deepEqual(required, []);
    });
  }

  it("anvil is optional: npm ci adds it on linux-x64 and not on darwin-arm64 (--dry-run)", () => {
    const e = lock.packages["node_modules/@foundry-rs/anvil-linux-amd64"] as LockEntry;
    assert.equal(e.optional, true);
    assert.deepEqual([e.os, e.cpu], [["linux"], ["x64"]]);
    const dir = mkdtempSync(path.join(tmpdir(), "npm-platforms-"));
    try {
      for (const f of [
        "package.json",
        "package-lock.json",
        "scripts/uws-glibc-compat.js",
        "data-plane/uws",
      ]) {
        mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
        cpSync(path.join(root, f), path.join(dir, f), { recursive: true });
      }
      const mac = dryRun(dir, "darwin", "arm64");
      assert.match(mac, /^add @node-rs\/argon2-darwin-arm64 /m, "the platform flags took effect");
      assert.doesNotMatch(mac, /anvil/);
      const linux = dryRun(dir, "linux", "x64");
      assert.match(linux, /^add @foundry-rs\/anvil-linux-amd64 1\.7\.1$/m);
      assert.match(linux, /^add @node-rs\/argon2-linux-x64-gnu /m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
