import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { ControlPlaneEnvSchema } from "../../../control-plane/src/config";
import { NodeEnvSchema } from "../../../control-plane/src/nodes/node.config";
import { UsageWorkerEnvSchema } from "../../../control-plane/src/usage/usage.config";
import { DataPlaneEnvSchema } from "../../../data-plane/src/config";
import { commonEnvShape } from "../../../shared/src/config/env";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { TelemetryEnvSchema } from "../../../shared/src/telemetry/config";

/**
 * Keeps docs/contracts.md true to the code: its error table must list exactly the rows of GatewayError
 * (status, code, category, reason, message) and its environment tables exactly the variables of each
 * config schema, with their defaults. A row or a variable added to the code without the docs fails here.
 * Also checks that every `docs/<file>.md#anchor` cited in the sources names a heading that exists.
 */

const ROOT = resolve(__dirname, "../../../..");
const CONTRACTS = readFileSync(join(ROOT, "docs/contracts.md"), "utf8");

type Table = { header: string[]; rows: string[][] };

/** Cells of a markdown table row; `\|` inside a cell is not a separator. */
function cells(line: string): string[] {
  const inner = line.trim().replace(/^\|/, "").replace(/\|$/, "");
  return inner.split(/(?<!\\)\|/).map((c) => c.trim());
}

/** The first table after the line `<!-- {marker}` ... `-->`; undefined when the marker is missing. */
function tableAfter(doc: string, marker: string): Table | undefined {
  const lines = doc.split("\n");
  const at = lines.findIndex((l) => l.trim().startsWith(`<!-- ${marker}`));
  if (at < 0) return undefined;
  let i = at + 1;
  while (i < lines.length && !lines[i]!.trim().startsWith("|")) i++;
  const block: string[] = [];
  while (i < lines.length && lines[i]!.trim().startsWith("|")) block.push(lines[i++]!);
  if (block.length < 2) return undefined;
  return { header: cells(block[0]!), rows: block.slice(2).map(cells) };
}

const unquote = (cell: string) => cell.replace(/^`(.*)`$/, "$1");

/** Every disagreement between the documented error table and `rows`; [] when they match. */
function errorTableProblems(doc: string, rows: Readonly<Record<string, ErrorRow>>): string[] {
  const table = tableAfter(doc, "error-table");
  if (table === undefined) return ["no table after <!-- error-table -->"];
  const col = (name: string) => table.header.indexOf(name);
  const [iName, iHttp, iCode, iCat, iReason, iMsg, iWhen] = [
    "row",
    "HTTP",
    "code",
    "category",
    "reason",
    "message",
    "when",
  ].map(col);
  if ([iName, iHttp, iCode, iCat, iReason, iMsg, iWhen].some((i) => i! < 0)) {
    return [
      `error table header must be row | HTTP | code | category | reason | message | when, is ${table.header}`,
    ];
  }
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const r of table.rows) {
    const name = unquote(r[iName!]!);
    if (seen.has(name)) problems.push(`${name}: listed twice`);
    seen.add(name);
    const row = rows[name];
    if (row === undefined) {
      problems.push(`${name}: documented but not in GatewayError`);
      continue;
    }
    if (Number(r[iHttp!]) !== row.httpStatus)
      problems.push(`${name}: HTTP ${r[iHttp!]} != ${row.httpStatus}`);
    if (Number(r[iCode!]) !== row.code) problems.push(`${name}: code ${r[iCode!]} != ${row.code}`);
    if (r[iCat!] !== row.category) problems.push(`${name}: category ${r[iCat!]} != ${row.category}`);
    if (unquote(r[iReason!]!) !== row.reason)
      problems.push(`${name}: reason ${r[iReason!]} != ${row.reason}`);
    if (r[iMsg!] !== row.message) problems.push(`${name}: message "${r[iMsg!]}" != "${row.message}"`);
    if (!r[iWhen!]) problems.push(`${name}: says nothing under "when"`);
  }
  for (const name of Object.keys(rows)) if (!seen.has(name)) problems.push(`${name}: missing from the docs`);
  return problems;
}

/** How the docs write a schema default: the value in backticks, or `unset` / `empty`. */
function documentedDefault(value: unknown): string {
  if (value === undefined) return "unset";
  if (Array.isArray(value)) return value.length === 0 ? "empty" : value.join(",");
  const text = String(value);
  // Path defaults are resolved against the working directory at start: documented relative to it.
  const cwd = `${process.cwd()}/`;
  return text.startsWith(cwd) ? text.slice(cwd.length) : text;
}

