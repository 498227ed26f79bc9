import assert from "node:assert/strict";
import { InFlightMap } from "../../../../data-plane/src/memory/in-flight-map";

describe("data-plane: InFlightMap", () => {
  it("behaves as a Map through its rebuilds (entries kept, deletes applied)", () => {
    const m = new InFlightMap<string, number>();
    const live = new Map<string, number>();
    // 1,000 rounds: 3 sets, 2 deletes each, so several rebuilds happen with entries present.
    for (let i = 0; i < 1_000; i++) {
      for (let j = 0; j < 3; j++) {
        const k = `k${i}-${j}`;
        m.set(k, i);
        live.set(k, i);
      }
      for (const k of [`k${i}-0`, `k${i - 1}-2`]) {
        assert.equal(m.delete(k), live.delete(k));
      }
    }
    assert.equal(m.size, live.size);
    for (const [k, v] of live) assert.equal(m.get(k), v);
    assert.deepEqual([...m.values()].sort(), [...live.values()].sort());
    assert.equal(m.delete("absent"), false);
    m.clear();
    assert.equal(m.size, 0);
    assert.equal(m.get("k999-1"), undefined);
  });

  it("stays a correct Map with thousands of entries live across rebuilds", () => {
    const m = new InFlightMap<number, number>();
    for (let i = 0; i < 5_000; i++) m.set(i, i);
    // Delete the even half (2,500 deletes: rebuilds happen only once deletes reach twice the live size).
    for (let i = 0; i < 5_000; i += 2) assert.equal(m.delete(i), true);
    for (let i = 5_000; i < 6_000; i++) m.set(i, i);
    for (let i = 1; i < 5_000; i += 2) assert.equal(m.delete(i), true);
    assert.equal(m.size, 1_000);
    for (let i = 0; i < 6_000; i++) assert.equal(m.get(i), i >= 5_000 ? i : undefined);
  });
});
