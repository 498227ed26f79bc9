#!/usr/bin/env node
// Makes the uWebSockets.js binaries load on glibc 2.36 and 2.37 (Debian 12), at install time (`postinstall`).
//
// @btc-vision/uwebsockets.js (pinned in package.json, integrity-checked by npm from the lockfile) is built
// against glibc 2.38. The only symbols it takes from 2.38 are C23's `__isoc23_strtol`, `__isoc23_strtoul`
// and `__isoc23_sscanf`: glibc 2.38 headers redirect strtol/strtoul/sscanf to them. On a glibc older than
// 2.38 this script writes a copy of the package to node_modules/.uws-glibc-compat/ whose linux binaries
// for this architecture call the classic strtol/strtoul/sscanf instead, and nothing else is changed:
//   - each of the three undefined dynamic symbols gets the name that follows its `__isoc23_` prefix (its
//     name offset + 9: the string is already in .dynstr) and the libc base version of this architecture;
//   - the GLIBC_2.38 requirement, then used by no symbol, is marked weak (VER_FLG_WEAK).
// The two variants differ only in C23 additions (a `0b` prefix with base 0 or 2, `%b`); the binaries call
// sscanf with "%lu"/"%lx" and strtol/strtoul with base 10 or 0 on numbers they or the process write.
// Every input binary must match the sha256 recorded below for the pinned version, or nothing is written.
// On glibc 2.38 or later the package loads unchanged and any earlier copy is removed, so an image on a
// current base (docker/Dockerfile) runs the untouched binary. The loader is data-plane/uws/index.js.
// docs/runtime.md says why this and not something else.

const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");

const PACKAGE = "@btc-vision/uwebsockets.js";
const VERSION = "20.57.0";
const COMPAT_DIR_NAME = ".uws-glibc-compat";
const NEEDED = "GLIBC_2.38";
const MIN_GLIBC = "2.36";

/** sha256 of each linux binary of the pinned version, as published. */
const SHA256 = {
  "uws_linux_arm64_115.node": "6bdbc8ff976b4371af1906175e9025804bacc38a414969f4f02314e6b99f206c",
  "uws_linux_arm64_127.node": "82b79bd18d1e3563de336156005bd01b7f39fc387b65173d69a29da4ee79f895",
  "uws_linux_arm64_137.node": "88618b30ddf6b2b62310db89f40a701616676352aac5e0f6184dd8ef876199ce",
  "uws_linux_arm64_141.node": "81d0186dd1549ed6a7f47e68e323573fc27d69d2920527654ce2dd993af2b0ec",
  "uws_linux_x64_115.node": "5b126ee00bf754b02e97e4c27090365a8562c5820c93f93918ac2212d4503e91",
  "uws_linux_x64_127.node": "4b55b1f2cb7a7913febbb65a89496412b96af77e838552980092ba6b33723aac",
  "uws_linux_x64_137.node": "98128405dba2fb608448e921a979530f70c946a2cc9889c15f2fa70c2d00ab05",
  "uws_linux_x64_141.node": "813d788b347c6fd76b779d8932311ec05a044e612b4b83af220f16e6ea789683",
};

/** The three C23 entry points and the classic functions they become. */
const RETARGET = {
  __isoc23_strtol: "strtol",
  __isoc23_strtoul: "strtoul",
  __isoc23_sscanf: "sscanf",
};

/** libc's base symbol version per ELF machine: what strtol/strtoul/sscanf are defined at there. */
const BASE_VERSION = { 62: "GLIBC_2.2.5", 183: "GLIBC_2.17" }; // EM_X86_64, EM_AARCH64

const SHT_DYNSYM = 11;
const SHT_GNU_HASH = 0x6ffffff6;
const SHT_GNU_VERNEED = 0x6ffffffe;
const SHT_GNU_VERSYM = 0x6fffffff;
const VER_FLG_WEAK = 0x2;

const sha256 = (buf) => crypto.createHash("sha256").update(buf).digest("hex");

function cstr(buf, off) {
  const end = buf.indexOf(0, off);
  return buf.toString("latin1", off, end);
}

/** ELF's SysV hash (vna_hash). */
function elfHash(name) {
  let h = 0;
  for (const c of Buffer.from(name, "latin1")) {
    h = ((h << 4) + c) >>> 0;
    const g = h & 0xf0000000;
    if (g !== 0) h ^= g >>> 24;
    h &= ~g >>> 0;
  }
  return h >>> 0;
}

