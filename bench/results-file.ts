import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

/** bench/results.json (committed), or BENCH_RESULTS. */
export const RESULTS_FILE =
  process.env.BENCH_RESULTS || join(resolve(__dirname, "../../bench"), "results.json");

const log = (s: string) => process.stdout.write(`${s}\n`);

/** The committed results file is linted with the repo (`biome check .`): write it in Biome's format. */
export function formatWithBiome(file: string): void {
  try {
    const biome = require.resolve("@biomejs/biome/bin/biome");
    const r = spawnSync(process.execPath, [biome, "format", "--write", file], { encoding: "utf8" });
    if (r.status !== 0)
      log(`note: biome could not format ${file}: ${(r.stderr || r.stdout).trim().split("\n")[0]}`);
  } catch {
    log(`note: biome not installed; ${file} left as JSON.stringify wrote it`);
  }
}

/**
 * Sets one top-level section of the results file and leaves the others as they are: a bench section run by
 * itself (`node dist/bench/<name>.js`) records its figures without a full `npm run bench`. `ratios` are set
 * in the file's `ratios` section (its other keys kept), where the headline ratios of every section live.
 */
export function writeResultsSection(
  name: string,
  value: unknown,
  file = RESULTS_FILE,
  ratios: Record<string, number | null> = {},
): void {
  const results = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>) : {};
  results[name] = value;
  if (Object.keys(ratios).length > 0) {
    results.ratios = { ...((results.ratios ?? {}) as Record<string, unknown>), ...ratios };
  }
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  formatWithBiome(file);
}
