import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Page } from "playwright-core";
import type { Harness } from "../control-plane/harness";
import { WebhookReceiver } from "../control-plane/webhooks/receiver";
import { type ConsoleBrowser, launchConsoleBrowser } from "./browser";
import {
  type ConsoleStack,
  logIn,
  openPage,
  requireChromium,
  screenshot,
  sessionToken,
  startConsoleStack,
} from "./console-fixture";

describe("console: webhooks (Chromium -> /console -> GraphQL; worker -> local receiver)", function () {
  this.timeout(90_000);
  let stack: ConsoleStack | undefined;
  let h: Harness;
  let browser: ConsoleBrowser | undefined;
  let page: Page;
  let dataDir: string;
  let consoleUrl: string;
  let secret: string;
  const rx = new WebhookReceiver();

  before(async function () {
    requireChromium(this);
    await rx.start();
    stack = await startConsoleStack({
      env: { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true", WEBHOOK_RETRY_BASE_MS: "300" },
    });
    h = stack.h;
    dataDir = mkdtempSync(path.join(tmpdir(), "rg-console-webhooks-"));
    await stack.startWorker({ usage: { enabled: false }, nodes: { dataDir } });
    const { token } = await h.signUp();
    consoleUrl = stack.consoleUrl;
    browser = await launchConsoleBrowser({
      profilePrefix: "rg-console-chromium-",
      timeoutMs: 15_000,
      clipboardOrigin: stack.origin,
    });
    page = browser.page;
    // Signed in as the console does it: the session token in sessionStorage.
    await logIn(page, consoleUrl, token);
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
    await rx.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  const shot = (name: string) => screenshot(page, name);

  it("adds an endpoint (inline URL error first) and shows its signing secret once", async () => {
    await openPage(page, consoleUrl, "/");
    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByRole("heading", { name: "Webhooks" }).waitFor();
    await page.getByText("No endpoints yet").waitFor();
    await page.getByRole("button", { name: "Add endpoint" }).click();
    const form = page.getByRole("form", { name: "Add webhook endpoint" });
    await form.getByLabel("URL").fill("ftp://example.com/hook");
    await form.getByRole("button", { name: "Add" }).click();
    await page.locator('.field-error[data-field="url"]').waitFor();
    await form.getByLabel("URL").fill(rx.url("/console"));
    await form.getByLabel("Description (optional)").fill("alerts");
    await form.locator('input[value="VALIDATOR_STATUS"]').uncheck();
    await form.getByRole("button", { name: "Add" }).click();
    const shown = page.getByTestId("webhook-secret");
    await shown.waitFor();
    secret = (await shown.textContent())!;
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    rx.setSecret("/console", secret);
    await page.getByRole("button", { name: /^Copy secret/ }).click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
    await shot("webhooks-secret");
    const row = page.locator("table.webhooks tbody tr");
    assert.equal(await row.count(), 1);
    assert.match((await row.textContent())!, /quota\.threshold, node\.status, key\.regenerated/);
    assert.doesNotMatch((await row.textContent())!, /validator\.status/);
    await page.getByRole("button", { name: "I have stored it" }).click();
    await shown.waitFor({ state: "detached" });
    // Gone for good: neither the list nor the endpoint page shows it again.
    await page.reload();
    await page.getByRole("link", { name: "alerts" }).click();
    await page.getByTestId("webhook-url").waitFor();
    assert.equal(await page.getByTestId("webhook-url").textContent(), rx.url("/console"));
    assert.ok(!(await page.content()).includes(secret), "the secret is not on the endpoint page");
  });

  it("sends a test event: the receiver checks the signature; the attempts (500, then 200) show up", async () => {
    rx.script("/console", [500]);
    await page.getByRole("button", { name: "Send test event" }).click();
    const delivered = page.locator('[data-testid="webhook-delivery"][data-status="SUCCEEDED"]');
    await delivered.waitFor({ timeout: 30_000 });
    const got = rx.on("/console");
    assert.equal(got.length, 2);
    assert.ok(
      got.every((r) => r.verified),
      "signed with the secret the page showed",
    );
    assert.equal(got[0]!.json.type, "webhook.test");
    assert.match((await delivered.textContent())!, /webhook\.test.*SUCCEEDED.*HTTP 200 · 2 attempt\(s\)/);
    await delivered.getByRole("button", { name: "Attempts" }).click();
    const attempts = page.getByTestId("webhook-attempt");
    await attempts.nth(1).waitFor();
    assert.equal(await attempts.count(), 2);
    assert.match((await attempts.nth(0).textContent())!, /#1 .*HTTP 500/);
    assert.match((await attempts.nth(1).textContent())!, /#2 .*HTTP 200/);
    assert.ok((await page.content()).includes(got[0]!.id), "the webhook-id is shown");
    await shot("webhook-deliveries");
  });

  it("rotates the secret after confirmation; the next test event is signed with the new one", async () => {
    await page.getByRole("button", { name: "Rotate secret" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Rotate" }).click();
    const shown = page.getByTestId("webhook-secret");
    await shown.waitFor();
    const fresh = (await shown.textContent())!;
    assert.notEqual(fresh, secret);
    rx.setSecret("/console", fresh);
    await page.getByRole("button", { name: "Send test event" }).click();
    await page
      .locator('[data-testid="webhook-delivery"][data-status="SUCCEEDED"]')
      .nth(1)
      .waitFor({ timeout: 30_000 });
    const got = rx.on("/console");
    assert.equal(got.length, 3);
    assert.ok(got[2]!.verified, "signed with the rotated secret");
  });

  it("disables, then deletes the endpoint", async () => {
    // A controlled checkbox: it flips once the server has answered and the page re-read the endpoint.
    await page.getByLabel(/^Enabled/).click();
    await page.locator(".badge", { hasText: "disabled" }).waitFor();
    assert.equal(await page.getByLabel(/^Enabled/).isChecked(), false);
    await page.getByRole("button", { name: "Delete" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
    await page.getByText("No endpoints yet").waitFor();
    const left = await h.ok<{ webhookEndpoints: unknown[] }>(
      "{ webhookEndpoints { id } }",
      {},
      (await sessionToken(page))!,
    );
    assert.deepEqual(left.webhookEndpoints, []);
  });
});
