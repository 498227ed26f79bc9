import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(__dirname, "../../..");

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      if (name !== "node_modules" && name !== "dist") out.push(...sourceFiles(p));
    } else if (/\.(ts|tsx|js|mjs|cjs)$/.test(name) && !name.endsWith(".d.ts")) {
      out.push(p);
    }
  }
  return out;
}

/** Every module specifier in import/export-from/require/dynamic import. */
function specifiers(source: string): string[] {
  const out: string[] = [];
  const re =
    /(?:import|export)\s[^'"]*?from\s*["']([^"']+)["']|import\s*["']([^"']+)["']|(?:require|import)\s*\(\s*["']([^"']+)["']\s*\)/g;
  for (const m of source.matchAll(re)) out.push((m[1] ?? m[2] ?? m[3])!);
  return out;
}

/** Files of `from` that import anything under `forbidden` (by relative path or a path alias). */
function violations(from: string, forbidden: string): string[] {
  const bad: string[] = [];
  const forbiddenAbs = join(ROOT, forbidden);
  for (const file of sourceFiles(join(ROOT, from))) {
    for (const spec of specifiers(readFileSync(file, "utf8"))) {
      const target = spec.startsWith(".") ? resolve(dirname(file), spec) : join(ROOT, spec);
      if (
        target === forbiddenAbs ||
        target.startsWith(`${forbiddenAbs}/`) ||
        spec.startsWith(`${forbidden}/`)
      ) {
        bad.push(`${relative(ROOT, file)} imports ${spec}`);
      }
    }
  }
  return bad;
}

describe("architecture: the planes only share shared/", () => {
  it("finds import specifiers of every form", () => {
    assert.deepEqual(
      specifiers(`import a from "./a"; import { b } from '../b'; export * from "./c"; import "./d";
        const e = require("./e"); const f = await import("./f"); import type { G } from "./g";`),
      ["./a", "../b", "./c", "./d", "./e", "./f", "./g"],
    );
  });

  it("control-plane/src does not import data-plane/", () => {
    assert.ok(sourceFiles(join(ROOT, "control-plane/src")).length > 0, "scanned control-plane/src");
    assert.deepEqual(violations("control-plane/src", "data-plane"), []);
  });

  it("data-plane/src does not import control-plane/", () => {
    assert.deepEqual(violations("data-plane/src", "control-plane"), []);
  });

  it("shared/src imports neither plane", () => {
    assert.deepEqual(
      [...violations("shared/src", "control-plane"), ...violations("shared/src", "data-plane")],
      [],
    );
  });
});

/**
 * The data plane's layers (docs/architecture.md "Layers"): the transports (server/ for HTTP, ws/, nodes/)
 * side by side over the request pipeline (pipeline/), over forwarding and the capabilities it uses. Nothing
 * imports upward: the pipeline no transport, the layers below neither the pipeline nor a transport.
 */
describe("architecture: the data plane's layers", () => {
  const transports = ["data-plane/src/server", "data-plane/src/ws", "data-plane/src/nodes"];
  const below = [
    "access",
    "allowlist",
    "auth",
    "cache",
    "filters",
    "forward",
    "limits",
    "memory",
    "metrics",
    "policy",
    "quota",
    "ratelimit",
    "requestlog",
    "rpc",
    "state",
    "telemetry",
    "upstream",
    "usage",
  ].map((d) => `data-plane/src/${d}`);

  it("the pipeline imports no transport", () => {
    assert.ok(
      sourceFiles(join(ROOT, "data-plane/src/pipeline")).length > 0,
      "scanned data-plane/src/pipeline",
    );
    assert.deepEqual(
      transports.flatMap((t) => violations("data-plane/src/pipeline", t)),
      [],
    );
  });

  it("nothing below the pipeline imports it or a transport", () => {
    const up = [...transports, "data-plane/src/pipeline"];
    assert.deepEqual(
      below.flatMap((from) => up.flatMap((t) => violations(from, t))),
      [],
    );
  });
});