/** Every disagreement between an environment table and the variables / defaults of `schema`. */
function envTableProblems(
  doc: string,
  marker: string,
  schema: z.ZodObject,
  skip: readonly string[] = [],
): string[] {
  const table = tableAfter(doc, marker);
  if (table === undefined) return [`no table after <!-- ${marker} -->`];
  const iVar = table.header.indexOf("variable");
  const iDef = table.header.indexOf("default");
  if (iVar < 0 || iDef < 0) return [`${marker}: header needs "variable" and "default"`];
  const names = Object.keys(schema.shape).filter((k) => !skip.includes(k));
  const defaults = schema.parse({}) as Record<string, unknown>;
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const r of table.rows) {
    const name = unquote(r[iVar]!);
    if (seen.has(name)) problems.push(`${marker}: ${name} listed twice`);
    seen.add(name);
    if (!names.includes(name)) {
      problems.push(`${marker}: ${name} documented but not in the schema`);
      continue;
    }
    const want = documentedDefault(defaults[name]);
    const cell = r[iDef]!;
    const quoted = /^`([^`]*)`/.exec(cell)?.[1];
    const got = quoted ?? cell.split(/[\s(]/)[0]!;
    if (got !== want) problems.push(`${marker}: ${name} default documented as "${cell}", is "${want}"`);
  }
  for (const name of names) if (!seen.has(name)) problems.push(`${marker}: ${name} missing from the docs`);
  return problems;
}

const COMMON = Object.keys(commonEnvShape);
const ENV_TABLES: [marker: string, schema: z.ZodObject, skip: readonly string[]][] = [
  ["env-table: common", z.object(commonEnvShape), []],
  ["env-table: data-plane", DataPlaneEnvSchema, COMMON],
  ["env-table: control-plane", ControlPlaneEnvSchema, COMMON],
  ["env-table: usage-worker", UsageWorkerEnvSchema, []],
  ["env-table: nodes", NodeEnvSchema, []],
  ["env-table: telemetry", TelemetryEnvSchema, []],
];

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

function anchorsOf(doc: string): Set<string> {
  const out = new Set<string>();
  for (const m of doc.matchAll(/^#{1,6}\s+(.+)$/gm)) out.add(anchor(m[1]!));
  return out;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name === "dist") continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (/\.tsx?$/.test(name)) out.push(p);
  }
  return out;
}

describe("docs/contracts.md", () => {
  it("lists exactly the rows of GatewayError, with their status, code, category, reason and message", () => {
    assert.deepEqual(errorTableProblems(CONTRACTS, GatewayError), []);
  });

  it("the error-table check catches a row added to the code and a row dropped from the docs", () => {
    const extra: ErrorRow = {
      httpStatus: 418,
      code: -32099,
      category: "Client Error",
      reason: "teapot",
      message: "x",
    };
    assert.deepEqual(errorTableProblems(CONTRACTS, { ...GatewayError, Teapot: extra }), [
      "Teapot: missing from the docs",
    ]);
    const withoutParseError = CONTRACTS.split("\n")
      .filter((l) => !/^\| `ParseError` /.test(l))
      .join("\n");
    assert.deepEqual(errorTableProblems(withoutParseError, GatewayError), [
      "ParseError: missing from the docs",
    ]);
    const wrongStatus = CONTRACTS.replace(/(\| `NoUpstream` +\| +)503/, "$1502");
    assert.deepEqual(errorTableProblems(wrongStatus, GatewayError), ["NoUpstream: HTTP 502 != 503"]);
  });

  for (const [marker, schema, skip] of ENV_TABLES) {
    it(`${marker}: every variable of the schema, with its default, and nothing else`, () => {
      assert.deepEqual(envTableProblems(CONTRACTS, marker, schema, skip), []);
    });
  }

  it("the environment check catches a variable added to a schema without docs", () => {
    const grown = DataPlaneEnvSchema.extend({ SOMETHING_NEW_MS: DataPlaneEnvSchema.shape.BODY_TIMEOUT_MS });
    assert.deepEqual(envTableProblems(CONTRACTS, "env-table: data-plane", grown, COMMON), [
      "env-table: data-plane: SOMETHING_NEW_MS missing from the docs",
    ]);
  });

  it("every docs/*.md#anchor cited in the sources and tests names an existing heading", () => {
    const docs: Record<string, Set<string>> = {};
    const missing: string[] = [];
    for (const dir of ["shared", "data-plane", "control-plane", "test", "bench", "scripts"]) {
      for (const file of sourceFiles(join(ROOT, dir))) {
        for (const m of readFileSync(file, "utf8").matchAll(/docs\/([a-z-]+\.md)#([a-z0-9_-]+)/g)) {
          const [, doc, a] = m;
          docs[doc!] ??= anchorsOf(readFileSync(join(ROOT, "docs", doc!), "utf8"));
          if (!docs[doc!]!.has(a!)) missing.push(`${file.slice(ROOT.length + 1)}: docs/${doc}#${a}`);
        }
      }
    }
    assert.deepEqual(missing, []);
  });
});
