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
 * The data plane's layers, top to bottom (docs/architecture.md "Inside the data plane"). A module may
 * import its own layer or any layer below it, never one above. The transports sit side by side: none
 * imports another (what they share belongs in the pipeline or below). Every folder and top-level file of
 * data-plane/src belongs to exactly one layer, so a new folder has to be placed here.
 */
const DATA_PLANE_LAYERS: readonly (readonly string[])[] = [
  // Wiring of the whole plane and its threads: may import anything.
  ["data-plane.ts", "main.ts", "index.ts", "threads"],
  // Transports, side by side (transport/<name> counts as one transport each).
  ["server", "ws", "nodes", "transport"],
  ["pipeline"],
  // The forwarding core, and the calls it answers from several nodes (filters).
  ["forward", "filters"],
  ["cache"],
  ["upstream"],
  // Admission, and the sinks the accounting writes to.
  [
    "limits",
    "ratelimit",
    "quota",
    "access",
    "auth",
    "allowlist",
    "policy",
    "usage",
    "requestlog",
    "config.ts",
  ],
  ["rpc", "metrics", "telemetry", "memory", "state"],
];

/**
 * Imports that still run across the transports. Dedicated-node endpoints are routes on the HTTP and
 * WebSocket transports, not a third copy of them: node HTTP requests are HTTP exchanges (same body intake,
 * slow-body timeout, CORS and headers) and node sockets are WebSocket sessions on the same hub. The uWS
 * handler guard is shared by both transports. Entries leave this list as those pieces move below the
 * transports; an entry that no longer matches an import fails the test, so the list only shrinks.
 */
const LAYER_ALLOWLIST: readonly string[] = [
  "nodes/node-http.ts -> server/cors",
  "nodes/node-http.ts -> server/exchange",
  "nodes/node-ws.ts -> ws/gateway",
  "nodes/node-ws.ts -> ws/hub",
  "nodes/node-ws.ts -> ws/session",
  "server/app.ts -> nodes/node-http",
  "ws/gateway.ts -> server/guard",
  "ws/upgrade.ts -> server/guard",
];

const DATA_PLANE_SRC = join(ROOT, "data-plane/src");

/** The layer unit of a path relative to data-plane/src: its top folder or file, or transport/<name>. */
function unitOf(rel: string): string {
  const parts = rel.split("/");
  if (parts[0] === "transport" && parts.length > 2) return `transport/${parts[1]}`;
  return parts[0]!;
}

function layerOf(unit: string): number {
  const top = unit.split("/")[0]!;
  return DATA_PLANE_LAYERS.findIndex((l) => l.includes(top));
}

/** Whether an import from `from` to `target` (paths relative to data-plane/src) runs up or across. */
function breaksLayers(from: string, target: string): boolean {
  const a = unitOf(from);
  let b = unitOf(target);
  // A top-level file is imported without its extension ("../config"); a folder by its name (its index).
  if (layerOf(b) < 0 && layerOf(`${b}.ts`) >= 0) b = `${b}.ts`;
  if (a === b) return false;
  const la = layerOf(a);
  const lb = layerOf(b);
  const transports = layerOf("server");
  return lb < la || (la === transports && lb === transports);
}

/** Data-plane imports that run up the layers or across transports, as `file -> target` (no extension). */
function layerViolations(): string[] {
  const out: string[] = [];
  for (const file of sourceFiles(DATA_PLANE_SRC)) {
    const from = relative(DATA_PLANE_SRC, file);
    for (const spec of specifiers(readFileSync(file, "utf8"))) {
      if (!spec.startsWith(".")) continue;
      const target = relative(DATA_PLANE_SRC, resolve(dirname(file), spec));
      if (!target.startsWith("..") && breaksLayers(from, target)) out.push(`${from} -> ${target}`);
    }
  }
  return out.sort();
}

describe("architecture: the data plane's layers", () => {
  it("places every folder and top-level file of data-plane/src in a layer", () => {
    const unplaced = readdirSync(DATA_PLANE_SRC).filter((name) => {
      if (!statSync(join(DATA_PLANE_SRC, name)).isDirectory() && !name.endsWith(".ts")) return false;
      return layerOf(name) < 0;
    });
    assert.deepEqual(unplaced, [], "add each to DATA_PLANE_LAYERS");
  });

  it("tells an upward import, and one across transports, from a downward one", () => {
    assert.equal(breaksLayers("server/exchange.ts", "forward/forward"), false);
    assert.equal(breaksLayers("forward/forward.ts", "server/respond"), true);
    assert.equal(breaksLayers("upstream/pool/exchanges.ts", "forward/verbatim"), true);
    assert.equal(breaksLayers("forward/verbatim.ts", "upstream/pool/verbatim-reply"), false);
    assert.equal(breaksLayers("cache/response-cache.ts", "upstream/reply"), false);
    assert.equal(breaksLayers("rpc/parse.ts", "config"), true, "config.ts sits above rpc/");
    assert.equal(breaksLayers("main.ts", "server/app"), false);
    assert.equal(breaksLayers("data-plane.ts", "usage"), false, "a folder's index");
    assert.equal(breaksLayers("nodes/node-ws.ts", "ws/hub"), true, "transports side by side");
    assert.equal(breaksLayers("transport/http/body.ts", "transport/ws/upgrade"), true);
    assert.equal(breaksLayers("transport/http/body.ts", "transport/http/headers"), false);
  });

  it("has no import running up the layers or across transports beyond the allowlist", () => {
    const unexpected = layerViolations().filter((v) => !LAYER_ALLOWLIST.includes(v));
    assert.deepEqual(unexpected, [], "an import runs up the data plane's layers (see DATA_PLANE_LAYERS)");
  });

  it("keeps no allowlist entry that no import needs any more", () => {
    const found = new Set(layerViolations());
    assert.deepEqual(
      LAYER_ALLOWLIST.filter((v) => !found.has(v)),
      [],
      "remove these from LAYER_ALLOWLIST: the import is gone",
    );
  });
});
