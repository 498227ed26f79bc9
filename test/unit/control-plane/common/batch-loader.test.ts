import assert from "node:assert/strict";
import { BatchLoader } from "../../../../control-plane/src/common/batch-loader";

describe("control-plane/common: BatchLoader", () => {
  it("joins the loads of one tick into one fetch (each key once); a later tick fetches again", async () => {
    const fetched: string[][] = [];
    const l = new BatchLoader(
      async (keys: string[]) => {
        fetched.push(keys);
        return new Map(keys.filter((k) => k !== "missing").map((k) => [k, k.toUpperCase()]));
      },
      () => "fallback",
    );
    const got = await Promise.all(["a", "b", "a", "missing"].map((k) => l.load(k)));
    assert.deepEqual(got, ["A", "B", "A", "fallback"]);
    assert.deepEqual(fetched, [["a", "b", "missing"]]);
    assert.equal(await l.load("a"), "A");
    assert.deepEqual(fetched, [["a", "b", "missing"], ["a"]], "nothing is cached between batches");
  });

  it("a failed fetch rejects every load of its batch, and the next batch runs", async () => {
    let fail = true;
    const l = new BatchLoader(
      async (keys: number[]) => {
        if (fail) throw new Error("db down");
        return new Map(keys.map((k) => [k, k * 2]));
      },
      () => 0,
    );
    const results = await Promise.allSettled([l.load(1), l.load(2)]);
    assert.deepEqual(
      results.map((r) => r.status),
      ["rejected", "rejected"],
    );
    fail = false;
    assert.equal(await l.load(3), 6);
  });
});
