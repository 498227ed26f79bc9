import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { Page } from "playwright-core";
import { STATEMENT_CSV_COLUMNS } from "../../../control-plane/src/billing/statement.csv";
import { eventually } from "../../helpers/eventually";
import { createApp, type Harness } from "../control-plane/harness";
import { post } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";
import { type ConsoleBrowser, launchConsoleBrowser } from "./browser";
import {
  type ConsoleStack,
  logIn,
  openPage,
  requireChromium,
  screenshot,
  startConsoleStack,
} from "./console-fixture";

/** Cells of one CSV line (the statement's CSV quotes cells holding a comma or a quote). */
function cells(line: string): string[] {
  const out: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quoted) {
      if (ch === '"' && line[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") {
      out.push(cell);
      cell = "";
    } else cell += ch;
  }
  out.push(cell);
  return out;
}

describe("console: billing statement and its CSV download (Chromium -> /console -> GraphQL; gateway -> worker)", function () {
  this.timeout(120_000);
  let stack: ConsoleStack | undefined;
  let h: Harness;
  let stub: StubUpstream | undefined;
  let browser: ConsoleBrowser | undefined;
  let page: Page;
  let owner: { token: string; workspaceId: string };
  let alpha: { id: string; apiKey: string };
  let beta: { id: string; apiKey: string };
  const month = new Date().toISOString().slice(0, 7);

  before(async function () {
    requireChromium(this);
    stub = await new StubUpstream().start();
    stack = await startConsoleStack({ network: { slug: "evm-stub", name: "Stub", httpUrl: stub.url } });
    h = stack.h;
    owner = await h.signUp();
    await h.cp.dataSource.query(`UPDATE workspaces SET name = 'Acme, "Billing" Ltd' WHERE id = $1`, [
      owner.workspaceId,
    ]);
    alpha = await createApp(h, owner.token, "alpha");
    beta = await createApp(h, owner.token, "beta");
    await stack.startWorker({ usage: { blockMs: 100, consumerName: "console-billing" } });
    const dp = await stack.startDataPlane({
      RATE_LIMIT_MODE: "local",
      USAGE_FLUSH_INTERVAL_MS: "100",
      SHARED_NODE_EXTRA_NAMESPACES: "stub",
    });
    const rpc = (key: string) => `http://127.0.0.1:${dp.port}/evm-stub/rpc?apikey=${key}`;
    for (let i = 0; i < 7; i++)
      await post(rpc(alpha.apiKey), { jsonrpc: "2.0", id: i, method: "eth_chainId" });
    for (let i = 0; i < 3; i++)
      await post(rpc(beta.apiKey), { jsonrpc: "2.0", id: i, method: "eth_blockNumber" });
    await post(
      rpc(beta.apiKey),
      Array.from({ length: 5 }, (_, i) => ({
        jsonrpc: "2.0",
        id: i,
        method: "eth_getBalance",
        params: ["0x0"],
      })),
    );
    await eventually(
      async () =>
        (
          await h.ok(
            `query($m: String!) { usageStatement(month: $m) { requests } }`,
            { m: month },
            owner.token,
          )
        ).usageStatement.requests === 15,
      "15 requests in the statement",
      30_000,
    );
    browser = await launchConsoleBrowser({ profilePrefix: "rg-console-billing-", timeoutMs: 15_000 });
    page = browser.page;
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
    await stub?.stop();
  });

  it("shows the month's statement and downloads it as CSV with the same lines", async () => {
    await logIn(page, stack!.consoleUrl, owner.token);
    await openPage(page, stack!.consoleUrl, "/billing");
    // Compute units depend on the networks' method weights: the page and the file must show the API's.
    const api = (
      await h.ok(
        `query($m: String!) { usageStatement(month: $m) { computeUnits lines { method computeUnits } csv } }`,
        { m: month },
        owner.token,
      )
    ).usageStatement;
    const cu = new Map<string, string>(
      api.lines.map((l: { method: string; computeUnits: number }) => [l.method, String(l.computeUnits)]),
    );
    await page.getByTestId("statement-requests").filter({ hasText: "15" }).waitFor();
    assert.equal(
      (await page.getByTestId("statement-compute-units").textContent())?.trim(),
      new Intl.NumberFormat("en-US").format(api.computeUnits),
    );
    assert.equal((await page.getByTestId("statement-days-over").textContent())?.trim(), "0");
    assert.match((await page.getByTestId("statement-plans").textContent()) ?? "", /free/);
    const rows = page.locator('[data-card="Statement lines"] tbody tr');
    assert.equal(await rows.count(), 3);
    await screenshot(page, "billing");

    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download CSV" }).click(),
    ]);
    assert.equal(download.suggestedFilename(), `usage-statement-Acme-Billing-Ltd-${month}.csv`);
    const text = readFileSync((await download.path())!, "utf8");
    const lines = text.split("\r\n");
    assert.equal(lines.pop(), "", "ends with a line break");
    assert.deepEqual(cells(lines[0]!), [...STATEMENT_CSV_COLUMNS]);
    const records = lines
      .slice(1)
      .map((l) => Object.fromEntries(STATEMENT_CSV_COLUMNS.map((c, i) => [c, cells(l)[i]])));
    for (const r of records) {
      assert.equal(r.month, month);
      assert.equal(r.workspace_id, owner.workspaceId);
      assert.equal(r.workspace, 'Acme, "Billing" Ltd');
    }
    const total = records.filter((r) => r.section === "total");
    assert.deepEqual(
      total.map((r) => [r.requests, r.compute_units, r.refused_requests]),
      [["15", String(api.computeUnits), "0"]],
    );
    assert.deepEqual(
      records
        .filter((r) => r.section === "usage")
        .map((r) => [r.app_id, r.app, r.network, r.method, r.requests, r.compute_units])
        .sort(),
      [
        [alpha.id, "alpha", "evm-stub", "eth_chainId", "7", cu.get("eth_chainId")],
        [beta.id, "beta", "evm-stub", "eth_blockNumber", "3", cu.get("eth_blockNumber")],
        [beta.id, "beta", "evm-stub", "eth_getBalance", "5", cu.get("eth_getBalance")],
      ].sort(),
    );
    const today = new Date().toISOString().slice(0, 10);
    assert.deepEqual(
      records.filter((r) => r.section === "day" && r.date === today).map((r) => [r.requests, r.over_limit]),
      [["15", "false"]],
    );
    assert.deepEqual(
      records.filter((r) => r.section === "plan").map((r) => [r.plan, r.daily_request_limit]),
      [["free", "500000"]],
    );
    // The file is the statement the API answers, byte for byte but the current plan's end (now, when asked).
    const stable = (csv: string) =>
      csv
        .split("\r\n")
        .map((l) =>
          l.startsWith("plan,")
            ? cells(l)
                .map((c, i) => (i === 6 ? "<now>" : c))
                .join("|")
            : l,
        )
        .join("\r\n");
    assert.equal(stable(text), stable(api.csv));
    assert.notEqual(stable(text), text, "only the plan row's end was masked");
  });

  it("another month: an empty statement; a VIEWER is told statements are for owners and admins", async () => {
    const d = new Date();
    const prev = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, 1)).toISOString().slice(0, 7);
    await page.locator('input[name="month"]').fill(prev);
    await page.getByText("No usage this month.").waitFor();
    assert.equal((await page.getByTestId("statement-requests").textContent())?.trim(), "0");

    const [acc] = await h.cp.dataSource.query(
      "INSERT INTO accounts (email, password_hash) VALUES ($1, 'unused') RETURNING id",
      [`viewer-${Date.now()}@example.com`],
    );
    await h.cp.dataSource.query(
      "INSERT INTO memberships (account_id, workspace_id, role) VALUES ($1, $2, 'VIEWER')",
      [acc.id, owner.workspaceId],
    );
    const viewerToken = await h.cp.services.auth.issueSessionToken(acc.id);
    const viewer = await launchConsoleBrowser({
      profilePrefix: "rg-console-billing-viewer-",
      timeoutMs: 15_000,
    });
    try {
      await logIn(viewer.page, stack!.consoleUrl, viewerToken);
      await openPage(viewer.page, stack!.consoleUrl, "/billing");
      await viewer.page
        .getByText("Only the workspace's owner and admins see its usage statements.")
        .waitFor();
      assert.equal(await viewer.page.getByRole("button", { name: "Download CSV" }).count(), 0);
    } finally {
      await viewer.close();
    }
  });
});
