import assert from "node:assert/strict";
import { parseArgs } from "../../substrate-node/args";

describe("substrate test node: --state-pruning", () => {
  it("takes a number of blocks, or archive / archive-canonical (keep everything), as a real node does", () => {
    assert.equal(parseArgs(["--state-pruning", "256"], {}).options.statePruning, 256);
    assert.equal(parseArgs(["--pruning=16"], {}).options.statePruning, 16);
    for (const v of ["archive", "archive-canonical"]) {
      const p = parseArgs(["--state-pruning", v, "--rpc-port", "9955"], {});
      assert.equal(p.options.statePruning, undefined);
      assert.equal(p.port, 9955, "the value is consumed, not taken for a flag");
      assert.deepEqual(p.unknown, []);
    }
    assert.throws(() => parseArgs(["--state-pruning", "lots"], {}), /non-negative integer/);
  });
});
