import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import { utcDayKey } from "../../../shared/src/quota/day";
import { REQUEST_LOG_STREAM_FIELD } from "../../../shared/src/requestlog/contract";
import { usageSettled } from "../../helpers/usage-stream";
import { ADMIN_TOKEN, createApp, type Harness, type Json } from "../control-plane/harness";
import { setPlanDailyComputeUnitLimit, usageRow, xaddUsage } from "../control-plane/usage/helpers";
import { type ConsoleBrowser, launchConsoleBrowser } from "./browser";
import {
  type ConsoleStack,
  logIn,
  openPage,
  requireChromium,
  screenshot,
  startConsoleStack,
} from "./console-fixture";

const HOUR = 3_600_000;
const DAY = 86_400_000;
const num = (s: string | null) => Number((s ?? "").replace(/[^\d.]/g, ""));

describe("console: usage in both units (Chromium -> /console -> GraphQL; streams -> worker)", function () {
  this.timeout(120_000);
  let stack: ConsoleStack | undefined;
  let h: Harness;
  let browser: ConsoleBrowser | undefined;
  let page: Page;
  let consoleUrl: string;
  let token: string;
  let workspaceId: string;
  /** The reports as the API gives them: what the page must show. */
  let api: Json;

  before(async function () {
    requireChromium(this);
    stack = await startConsoleStack();
    h = stack.h;
    ({ token, workspaceId } = await h.signUp());
    const web = await createApp(h, token, "web");
    const indexer = await createApp(h, token, "indexer");
    await h.ok(
      `mutation { upsertPlan(input: { name: "metered", dailyRequestLimit: 100000, requestsPerSecond: 50 }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    await setPlanDailyComputeUnitLimit(h, "metered", 10_000);
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "metered") { id } }`,
      { w: workspaceId },
      ADMIN_TOKEN,
    );
    await stack.startWorker({ usage: { blockMs: 100, consumerName: "console-cu" } });
    const now = Date.now();
    const today = Math.floor(now / DAY) * DAY;
    const rows: unknown[] = [];
    // The last hours: the web app calls cheap methods, the indexer few heavy ones.
    for (let hr = 0; hr < 6; hr++) {
      const minute = Math.max(today, now - hr * HOUR);
      rows.push(
        usageRow({
          minute,
          workspaceId,
          appId: web.id,
          method: "eth_blockNumber",
          count: 40 + hr,
          computeUnits: 400 + 10 * hr,
        }),
        usageRow({ minute, workspaceId, appId: web.id, method: "eth_call", count: 10, computeUnits: 260 }),
        usageRow({
          minute,
          workspaceId,
          appId: indexer.id,
          method: "eth_getLogs",
          count: 5 + hr,
          computeUnits: 300 + 60 * hr,
        }),
        usageRow({
          minute,
          workspaceId,
          appId: indexer.id,
          method: "eth_getLogs",
          count: 1,
          computeUnits: 60,
          category: ErrorCategory.NodeError,
        }),
      );
    }
    // Earlier days, one of them from a data plane older than compute units (weight 1).
    for (let d = 1; d <= 5; d++) {
      const minute = today - d * DAY + 12 * HOUR;
      rows.push(
        usageRow({
          minute,
          workspaceId,
          appId: indexer.id,
          method: "eth_getLogs",
          count: 20,
          computeUnits: 1200,
        }),
      );
    }
    await xaddUsage(h, rows);
    await xaddUsage(h, [
      usageRow({
        minute: today - 6 * DAY + HOUR,
        workspaceId,
        appId: web.id,
        method: "eth_chainId",
        count: 30,
      }),
    ]);
    await usageSettled(h.redis, h.names.usageStream());
    // The limiter's live counter for today (what the data plane would have kept): 85% of the limit.
    await h.redis.set(h.names.computeUnitQuotaDay(workspaceId, utcDayKey(now)), "8500");
    // Two request-log records: one weighed, one from an older data plane.
    const rec = (requestId: string, method: string, computeUnits?: number) => ({
      time: now,
      workspaceId,
      appId: indexer.id,
      network: "eth",
      transport: "http",
      method,
      httpStatus: 200,
      category: "Success",
      reason: "",
      latencyMs: 12,
      requestId,
      item: 0,
      clientIp: null,
      ...(computeUnits === undefined ? {} : { computeUnits }),
    });
    await h.redis.xadd(
      h.names.requestLogStream(),
      "*",
      REQUEST_LOG_STREAM_FIELD,
      JSON.stringify({
        batchId: "console-cu",
        records: [rec("weighed", "eth_getLogs", 60), rec("old-dp", "eth_call")],
      }),
    );
    await usageSettled(h.redis, h.names.requestLogStream());
    api = (
      await h.ok(
        `query($f: UsageFilter!) { usage(filter: $f) {
          requests24h { total computeUnits series { computeUnits } }
          methods { method requests computeUnits }
          history(days: 30) { date computeUnits byApp { app { name } count computeUnits } } } }`,
        { f: { workspaceId } },
        token,
      )
    ).usage;

    consoleUrl = stack.consoleUrl;
    browser = await launchConsoleBrowser({ profilePrefix: "rg-console-chromium-", timeoutMs: 15_000 });
    page = browser.page;
    await logIn(page, consoleUrl, token);
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  it("usage page: today's compute units against the plan's limit, the 24 h totals and line, the methods column", async () => {
    await openPage(page, consoleUrl, "/usage");
    const methods = page.locator("table.methods");
    await methods.waitFor();
    // Today: 8,500 of 10,000 compute units, an amber meter at 85%.
    assert.match(
      (await page.getByTestId("today-compute-units").textContent())!,
      /^8,500 of 10,000 compute units$/,
    );
    const meter = page.getByRole("progressbar", { name: "Compute units against the daily limit" });
    assert.equal(await meter.getAttribute("aria-valuenow"), "85");
    assert.match((await meter.getAttribute("class"))!, /warn/);
    // 24 h: the compute-unit tile is the API's total, and the chart's line adds up to it.
    const total = num(await page.getByTestId("compute-units-total").textContent());
    assert.equal(total, api.requests24h.computeUnits);
    assert.ok(total > api.requests24h.total, "heavy methods weigh more than one unit");
    const line = JSON.parse(
      (await page.getByTestId("requests-chart").getAttribute("data-compute-units"))!,
    ) as number[];
    assert.equal(
      line.reduce((x, y) => x + y, 0),
      total,
    );
    // Methods: a Compute units column with the API's figures; sorting by it orders the rows.
    // Sorted by requests at first (the ▼ on that column).
    const header = await methods.locator("thead th").allTextContents();
    assert.deepEqual(header.slice(0, 3), ["Method", "Requests ▼", "Compute units"]);
    const table = async () => {
      const out: Record<string, { requests: number; cu: number }> = {};
      for (const tr of await methods.locator("tbody tr").all()) {
        const cells = await tr.locator("td").allTextContents();
        out[cells[0]!] = { requests: num(cells[1]!), cu: num(cells[2]!) };
      }
      return out;
    };
    const shown = await table();
    assert.deepEqual(
      shown,
      Object.fromEntries(
        api.methods.map((m: Json) => [m.method, { requests: m.requests, cu: m.computeUnits }]),
      ),
    );
    await methods.getByRole("button", { name: "Compute units" }).click();
    assert.equal(await methods.locator(`th[aria-sort="descending"]`).textContent(), "Compute units ▼");
    const order = (await methods.locator("tbody tr td:nth-child(3)").allTextContents()).map(num);
    assert.deepEqual(
      order,
      [...order].sort((x, y) => y - x),
    );
    // By compute units the indexer's eth_getLogs leads; by requests eth_blockNumber does.
    assert.equal(await methods.locator("tbody tr td:first-child").first().textContent(), "eth_getLogs");
    await methods.getByRole("button", { name: "Requests" }).click();
    assert.equal(await methods.locator("tbody tr td:first-child").first().textContent(), "eth_blockNumber");
    await methods.getByRole("button", { name: "Compute units" }).click();
    await page.evaluate(() => window.scrollTo(0, 0));
    await screenshot(page, "usage-compute-units");
  });

  it("history: stacked per app in requests or in compute units", async () => {
    const chart = page.getByTestId("history-chart");
    const datasets = async () =>
      Object.fromEntries(
        (JSON.parse((await chart.getAttribute("data-datasets"))!) as { label: string; total: number }[]).map(
          (d) => [d.label, d.total],
        ),
      );
    const perApp = (key: "count" | "computeUnits") => {
      const out: Record<string, number> = {};
      for (const d of api.history) for (const a of d.byApp) out[a.app.name] = (out[a.app.name] ?? 0) + a[key];
      return out;
    };
    assert.equal(await chart.getAttribute("data-unit"), "requests");
    assert.deepEqual(await datasets(), perApp("count"));
    await page.locator('select[name="historyUnit"]').selectOption("computeUnits");
    await page.waitForFunction(
      () =>
        document.querySelector('[data-testid="history-chart"]')?.getAttribute("data-unit") === "computeUnits",
    );
    assert.deepEqual(await datasets(), perApp("computeUnits"));
    // The web app's cheap calls weigh 10 each: its bars grow when switched to compute units.
    assert.ok(perApp("computeUnits").web! > perApp("count").web!);
    await page.getByRole("heading", { name: "Total compute units per day" }).waitFor();
    await page.locator('[data-card="History"]').scrollIntoViewIfNeeded();
    await screenshot(page, "usage-history-compute-units");
  });

  it("request log: a CU column; a dash for a record from an older data plane", async () => {
    await page.getByRole("link", { name: "Request log" }).click();
    const rows = page.locator("table.request-log tbody tr");
    await rows.first().waitFor();
    assert.equal(await rows.count(), 2);
    const headers = await page.locator("table.request-log thead th").allTextContents();
    const cuAt = headers.indexOf("CU");
    assert.ok(cuAt > 0, headers.join(","));
    const cell = async (requestId: string) =>
      (await page.locator(`tr[data-request-id="${requestId}"] td`).nth(cuAt).textContent())!.trim();
    assert.equal(await cell("weighed"), "60");
    assert.equal(await cell("old-dp"), "—");
    await screenshot(page, "request-log-compute-units");
  });

  it("plan page: today's compute units of the limit", async () => {
    await page.getByRole("link", { name: "Plan" }).click();
    const t = page.getByTestId("plan-today-compute-units");
    await t.waitFor();
    assert.match((await t.textContent())!, /8,500 of 10,000\s+compute units/);
  });
});
