import assert from "node:assert/strict";
import { code, Harness, startHarness } from "../harness";

const DAY = 86_400_000;
const Q = `query($f: UsageFilter!) { usage(filter: $f) { from to requests24h { total series { at } } } }`;
const HISTORY = `query($d: Int) { usage(filter: {}) { history(days: $d) { date total } } }`;

/**
 * The usage range and the number of series points are capped (USAGE_MAX_RANGE_DAYS = 400,
 * USAGE_MAX_SERIES_POINTS = 500 by default): beyond them a BAD_USER_INPUT naming the cap, before any SQL.
 */
describe("control-plane: usage range and series caps", () => {
  let h: Harness;
  let small: Harness;
  let token: string;
  before(async () => {
    h = await startHarness();
    token = (await h.signUp()).token;
    // A deployment that allows 3 years but at most 200 points: the points cap binds first.
    small = await startHarness({ USAGE_MAX_RANGE_DAYS: "1095", USAGE_MAX_SERIES_POINTS: "200" });
  });
  after(async () => {
    await h?.close();
    await small?.close();
  });

  it("400 days are served (one point per UTC day); 401 days are refused with a message naming the cap", async () => {
    const to = Date.UTC(2026, 0, 1);
    const ok = await h.ok(
      Q,
      { f: { from: new Date(to - 400 * DAY).toISOString(), to: new Date(to).toISOString() } },
      token,
    );
    assert.equal(ok.usage.requests24h.series.length, 400);
    assert.equal(ok.usage.requests24h.total, 0);
    const r = await h.gql(
      Q,
      { f: { from: new Date(to - 401 * DAY).toISOString(), to: new Date(to).toISOString() } },
      token,
    );
    assert.equal(r.status, 200);
    assert.equal(code(r), "BAD_USER_INPUT");
    assert.equal(r.errors![0]!.extensions!.field, "from");
    assert.match(r.errors![0]!.message, /limited to 400 days; this one spans 401 days/);
  });

  it("a hostile range (year 1 to year 9999) is refused at once, not expanded into millions of points", async () => {
    const started = Date.now();
    const r = await h.gql(Q, { f: { from: "0001-01-01T00:00:00Z", to: "9999-12-31T00:00:00Z" } }, token);
    assert.equal(code(r), "BAD_USER_INPUT");
    assert.match(r.errors![0]!.message, /limited to 400 days/);
    assert.ok(Date.now() - started < 5_000);
    // Still serving.
    assert.equal((await h.ok(Q, { f: {} }, token)).usage.requests24h.series.length, 24);
  });

  it("history(days:) is capped by the same range", async () => {
    assert.equal((await h.ok(HISTORY, { d: 400 }, token)).usage.history.length, 400);
    const r = await h.gql(HISTORY, { d: 401 }, token);
    assert.equal(code(r), "BAD_USER_INPUT");
    assert.equal(r.errors![0]!.extensions!.field, "days");
    assert.match(r.errors![0]!.message, /days must be 1\.\.400/);
    assert.equal(code(await h.gql(HISTORY, { d: 0 }, token)), "BAD_USER_INPUT");
  });

  it("the series points cap names itself when it binds before the range cap", async () => {
    const t = (await small.signUp()).token;
    const to = Date.UTC(2026, 0, 1);
    const ok = await small.ok(
      Q,
      { f: { from: new Date(to - 200 * DAY).toISOString(), to: new Date(to).toISOString() } },
      t,
    );
    assert.equal(ok.usage.requests24h.series.length, 200);
    const r = await small.gql(
      Q,
      { f: { from: new Date(to - 300 * DAY).toISOString(), to: new Date(to).toISOString() } },
      t,
    );
    assert.equal(code(r), "BAD_USER_INPUT");
    assert.equal(r.errors![0]!.extensions!.field, "to");
    assert.match(r.errors![0]!.message, /limited to 200 points .* this range needs 300/);
    assert.match((await small.gql(HISTORY, { d: 201 }, t)).errors![0]!.message, /days must be 1\.\.200/);
  });
});
