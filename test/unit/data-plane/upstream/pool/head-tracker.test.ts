import assert from "node:assert/strict";
import { HeadTracker } from "../../../../../data-plane/src/upstream/pool/head-tracker";

function tracker(heads: number[], outlier = 1000) {
  const members = { upstreams: heads.map((head) => ({ head, breakerOpen: false })) };
  return { t: new HeadTracker(members, outlier), members };
}

describe("upstream pool: head tracking", () => {
  it("takes the network head from the nodes' health-checked heads", () => {
    const { t } = tracker([100, 105, 1_000_000]);
    assert.equal(t.best(), 105, "the outlier is outvoted");
  });

  it("moves the cache head with a head seen in an answer, but not with an implausible jump", () => {
    const { t } = tracker([100, 100]);
    t.observe(120);
    assert.equal(t.cacheHead(), 120);
    t.observe(100 + 65);
    assert.equal(t.cacheHead(), 120, "more than 64 above the checked head: ignored");
    t.observe(110);
    assert.equal(t.cacheHead(), 120, "never back");
  });

  it("serves a head that never goes back while the nodes lag, and follows a chain that started again", () => {
    const { t, members } = tracker([100, 100], 50);
    assert.equal(t.servedAt(t.best()), 100);
    members.upstreams[0]!.head = 90;
    members.upstreams[1]!.head = 90;
    assert.equal(t.servedAt(t.best()), 100, "nodes fell behind: the served head holds");
    members.upstreams[0]!.head = 5;
    members.upstreams[1]!.head = 5;
    assert.equal(t.servedAt(t.best()), 5, "far below (more than HEAD_OUTLIER_BLOCKS): a reset chain");
  });

  it("forgets a head seen in an answer at or above a reorg", () => {
    const { t } = tracker([100, 100]);
    t.observe(110);
    t.reorged(111);
    assert.equal(t.observed, 110, "below the reorg: kept");
    t.reorged(105);
    assert.equal(t.observed, -1);
    assert.equal(t.cacheHead(), 100);
  });
});
