import assert from "node:assert/strict";
import { BUMP_INTERVAL_MS, TtlLru } from "../../../../data-plane/src/auth/ttl-lru";

interface Entry {
  name: string;
  until: number;
  bumpedAt: number;
}

const entry = (name: string, until = 1e15): Entry => ({ name, until, bumpedAt: 0 });

describe("data-plane: TtlLru", () => {
  it("exact LRU: a hit protects an entry from eviction, the least recently used goes first", () => {
    const lru = new TtlLru<Entry>(2, (e) => e.until);
    lru.set("a", entry("a"));
    lru.set("b", entry("b"));
    assert.equal(lru.get("a", 0)?.name, "a");
    lru.set("c", entry("c")); // evicts b, the least recently used
    assert.equal(lru.get("b", 0), undefined);
    assert.equal(lru.get("a", 0)?.name, "a");
    assert.equal(lru.get("c", 0)?.name, "c");
    assert.equal(lru.size, 2);
  });

  it("expired entries are not served and are dropped on read; has() does not change recency", () => {
    const lru = new TtlLru<Entry>(3, (e) => e.until);
    lru.set("a", entry("a", 100));
    assert.equal(lru.has("a", 99), true);
    assert.equal(lru.get("a", 100), undefined);
    assert.equal(lru.size, 0);
    lru.set("x", entry("x"));
    lru.set("y", entry("y"));
    lru.set("z", entry("z"));
    assert.equal(lru.has("x", 0), true); // no bump: x stays the oldest
    lru.set("w", entry("w"));
    assert.equal(lru.has("x", 0), false);
  });

  it("approximate recency: a hit moves an entry at most once per BUMP_INTERVAL_MS", () => {
    const lru = new TtlLru<Entry>(2, (e) => e.until, {
      at: (e) => e.bumpedAt,
      set: (e, now) => {
        e.bumpedAt = now;
      },
    });
    const a = entry("a");
    a.bumpedAt = 1_000;
    lru.set("a", a);
    lru.set("b", { ...entry("b"), bumpedAt: 1_000 });
    // Within the interval: the hit is served but a keeps its place (the oldest), so c evicts it.
    assert.equal(lru.get("a", 1_000 + BUMP_INTERVAL_MS - 1)?.name, "a");
    assert.equal(a.bumpedAt, 1_000);
    lru.set("c", entry("c"));
    assert.equal(lru.get("a", 1_000), undefined);

    const lru2 = new TtlLru<Entry>(2, (e) => e.until, {
      at: (e) => e.bumpedAt,
      set: (e, now) => {
        e.bumpedAt = now;
      },
    });
    const p = { ...entry("p"), bumpedAt: 1_000 };
    lru2.set("p", p);
    lru2.set("q", { ...entry("q"), bumpedAt: 1_000 });
    // After the interval: the hit moves p to the recent end, so r evicts q instead.
    assert.equal(lru2.get("p", 1_000 + BUMP_INTERVAL_MS)?.name, "p");
    assert.equal(p.bumpedAt, 1_000 + BUMP_INTERVAL_MS);
    lru2.set("r", entry("r"));
    assert.equal(lru2.has("q", 0), false);
    assert.equal(lru2.has("p", 0), true);
  });
});
