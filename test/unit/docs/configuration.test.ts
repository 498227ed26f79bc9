import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { ControlPlaneEnvSchema } from "../../../control-plane/src/config";
import { NodeEnvSchema } from "../../../control-plane/src/nodes/node.config";
import { UsageWorkerEnvSchema } from "../../../control-plane/src/usage/usage.config";
import { DataPlaneEnvSchema } from "../../../data-plane/src/config";
import { commonEnvShape } from "../../../shared/src/config/env";
import { TelemetryEnvSchema } from "../../../shared/src/telemetry/config";

/**
 * docs/configuration.md is the operator's short list; docs/contracts.md holds every variable (and
 * contracts.test.ts keeps that complete). This keeps the short list true: every variable it names is read
 * by some process (a config schema, the "Outside the schemas" table, or the OpenTelemetry SDK), and a
 * default it gives in backticks is the schema's.
 */

const ROOT = resolve(__dirname, "../../../..");
const read = (p: string) => readFileSync(join(ROOT, p), "utf8");

const SCHEMAS: z.ZodObject[] = [
  z.object(commonEnvShape),
  DataPlaneEnvSchema,
  ControlPlaneEnvSchema,
  UsageWorkerEnvSchema,
  NodeEnvSchema,
  TelemetryEnvSchema,
];
/** Read by the OpenTelemetry SDK itself, as OpenTelemetry documents them (not the gateway's schemas). */
const SDK_VARIABLES = ["OTEL_EXPORTER_OTLP_PROTOCOL"];

/** The rows of the first table after the heading `## {heading}`. */
function tableRows(doc: string, heading: string): string[][] {
  const lines = doc.split("\n");
  let i = lines.findIndex((l) => l.trim() === `## ${heading}`);
  assert.ok(i >= 0, `no "## ${heading}"`);
  while (i < lines.length && !lines[i]!.trim().startsWith("|")) i++;
  const rows: string[][] = [];
  for (i += 2; i < lines.length && lines[i]!.trim().startsWith("|"); i++) {
    rows.push(
      lines[i]!.trim()
        .replace(/^\||\|$/g, "")
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

/** The variable names of a table's first cell: `A`, `A` / `B`, `A` / `_SUFFIX` (= A_SUFFIX). */
function variables(cell: string): string[] {
  const names = [...cell.matchAll(/`([A-Z_][A-Z0-9_]*)`/g)].map((m) => m[1]!);
  return names.map((n) => (n.startsWith("_") ? `${names[0]}${n}` : n));
}

/** Every disagreement between the configuration page's table and the schemas. */
function problems(doc: string, outsideSchemas: readonly string[]): string[] {
  const shapes = SCHEMAS.map((s) => ({
    keys: Object.keys(s.shape),
    defaults: s.parse({}) as Record<string, unknown>,
  }));
  const out: string[] = [];
  const rows = tableRows(doc, "Common settings");
  if (rows.length < 20) out.push(`only ${rows.length} rows under "Common settings"`);
  for (const row of rows) {
    const [first, defaultCell] = [row[0]!, row[1] ?? ""];
    const names = variables(first);
    if (names.length === 0) out.push(`a row names no variable: ${first}`);
    for (const [i, name] of names.entries()) {
      const schema = shapes.find((s) => s.keys.includes(name));
      if (schema === undefined) {
        if (!outsideSchemas.includes(name) && !SDK_VARIABLES.includes(name))
          out.push(`${name}: no process reads it`);
        continue;
      }
      const quoted = /^`([^`]*)`/.exec(defaultCell)?.[1];
      const value = schema.defaults[name];
      if (i > 0 || quoted === undefined || value === undefined || typeof value === "object") continue;
      if (String(value) !== quoted) out.push(`${name}: default documented as ${quoted}, is ${String(value)}`);
    }
  }
  return out;
}

/** Variables of the "Outside the schemas" table of docs/contracts.md. */
function outside(contracts: string): string[] {
  const at = contracts.indexOf("### Outside the schemas");
  assert.ok(at > 0, "docs/contracts.md has Outside the schemas");
  return [...contracts.slice(at).matchAll(/`([A-Z_][A-Z0-9_]*)`/g)].map((m) => m[1]!);
}

describe("docs/configuration.md", () => {
  const doc = read("docs/configuration.md");
  const outsideSchemas = outside(read("docs/contracts.md"));

  it("names only variables some process reads, with the schemas' defaults", () => {
    assert.deepEqual(problems(doc, outsideSchemas), []);
  });

  it("the check catches a variable nobody reads and a wrong default", () => {
    const stale = doc
      .replace("| `DATABASE_URL`", "| `NO_SUCH_SETTING`")
      .replace(/(\| `MAX_BODY_BYTES` +\| )`1048576`/, "$1`2048`");
    assert.deepEqual(problems(stale, outsideSchemas), [
      "NO_SUCH_SETTING: no process reads it",
      "MAX_BODY_BYTES: default documented as 2048, is 1048576",
    ]);
  });
});
