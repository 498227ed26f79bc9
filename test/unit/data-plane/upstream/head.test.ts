import assert from "node:assert/strict";
import { type HeadSource, networkHead } from "../../../../data-plane/src/upstream/head";

const up = (head: number, breakerOpen = false): HeadSource => ({ head, breakerOpen });
const heads = (...hs: number[]) => hs.map((h) => up(h));

describe("data plane: network head integrity (HEAD_OUTLIER_BLOCKS)", () => {
  it("one upstream: its head is trusted, however high", () => {
    assert.equal(networkHead(heads(5_000_000_000), 100), 5_000_000_000);
    assert.equal(networkHead([], 100), -1);
    assert.equal(networkHead(heads(-1), 100), -1);
  });

  it("upstreams within the threshold: the highest head, as before", () => {
    assert.equal(networkHead(heads(100, 104, 98), 100), 104);
    assert.equal(networkHead(heads(100, 200), 100), 200, "exactly the threshold apart is confirmed");
  });

  it("a lone head far above the others does not set it: the highest confirmed head does", () => {
    assert.equal(networkHead(heads(1_000_000, 105, 100), 1000), 105);
    assert.equal(networkHead(heads(105, 1_000_000, 100, 2_000_000), 1000), 105);
  });

  it("two heads far apart: the lower one (both stay selectable; a liar cannot take the traffic)", () => {
    assert.equal(networkHead(heads(1_000_000, 100), 1000), 100);
    assert.equal(networkHead(heads(100, 1_000_000), 1000), 100);
    assert.equal(networkHead(heads(100, 1101), 1000), 100);
  });

  it("a majority that agrees wins over a lone low head (a lagging node), none agreeing: the lowest", () => {
    assert.equal(networkHead(heads(1_000_000, 999_990, 100), 1000), 1_000_000);
    assert.equal(networkHead(heads(3000, 2000, 1000), 100), 1000);
  });

  it("only upstreams with a closed breaker and a known head count", () => {
    // The open-breaker node would confirm the outlier; it does not count.
    assert.equal(networkHead([up(1_000_000), up(999_999, true), up(100), up(-1)], 1000), 100);
    // With the other node unknown, the one known head stands alone and is trusted.
    assert.equal(networkHead([up(1_000_000), up(-1)], 1000), 1_000_000);
  });
});