/** The sections and version needs of a 64-bit little-endian ELF shared object. */
function parseElf(buf) {
  if (buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2 || buf[5] !== 1) {
    throw new Error("not a 64-bit little-endian ELF file");
  }
  const machine = buf.readUInt16LE(0x12);
  const shoff = Number(buf.readBigUInt64LE(0x28));
  const shentsize = buf.readUInt16LE(0x3a);
  const shnum = buf.readUInt16LE(0x3c);
  const sections = [];
  for (let i = 0; i < shnum; i++) {
    const h = shoff + i * shentsize;
    sections.push({
      type: buf.readUInt32LE(h + 4),
      offset: Number(buf.readBigUInt64LE(h + 0x18)),
      size: Number(buf.readBigUInt64LE(h + 0x20)),
      link: buf.readUInt32LE(h + 0x28),
      info: buf.readUInt32LE(h + 0x2c),
    });
  }
  const one = (type) => {
    const found = sections.filter((s) => s.type === type);
    if (found.length !== 1) throw new Error(`expected one section of type 0x${type.toString(16)}`);
    return found[0];
  };
  const dynsym = one(SHT_DYNSYM);
  const dynstr = sections[dynsym.link];
  const versym = one(SHT_GNU_VERSYM);
  const verneed = one(SHT_GNU_VERNEED);
  const gnuHash = one(SHT_GNU_HASH);
  const needs = new Map(); // version index -> { file, name, aux }
  let vn = verneed.offset;
  for (let i = 0; i < verneed.info; i++) {
    const file = cstr(buf, dynstr.offset + buf.readUInt32LE(vn + 4));
    let aux = vn + buf.readUInt32LE(vn + 8);
    for (let j = 0; j < buf.readUInt16LE(vn + 2); j++) {
      const name = cstr(buf, dynstr.offset + buf.readUInt32LE(aux + 8));
      needs.set(buf.readUInt16LE(aux + 6), { file, name, aux });
      const next = buf.readUInt32LE(aux + 12);
      if (next === 0) break;
      aux += next;
    }
    const next = buf.readUInt32LE(vn + 12);
    if (next === 0) break;
    vn += next;
  }
  return { machine, dynsym, dynstr, versym, needs, symoffset: buf.readUInt32LE(gnuHash.offset + 4) };
}

function symbolsAt(buf, elf, versionIndex) {
  const out = [];
  const count = elf.dynsym.size / 24;
  for (let i = 0; i < count; i++) {
    if ((buf.readUInt16LE(elf.versym.offset + i * 2) & 0x7fff) !== versionIndex) continue;
    const at = elf.dynsym.offset + i * 24;
    const nameOff = buf.readUInt32LE(at);
    out.push({
      index: i,
      at,
      nameOff,
      name: cstr(buf, elf.dynstr.offset + nameOff),
      shndx: buf.readUInt16LE(at + 6),
    });
  }
  return out;
}

function indexOf(elf, file, name) {
  for (const [index, need] of elf.needs) if (need.file === file && need.name === name) return index;
  return null;
}

/** Returns a patched copy of `input` (see the header), or throws saying what did not match. */
function patchBinary(input) {
  const buf = Buffer.from(input);
  const elf = parseElf(buf);
  const base = BASE_VERSION[elf.machine];
  if (!base) throw new Error(`unsupported ELF machine ${elf.machine}`);
  const needed = indexOf(elf, "libc.so.6", NEEDED);
  const baseIndex = indexOf(elf, "libc.so.6", base);
  if (needed === null || baseIndex === null) throw new Error(`libc.so.6 ${NEEDED} or ${base} not required`);
  const syms = symbolsAt(buf, elf, needed);
  const names = syms.map((s) => s.name);
  if (names.length === 0 || names.some((n) => !(n in RETARGET))) {
    throw new Error(
      `${NEEDED} symbols are ${names.join(", ")}, expected some of ${Object.keys(RETARGET).join(", ")}`,
    );
  }
  for (const s of syms) {
    // Undefined symbols sit before the GNU hash table's first hashed symbol: renaming them leaves it valid.
    if (s.shndx !== 0 || s.index >= elf.symoffset) throw new Error(`${s.name} is not an undefined import`);
    const renamed = s.nameOff + "__isoc23_".length;
    if (cstr(buf, elf.dynstr.offset + renamed) !== RETARGET[s.name]) throw new Error(`${s.name}: bad string`);
    buf.writeUInt32LE(renamed, s.at);
    const vs = elf.versym.offset + s.index * 2;
    buf.writeUInt16LE((buf.readUInt16LE(vs) & 0x8000) | baseIndex, vs);
  }
  const aux = elf.needs.get(needed).aux;
  if (buf.readUInt32LE(aux) !== elfHash(NEEDED)) throw new Error(`${NEEDED}: unexpected hash`);
  buf.writeUInt16LE(buf.readUInt16LE(aux + 4) | VER_FLG_WEAK, aux + 4);
  // What the dynamic linker will see: no symbol bound to the weak requirement, the three at the base version.
  const check = parseElf(buf);
  if (symbolsAt(buf, check, needed).length !== 0) throw new Error("patch check: symbols left at 2.38");
  const retargeted = symbolsAt(buf, check, baseIndex).map((s) => s.name);
  for (const name of names.map((n) => RETARGET[n])) {
    if (!retargeted.includes(name)) throw new Error(`patch check: ${name} not at ${base}`);
  }
  return buf;
}

