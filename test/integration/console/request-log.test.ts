import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import type { Page } from "playwright-core";
import { type ControlPlaneWorker, startWorker } from "../../../control-plane/src/worker/worker";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";
import { type DataPlane, startDataPlane } from "../../../data-plane/src/data-plane";
import { ADMIN_TOKEN, createApp, type Harness, startHarness } from "../control-plane/harness";
import { post, sleep } from "../data-plane/harness";
import { StubUpstream } from "../data-plane/stub-upstream";
import { CHROMIUM, type ConsoleBrowser, launchConsoleBrowser } from "./browser";

const ARTIFACTS = path.resolve(__dirname, "../../../../test/artifacts/console");

describe("console: request log (Chromium -> /console -> GraphQL requestLog; gateway -> worker)", function () {
  this.timeout(120_000);
  let h: Harness;
  let stub: StubUpstream;
  let worker: ControlPlaneWorker | undefined;
  let dp: DataPlane | undefined;
  let browser: ConsoleBrowser | undefined;
  let page: Page;
  let consoleUrl: string;
  let token: string;
  let rpc: string;
  const errorIds: string[] = [];

  /** Waits until the GraphQL API lists `requestId` (the page is then tested against known data). */
  const ingested = async (requestId: string) => {
    const t0 = Date.now();
    while (Date.now() - t0 < 30_000) {
      const d = await h.ok(
        `query($f: RequestLogFilter!) { requestLog(filter: $f) { edges { node { requestId } } } }`,
        { f: { requestId } },
        token,
      );
      if (d.requestLog.edges.length > 0) return;
      await sleep(50);
    }
    throw new Error(`${requestId} never reached the request log`);
  };

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      if (process.env.CI) assert.fail(`${CHROMIUM} is missing`);
      console.warn(`console e2e skipped: ${CHROMIUM} is missing (apt-get install chromium)`);
      this.skip();
    }
    mkdirSync(ARTIFACTS, { recursive: true });
    h = await startHarness();
    stub = await new StubUpstream().start();
    await h.ok(
      `mutation($s: String!) {
        n: createNetwork(input: { slug: "evm-stub", name: "Stub", protocol: EVM, chainId: 31337 }) { id }
        u: addUpstream(networkSlug: "evm-stub", input: { httpUrl: $s }) { id } }`,
      { s: stub.url },
      ADMIN_TOKEN,
    );
    ({ token } = await h.signUp());
    const app = await createApp(h, token, "console-app");
    worker = await startWorker(h.config, undefined, {
      usage: { blockMs: 100, consumerName: "console-reqlog" },
    });
    dp = await startDataPlane(
      loadDataPlaneConfig({
        REDIS_KEY_PREFIX: h.ns.prefix,
        DATA_PLANE_PORT: "0",
        DATA_PLANE_HOST: "127.0.0.1",
        LOG_LEVEL: process.env.LOG_LEVEL ?? "silent",
        HEALTH_CHECK_INTERVAL_MS: "200",
        REQUEST_LOG_FLUSH_INTERVAL_MS: "100",
        REQUEST_LOG_SAMPLE_PERCENT: "100",
        RATE_LIMIT_MODE: "local",
        QUOTA_MODE: "off",
        SHARED_NODE_EXTRA_NAMESPACES: "stub",
        ...h.ns.redis.env(),
      }),
    );
    rpc = `http://127.0.0.1:${dp.port}/evm-stub/rpc?apikey=${app.apiKey}`;
    // Three successes, then three node errors: the page lists six, newest first.
    for (let i = 0; i < 3; i++) await post(rpc, { jsonrpc: "2.0", id: i, method: "eth_chainId" });
    for (let i = 0; i < 3; i++) {
      const r = await post(rpc, { jsonrpc: "2.0", id: i, method: "stub_error" });
      errorIds.push(r.headers.get("x-request-id")!);
    }
    await ingested(errorIds[2]!);

    consoleUrl = `http://127.0.0.1:${h.cp.port}/console`;
    browser = await launchConsoleBrowser({ profilePrefix: "rg-console-chromium-", timeoutMs: 15_000 });
    page = browser.page;
    await page.goto(`${consoleUrl}/login`);
    await page.evaluate((t) => localStorage.setItem("rpc-gateway.token", t), token);
  });

  after(async () => {
    await browser?.close();
    await dp?.close();
    await worker?.close();
    await stub?.stop();
    await h?.close();
  });

  const rows = () => page.locator("table.request-log tbody tr");

  it("lists the workspace's log newest first and filters it by category", async () => {
    await page.goto(`${consoleUrl}/`);
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
    await page.screenshot({ path: path.join(ARTIFACTS, "request-log.png"), fullPage: true });
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
