import assert from "node:assert/strict";
import type { Page } from "playwright-core";
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

describe("console: request log (Chromium -> /console -> GraphQL requestLog; gateway -> worker)", function () {
  this.timeout(120_000);
  let stack: ConsoleStack | undefined;
  let h: Harness;
  let stub: StubUpstream | undefined;
  let browser: ConsoleBrowser | undefined;
  let page: Page;
  let consoleUrl: string;
  let token: string;
  let rpc: string;
  const errorIds: string[] = [];

  /** Waits until the GraphQL API lists `requestId` (the page is then tested against known data). */
  const ingested = async (requestId: string) => {
    await eventually(
      async () =>
        (
          await h.ok(
            `query($f: RequestLogFilter!) { requestLog(filter: $f) { edges { node { requestId } } } }`,
            { f: { requestId } },
            token,
          )
        ).requestLog.edges.length > 0,
      `${requestId} in the request log`,
      30_000,
    );
  };

  before(async function () {
    requireChromium(this);
    stub = await new StubUpstream().start();
    stack = await startConsoleStack({ network: { slug: "evm-stub", name: "Stub", httpUrl: stub.url } });
    h = stack.h;
    ({ token } = await h.signUp());
    const app = await createApp(h, token, "console-app");
    await stack.startWorker({ usage: { blockMs: 100, consumerName: "console-reqlog" } });
    const dp = await stack.startDataPlane({
      REQUEST_LOG_FLUSH_INTERVAL_MS: "100",
      REQUEST_LOG_SAMPLE_PERCENT: "100",
      RATE_LIMIT_MODE: "local",
      QUOTA_MODE: "off",
      SHARED_NODE_EXTRA_NAMESPACES: "stub",
    });
    rpc = `http://127.0.0.1:${dp.port}/evm-stub/rpc?apikey=${app.apiKey}`;
    // Three successes, then three node errors: the page lists six, newest first.
    for (let i = 0; i < 3; i++) await post(rpc, { jsonrpc: "2.0", id: i, method: "eth_chainId" });
    for (let i = 0; i < 3; i++) {
      const r = await post(rpc, { jsonrpc: "2.0", id: i, method: "stub_error" });
      errorIds.push(r.headers.get("x-request-id")!);
    }
    await ingested(errorIds[2]!);

    consoleUrl = stack.consoleUrl;
    browser = await launchConsoleBrowser({ profilePrefix: "rg-console-chromium-", timeoutMs: 15_000 });
    page = browser.page;
    await logIn(page, consoleUrl, token);
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
    await stub?.stop();
  });

  const rows = () => page.locator("table.request-log tbody tr");

  it("lists the workspace's log newest first and filters it by category", async () => {
    await openPage(page, consoleUrl, "/");
    await page.getByRole("link", { name: "Request log" }).click();
    await page.getByRole("heading", { name: "Request log" }).waitFor();
    await rows().first().waitFor();
    assert.equal(await rows().count(), 6);
    assert.equal(await rows().first().getAttribute("data-request-id"), errorIds[2]);
    const first = (await rows().first().textContent())!;
    assert.match(first, /stub_error/);
    assert.match(first, /Node Error/);
    assert.match(first, /console-app/);
    assert.match(first, /127\.0\.0\.0\/24/);
    await page.getByLabel("Category").selectOption("Success");
    await page.waitForFunction(() => document.querySelectorAll("table.request-log tbody tr").length === 3);
    for (const t of await rows().allTextContents()) assert.match(t, /eth_chainId/);
    await screenshot(page, "request-log");
  });

  it("finds one request by the requestId pasted from an error", async () => {
    await page.getByLabel("Request ID").fill(errorIds[0]!);
    await page.getByRole("button", { name: "Find" }).click();
    await page.waitForFunction(() => document.querySelectorAll("table.request-log tbody tr").length === 1);
    assert.equal(await rows().first().getAttribute("data-request-id"), errorIds[0]);
    await page.getByLabel("Request ID").fill("no-such-request");
    await page.getByRole("button", { name: "Find" }).click();
    await page.getByTestId("request-log-empty").waitFor();
    await page.getByRole("button", { name: "Show all" }).click();
    await rows().first().waitFor();
    assert.ok((await rows().count()) >= 3);
  });
});
