import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { startLogsNode } from "../../../bench/logs-node-stub";
import { writeResultsSection } from "../../../bench/results-file";

async function getLogs(
  url: string,
  fromBlock: string,
  toBlock: string,
): Promise<{ ms: number; text: string }> {
  const start = performance.now();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getLogs", params: [{ fromBlock, toBlock }] }),
  });
  const text = await res.text();
  return { ms: performance.now() - start, text };
}

describe("bench: eth_getLogs split pieces", () => {
  it("writeResultsSection sets one section (and its ratios) and keeps the others", () => {
    const dir = mkdtempSync(join(os.tmpdir(), "results-"));
    try {
      const file = join(dir, "results.json");
      writeFileSync(file, JSON.stringify({ full: { a: 1 }, logsSplit: { old: true } }));
      writeResultsSection("logsSplit", { speedup: 4.5 }, file);
      assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), {
        full: { a: 1 },
        logsSplit: { speedup: 4.5 },
      });
      // A section with headline ratios sets its keys in `ratios`, keeping the other sections' keys.
      writeFileSync(
        file,
        JSON.stringify({ jwt: { old: true }, ratios: { cacheHitVsNginx: 1.3, jwtOnVsOff: 0.5 } }),
      );
      writeResultsSection("jwt", { new: true }, file, { jwtOnVsOff: 0.97, jwtCpu: null });
      assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), {
        jwt: { new: true },
        ratios: { cacheHitVsNginx: 1.3, jwtOnVsOff: 0.97, jwtCpu: null },
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the stand-in node: same logs on two instances, in block order; the cost grows with the range and waits for a worker", async () => {
    const opts = { blocks: 1_000, every: 10, perBlock: 2, baseMs: 1, perBlockUs: 200, workers: 1 };
    const [a, b] = await Promise.all([startLogsNode(opts), startLogsNode(opts)]);
    try {
      const wa = await getLogs(a.url, "0x0", "0x3e7");
      const wb = await getLogs(b.url, "0x0", "0x3e7");
      assert.equal(wa.text, wb.text);
      const all = JSON.parse(wa.text).result as { blockNumber: string; logIndex: string }[];
      assert.equal(all.length, 100 * 2);
      const keys = all.map((l) => [Number(l.blockNumber), Number(l.logIndex)]);
      assert.deepEqual(
        keys,
        [...keys].sort((x, y) => x[0]! - y[0]! || x[1]! - y[1]!),
      );
      // Halves concatenated = the whole.
      const lo = JSON.parse((await getLogs(a.url, "0x0", "0x1f3")).text).result;
      const hi = JSON.parse((await getLogs(a.url, "0x1f4", "latest")).text).result;
      assert.deepEqual([...lo, ...hi], all);
      // 1,000 blocks cost 1 + 200 ms; 10 blocks 3 ms. Two calls on one worker queue behind each other.
      assert.ok(wa.ms >= 190, `whole range ${wa.ms} ms`);
      const start = performance.now();
      await Promise.all([getLogs(a.url, "0x0", "0x3e7"), getLogs(a.url, "0x0", "0x3e7")]);
      assert.ok(performance.now() - start >= 390, "the second call waited for the worker");
      assert.equal(a.getLogsCalls(), 5);
      assert.match((await getLogs(a.url, "0x10", "0x1")).text, /invalid block range/);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
