import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

// Plain JS script module (not compiled): loaded from the source tree.
const root = path.resolve(__dirname, "../../../..");
// biome-ignore lint/suspicious/noExplicitAny: an untyped CommonJS script
const compat = require(path.join(root, "scripts/uws-glibc-compat.js")) as any;
const pkgDir = path.join(root, "node_modules/@btc-vision/uwebsockets.js");
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** Names and version names of the undefined dynamic symbols, and the flags of each version need. */
function imports(buf: Buffer) {
  const elf = compat.parseElf(buf);
  const cstr = (off: number) => buf.toString("latin1", off, buf.indexOf(0, off));
  const syms = new Map<string, string>();
  for (let i = 0; i < elf.dynsym.size / 24; i++) {
    const at = elf.dynsym.offset + i * 24;
    if (buf.readUInt16LE(at + 6) !== 0) continue;
    const v = buf.readUInt16LE(elf.versym.offset + i * 2) & 0x7fff;
    const need = elf.needs.get(v);
    if (need) syms.set(`${cstr(elf.dynstr.offset + buf.readUInt32LE(at))}@${need.name}`, need.file);
  }
  const flags = new Map<string, number>();
  for (const need of elf.needs.values()) flags.set(need.name, buf.readUInt16LE(need.aux + 4));
  return { syms, flags };
}

describe("scripts/uws-glibc-compat.js", () => {
  let tmp: string;
  beforeEach(() => {
    tmp = mkdtempSync(path.join(tmpdir(), "uws-compat-"));
  });
  afterEach(() => rmSync(tmp, { recursive: true, force: true }));

  for (const arch of ["x64", "arm64"]) {
    it(`retargets the three C23 imports of the published linux-${arch} binaries and nothing else`, () => {
      const file = `uws_linux_${arch}_137.node`;
      const original = readFileSync(path.join(pkgDir, file));
      assert.equal(sha256(original), compat.SHA256[file], "the installed binary is the published one");
      const before = imports(original);
      assert.ok([...before.syms.keys()].some((s) => s.startsWith("__isoc23_strtol@GLIBC_2.38")));

      const patched: Buffer = compat.patchBinary(original);
      const after = imports(patched);
      assert.equal(patched.length, original.length);
      assert.deepEqual(
        [...after.syms.keys()].filter((s) => s.includes("GLIBC_2.38")),
        [],
      );
      const base = arch === "x64" ? "GLIBC_2.2.5" : "GLIBC_2.17";
      for (const fn of ["strtol", "strtoul"]) assert.equal(after.syms.get(`${fn}@${base}`), "libc.so.6", fn);
      assert.equal(after.flags.get("GLIBC_2.38"), 2, "the unused 2.38 need is weak");
      // Every other import is as it was.
      for (const [sym, file2] of before.syms) {
        if (sym.startsWith("__isoc23_")) continue;
        assert.equal(after.syms.get(sym), file2, sym);
      }
      // Bytes differ only in the symbol table, the version table and the one need's flags.
      let changed = 0;
      for (let i = 0; i < original.length; i++) if (original[i] !== patched[i]) changed++;
      assert.ok(changed > 0 && changed <= 3 * 4 + 3 * 2 + 2, `${changed} bytes changed`);
    });
  }

  it("writes the retargeted copy below glibc 2.38, from verified binaries, and nothing at 2.38 or later", () => {
    const fake = path.join(tmp, "node_modules/@btc-vision/uwebsockets.js");
    mkdirSync(path.dirname(fake), { recursive: true });
    cpSync(pkgDir, fake, { recursive: true });
    const out = path.join(tmp, "node_modules", compat.COMPAT_DIR_NAME);

    assert.match(compat.run(tmp, "2.36", "x64"), /wrote 4 retargeted linux-x64 binaries/);
    const record = JSON.parse(readFileSync(path.join(out, "PATCHED.json"), "utf8"));
    assert.equal(
      record.binaries["uws_linux_x64_137.node"].originalSha256,
      compat.SHA256["uws_linux_x64_137.node"],
    );
    assert.ok(existsSync(path.join(out, "uws.js")));
    assert.ok(!existsSync(path.join(out, "uws_linux_arm64_137.node")), "only this architecture's binaries");

    assert.match(compat.run(tmp, "2.41", "x64"), /load unchanged/);
    assert.ok(!existsSync(out), "a stale copy is removed where the original loads");
    assert.match(compat.run(tmp, "2.35", "x64"), /older than 2\.36.*unsupported/);
    assert.ok(!existsSync(out));
    assert.match(compat.run(tmp, null, "x64"), /nothing to do/);
  });

  it("refuses a binary that is not the published one, and writes nothing", () => {
    const fake = path.join(tmp, "node_modules/@btc-vision/uwebsockets.js");
    mkdirSync(path.dirname(fake), { recursive: true });
    cpSync(pkgDir, fake, { recursive: true });
    const bin = path.join(fake, "uws_linux_x64_127.node");
    const tampered = readFileSync(bin);
    tampered[tampered.length - 1] ^= 0xff;
    writeFileSync(bin, tampered);
    assert.throws(
      () => compat.run(tmp, "2.36", "x64"),
      /uws_linux_x64_127\.node: sha256 .* is not the published/,
    );
    assert.ok(!existsSync(path.join(tmp, "node_modules", compat.COMPAT_DIR_NAME)));
  });

  it("compares glibc versions numerically", () => {
    assert.equal(compat.versionLess("2.36", "2.38"), true);
    assert.equal(compat.versionLess("2.4", "2.38"), true);
    assert.equal(compat.versionLess("2.38", "2.38"), false);
    assert.equal(compat.versionLess("2.41", "2.38"), false);
  });
});
