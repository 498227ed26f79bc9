import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const HEAP_TUNING = join(__dirname, "../../../../data-plane/src/memory/heap-tuning.js");

/**
 * V8's pretenuring decisions on allocation sites (`--trace-pretenuring`: "tenure", "maybe tenure", "don't
 * tenure"; V8 13 in Node 24 rarely reaches a final "tenure" for this workload, but still weighs its sites)
 * in a child Node that keeps many objects of one
 * allocation site alive across young-generation GCs, as in-flight requests do: with `tuneHeap` called
 * first (as main.ts does at start-up) or not.
 */
function pretenuringDecisions(tune: boolean): number {
  const script = `
    ${tune ? `require(${JSON.stringify(HEAP_TUNING)}).tuneHeap(25, false);` : ""}
    const ring = new Array(200000);
    function make(i) { return { a: i, b: i + 1, c: [i] }; }
    for (let i = 0; i < 3e6; i++) ring[i % ring.length] = make(i);
  `;
  // A file, not -e: V8 tracks allocation sites in a module's functions as in the gateway's.
  const dir = mkdtempSync(join(tmpdir(), "heap-tuning-"));
  try {
    const file = join(dir, "workload.js");
    writeFileSync(file, script);
    const r = spawnSync(process.execPath, ["--trace-pretenuring", "--trace-pretenuring-statistics", file], {
      encoding: "utf8",
    });
    assert.equal(r.status, 0, r.stderr);
    return (r.stdout.match(/pretenuring: AllocationSite\(/g) ?? []).length;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("data-plane heap tuning", () => {
  it("turns V8's allocation-site pretenuring off at run time (V8 weighs the workload's sites without it)", () => {
    assert.ok(pretenuringDecisions(false) > 0);
    assert.equal(pretenuringDecisions(true), 0);
  });
});