/** "2.36" -> [2, 36]; compares dotted versions. */
function versionLess(a, b) {
  const [x, y] = [a.split(".").map(Number), b.split(".").map(Number)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) < (y[i] ?? 0);
  }
  return false;
}

/** The running glibc's version, or null (not Linux, or musl). */
function glibcVersion() {
  if (process.platform !== "linux") return null;
  const header = process.report?.getReport?.().header;
  return header?.glibcVersionRuntime ?? null;
}

function packageDir(root) {
  return path.join(root, "node_modules", ...PACKAGE.split("/"));
}

function compatDir(root) {
  return path.join(root, "node_modules", COMPAT_DIR_NAME);
}

/** Writes the patched package copy (or removes a stale one); returns what it did, for the log line. */
function run(root, glibc = glibcVersion(), arch = process.arch) {
  const out = compatDir(root);
  if (glibc === null || !versionLess(glibc, "2.38")) {
    fs.rmSync(out, { recursive: true, force: true });
    return glibc === null ? "not glibc Linux: nothing to do" : `glibc ${glibc}: the binaries load unchanged`;
  }
  if (versionLess(glibc, MIN_GLIBC)) {
    fs.rmSync(out, { recursive: true, force: true });
    return `glibc ${glibc} is older than ${MIN_GLIBC}, which the uWS binaries need besides ${NEEDED}: unsupported (see docs/runtime.md)`;
  }
  const src = packageDir(root);
  // `npm ci --dry-run` runs this script too, with nothing installed.
  if (!fs.existsSync(path.join(src, "package.json"))) return `${PACKAGE} is not installed: nothing to patch`;
  const pkg = JSON.parse(fs.readFileSync(path.join(src, "package.json"), "utf8"));
  if (pkg.version !== VERSION) throw new Error(`${PACKAGE} is ${pkg.version}; this script knows ${VERSION}`);
  const files = Object.keys(SHA256).filter((f) => f.startsWith(`uws_linux_${arch}_`));
  if (files.length === 0) return `no linux-${arch} binaries in ${PACKAGE}: nothing to patch`;
  const tmp = `${out}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  for (const f of ["package.json", "uws.js", "index.d.ts", "LICENSE"]) {
    if (fs.existsSync(path.join(src, f))) fs.copyFileSync(path.join(src, f), path.join(tmp, f));
  }
  const record = { package: PACKAGE, version: VERSION, glibc, binaries: {} };
  for (const f of files) {
    const original = fs.readFileSync(path.join(src, f));
    const digest = sha256(original);
    if (digest !== SHA256[f]) throw new Error(`${f}: sha256 ${digest} is not the published ${SHA256[f]}`);
    const patched = patchBinary(original);
    fs.writeFileSync(path.join(tmp, f), patched);
    record.binaries[f] = { originalSha256: digest, patchedSha256: sha256(patched) };
  }
  fs.writeFileSync(path.join(tmp, "PATCHED.json"), `${JSON.stringify(record, null, 2)}\n`);
  fs.rmSync(out, { recursive: true, force: true });
  fs.renameSync(tmp, out);
  return `glibc ${glibc}: wrote ${files.length} retargeted linux-${arch} binaries to node_modules/${COMPAT_DIR_NAME}`;
}

module.exports = { patchBinary, parseElf, run, glibcVersion, versionLess, COMPAT_DIR_NAME, SHA256 };

if (require.main === module) {
  try {
    process.stdout.write(`uws-glibc-compat: ${run(path.resolve(__dirname, ".."))}\n`);
  } catch (err) {
    process.stderr.write(`uws-glibc-compat: ${err.message}\n`);
    process.exit(1);
  }
}
