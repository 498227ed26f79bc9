import assert from "node:assert/strict";
import {
  nextUtcMidnightMs,
  nextUtcMonthStartMs,
  utcDayKey,
  utcDayStartMs,
  utcMonthKey,
} from "../../../../shared/src/quota/day";
import { RedisNames } from "../../../../shared/src/redis/keys";

describe("shared quota day helpers", () => {
  it("names the UTC day and month", () => {
    const t = Date.UTC(2026, 0, 5, 23, 59, 59, 999);
    assert.equal(utcDayKey(t), "2026-01-05");
    assert.equal(utcMonthKey(t), "2026-01");
    assert.equal(utcDayKey(t + 1), "2026-01-06");
  });

  it("finds the next midnight and the next month start (UTC), across a year end", () => {
    const t = Date.UTC(2026, 11, 31, 12, 0, 0);
    assert.equal(utcDayStartMs(t), Date.UTC(2026, 11, 31));
    assert.equal(nextUtcMidnightMs(t), Date.UTC(2027, 0, 1));
    assert.equal(nextUtcMonthStartMs(t), Date.UTC(2027, 0, 1));
    assert.equal(nextUtcMidnightMs(Date.UTC(2026, 11, 31)), Date.UTC(2027, 0, 1), "midnight itself is today");
  });

  it("builds quota and rate-limit key names with the hash tag", () => {
    const n = new RedisNames("rg:");
    assert.equal(n.quotaDay("ws1", "2026-11-22"), "rg:quota:{ws1}:d:2026-11-22");
    assert.equal(n.quotaMonth("ws1", "2026-11"), "rg:quota:{ws1}:m:2026-11");
    assert.equal(n.quotaFlushSeq("ws1", "i1"), "rg:quota:{ws1}:seq:i1");
    assert.equal(n.rateLimitWindow("app:abc", 1790000000), "rg:rl:{app:abc}:1790000000");
  });
});
