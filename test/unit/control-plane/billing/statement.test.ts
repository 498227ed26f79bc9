import assert from "node:assert/strict";
import { daysOfMonth, parseStatementMonth } from "../../../../control-plane/src/billing/month";
import { statementCsv } from "../../../../control-plane/src/billing/statement.csv";
import { assemble } from "../../../../control-plane/src/billing/statement.service";
import { dueDay, validPastDay } from "../../../../control-plane/src/billing/usage-daily";

const DAY = 86_400_000;
const NOW = Date.parse("2026-11-27T19:00:00Z");

describe("billing: months, days over the limit, CSV, usage.daily days (pure)", () => {
  it("parses YYYY-MM into UTC bounds; the current month is incomplete, February has its own length", () => {
    assert.deepEqual(parseStatementMonth("2026-11", NOW), {
      key: "2026-11",
      fromMs: Date.parse("2026-11-01T00:00:00Z"),
      toMs: Date.parse("2026-12-01T00:00:00Z"),
      complete: false,
    });
    const feb = parseStatementMonth("2024-02", NOW);
    assert.equal(feb.complete, true);
    assert.equal(daysOfMonth(feb, NOW).length, 29);
    assert.equal(daysOfMonth(parseStatementMonth("2026-11", NOW), NOW).at(-1), "2026-11-27");
    assert.equal(parseStatementMonth("2025-12", NOW).toMs, Date.parse("2026-01-01T00:00:00Z"));
    for (const bad of ["2026-13", "abc", "2026-12", "１２３４-05", "2026-1", " 2026-11"]) {
      assert.throws(
        () => parseStatementMonth(bad, NOW),
        (e: Error & { extensions?: { field?: string } }) => {
          return e.extensions?.field === "month";
        },
      );
    }
  });

  it("a day is over the limit in either unit, against the strictest plan in force that day; node traffic is not in the quota", () => {
    const month = parseStatementMonth("2026-10", NOW);
    const plan = (name: string, from: string, to: string | null, daily: number, dailyCu: number | null) => ({
      workspace_id: "w",
      plan_id: name,
      name,
      daily,
      monthly: null,
      rps: 10,
      daily_cu: dailyCu,
      monthly_cu: null,
      started_at: new Date(from),
      ended_at: to === null ? null : new Date(to),
    });
    const row = (day: string, app: string, requests: number, cu: number, refused = 0) => ({
      workspace_id: "w",
      day,
      app_id: app,
      network: app === "00000000-0000-0000-0000-000000000000" ? "node-1" : "eth",
      method: "eth_call",
      requests,
      cu,
      refused,
      refused_cu: refused * (cu / Math.max(1, requests)),
    });
    const NODE = "00000000-0000-0000-0000-000000000000";
    const s = assemble({
      workspaceId: "w",
      workspaceName: "W",
      month,
      nowMs: NOW,
      dates: daysOfMonth(month, NOW),
      plans: [
        plan("cu-plan", "2026-09-01T00:00:00Z", "2026-10-03T12:00:00Z", 1000, 500),
        plan("req-plan", "2026-10-03T12:00:00Z", null, 100, null),
      ],
      usage: [
        // Oct 1: 10 requests but 500 compute units on cu-plan: over in compute units.
        row("2026-10-01", "a1", 10, 500),
        // Oct 2: 400 compute units served, 200 refused: not over (refusals are not served).
        row("2026-10-02", "a1", 6, 600, 2),
        // Oct 3: both plans in force; 100 requests reach req-plan's 100.
        row("2026-10-03", "a1", 100, 100),
        // Oct 4: 99 on app keys plus 50 on a dedicated node: not over.
        row("2026-10-04", "a1", 99, 99),
        row("2026-10-04", NODE, 50, 50),
      ],
      appNames: new Map([["a1", "=cmd|' /C calc'!A0"]]),
    });
    assert.deepEqual(s.daysOverLimit, ["2026-10-01", "2026-10-03"]);
    const d = (date: string) => s.days.find((x) => x.date === date)!;
    assert.deepEqual([d("2026-10-01").dailyRequestLimit, d("2026-10-01").dailyComputeUnitLimit], [1000, 500]);
    assert.deepEqual([d("2026-10-03").dailyRequestLimit, d("2026-10-03").dailyComputeUnitLimit], [100, 500]);
    assert.deepEqual([d("2026-10-04").dailyRequestLimit, d("2026-10-04").dailyComputeUnitLimit], [100, null]);
    assert.equal(d("2026-10-02").servedComputeUnits, 400);
    assert.equal(s.days.length, 31);
    assert.equal(s.requests, 265);
    assert.equal(s.computeUnits, 1349);
    assert.deepEqual(
      s.plans.map((p) => [p.name, p.from.toISOString(), p.to.toISOString(), p.dailyComputeUnitLimit]),
      [
        ["cu-plan", "2026-10-01T00:00:00.000Z", "2026-10-03T12:00:00.000Z", 500],
        ["req-plan", "2026-10-03T12:00:00.000Z", "2026-11-01T00:00:00.000Z", null],
      ],
    );
    const csv = statementCsv(s);
    assert.ok(csv.includes(`,'=cmd|' /C calc'!A0,eth,`), "the formula is defused");
    assert.ok(!csv.includes(",=cmd"));
    assert.equal(csv.split("\r\n").filter((l) => l.startsWith("day,")).length, 31);
  });

  it("usage.daily reports yesterday once the delay has passed; an explicit day must be a finished UTC day", () => {
    const midnight = Date.parse("2026-11-28T00:00:00Z");
    assert.equal(dueDay(midnight + 599_999, 600_000), null);
    assert.equal(dueDay(midnight + 600_000, 600_000), "2026-11-27");
    assert.equal(dueDay(midnight + DAY - 1, 600_000), "2026-11-27");
    assert.equal(dueDay(midnight, 0), "2026-11-27");
    assert.equal(validPastDay("2026-11-27", midnight), true);
    for (const bad of ["2026-11-28", "2026-11-29", "2026-02-30", "2026-13-01", "abc", "2026-1-01"]) {
      assert.equal(validPastDay(bad, midnight), false, bad);
    }
  });
});
