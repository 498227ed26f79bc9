import assert from "node:assert/strict";
import path from "node:path";
import type { Page } from "playwright-core";
import type { DataPlane } from "../../../data-plane/src/data-plane";
import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { ADMIN_TOKEN, type Harness } from "../control-plane/harness";
import { ingestorFor, recorderFor } from "../control-plane/usage/helpers";
import { type ConsoleBrowser, launchConsoleBrowser } from "./browser";
import {
  type ConsoleStack,
  openPage,
  persistedToken,
  requireChromium,
  screenshot,
  sessionToken,
  startConsoleStack,
  watchPolicy,
} from "./console-fixture";

const NETWORK = "local-evm";
const EMAIL = `console-${Date.now()}@example.com`;
const PASSWORD = "correct horse battery staple";

async function rpc(url: string, headers: Record<string, string> = {}, method = "eth_chainId") {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
  });
  return { status: res.status, body: (await res.json()) as { result?: string; error?: { code: number } } };
}

describe("console (end to end: Chromium -> /console -> GraphQL; data plane -> anvil)", function () {
  this.timeout(60_000);
  let anvil: Anvil;
  let stack: ConsoleStack | undefined;
  let h: Harness;
  let dp: DataPlane;
  let browser: ConsoleBrowser | undefined;
  let page: Page;
  let consoleUrl: string;
  let endpoint: string;
  let appId: string;

  before(async function () {
    requireChromium(this);
    anvil = await startAnvil();
    stack = await startConsoleStack({
      env: { PLAN_CONTACT: "sales@example.test" },
      network: { slug: NETWORK, name: "Local EVM", httpUrl: anvil.httpUrl, wsUrl: anvil.wsUrl },
    });
    h = stack.h;
    await h.ok(
      `mutation {
        s: upsertPlan(input: { name: "starter", dailyRequestLimit: 1000, requestsPerSecond: 50 }) { id }
        p: upsertPlan(input: { name: "pro", dailyRequestLimit: 5000000, requestsPerSecond: 500, maxDedicatedNodes: 5, selfService: true }) { id }
        d: upsertPlan(input: { name: "acme-deal", dailyRequestLimit: 900000000, requestsPerSecond: 9000 }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    dp = await stack.startDataPlane();
    consoleUrl = stack.consoleUrl;
    browser = await launchConsoleBrowser({
      profilePrefix: "rg-console-chromium-",
      timeoutMs: 10_000,
      clipboardOrigin: stack.origin,
    });
    page = browser.page;
    policy = await watchPolicy(page);
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
    await anvil?.stop();
  });

  let policy: Awaited<ReturnType<typeof watchPolicy>>;

  const shot = (name: string) => screenshot(page, name);
  const token = () => sessionToken(page);

  it("signs up and lands on the (empty) apps page, token in this tab's sessionStorage only", async () => {
    // The page comes with its Content-Security-Policy (static.test.ts checks every directive).
    const first = await page.goto(`${consoleUrl}/`);
    assert.match(first?.headers()["content-security-policy"] ?? "", /script-src 'self'/);
    assert.equal(first?.headers()["x-frame-options"], "DENY");
    await page.getByRole("heading", { name: "Log in" }).waitFor();
    await page.getByRole("link", { name: "Create an account" }).click();
    await page.getByLabel("Email").fill("not-an-email");
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign up" }).click();
    // Inline error from the GraphQL error's extensions.field.
    await page.locator('.field-error[data-field="email"]').waitFor();
    await page.getByLabel("Email").fill(EMAIL);
    await page.getByLabel("Workspace name").fill("Acme");
    await page.getByRole("button", { name: "Sign up" }).click();
    await page.getByRole("heading", { name: "Apps" }).waitFor();
    await page.getByText("No apps yet").waitFor();
    assert.ok(await token());
    // Never on disk for later sessions, nor shared with another tab of this browser.
    assert.equal(await persistedToken(page), null);
    const other = await browser!.ctx.newPage();
    try {
      await other.goto(`${consoleUrl}/`);
      await other.getByRole("heading", { name: "Log in" }).waitFor();
      assert.equal(await sessionToken(other), null);
    } finally {
      await other.close();
    }
  });

  it("creates an app; its endpoint, read from the page, answers through the data plane", async () => {
    await page.getByRole("button", { name: "Create app" }).click();
    await page.getByLabel("Name").fill("web");
    await page.getByLabel("Environment").selectOption("PRODUCTION");
    await page.getByRole("button", { name: "Create", exact: true }).click();
    await page.getByRole("heading", { name: "web" }).waitFor();
    appId = page.url().split("/apps/")[1]!;
    endpoint = (await page.getByTestId("https-url").textContent())!;
    assert.match(endpoint, new RegExp(`^http://127\\.0\\.0\\.1:\\d+/${NETWORK}/rpc\\?apikey=\\S+$`));
    const key = new URL(endpoint).searchParams.get("apikey")!;
    assert.match((await page.getByTestId("wss-url").textContent())!, /^ws:\/\//);
    // The key is masked until revealed.
    assert.notEqual(await page.getByTestId("api-key").textContent(), key);
    await page.getByRole("button", { name: "Reveal" }).click();
    assert.equal(await page.getByTestId("api-key").textContent(), key);
    // Copy button puts the URL on the clipboard.
    await page.locator(".endpoint button", { hasText: "Copy" }).first().click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), endpoint);
    await shot("app");

    const r = await rpc(endpoint);
    assert.equal(r.status, 200);
    assert.equal(r.body.result, "0x7a69");
  });

  it("regenerates the key after confirmation: the old URL is refused, the new one works", async () => {
    await page.getByRole("button", { name: "Regenerate key" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByLabel("Keep the old key working for").selectOption("0");
    await dialog.getByRole("button", { name: "Regenerate" }).click();
    await dialog.waitFor({ state: "detached" });
    await page.waitForFunction(
      (old) => document.querySelector('[data-testid="https-url"]')?.textContent !== old,
      endpoint,
    );
    const fresh = (await page.getByTestId("https-url").textContent())!;
    await eventually(async () => (await rpc(endpoint)).status === 401, "old key refused");
    await eventually(async () => (await rpc(fresh)).status === 200, "new key served");
    endpoint = fresh;
  });

  it("edits the allowlist (inline validation error, then an origin) and a refused origin gets 403", async () => {
    const form = page.getByRole("form", { name: "Add allowlist entry" });
    await form.locator('select[name="kind"]').selectOption("ORIGIN");
    await form.locator('input[name="value"]').fill("not a url");
    await form.getByRole("button", { name: "Add" }).click();
    await page.locator('.field-error[data-field="value"]').waitFor();
    await form.locator('input[name="value"]').fill("https://allowed.example");
    await form.getByRole("button", { name: "Add" }).click();
    await page.locator("ul.allowlist", { hasText: "https://allowed.example" }).waitFor();
    assert.equal(await page.locator('.field-error[data-field="value"]').count(), 0);
    await eventually(async () => {
      const r = await rpc(endpoint, { origin: "https://evil.example" });
      return r.status === 403 && r.body.error?.code === -32016;
    }, "other origin refused");
    assert.equal((await rpc(endpoint, { origin: "https://allowed.example" })).status, 200);
    await shot("app-allowlist");
  });

  it("shows usage: today's requests, 24 h chart, response time, sortable methods table, daily history", async () => {
    const t = (await token())!;
    const ws = await h.ok<{ workspace: { id: string } }>("{ workspace { id } }", {}, t);
    const other = await h.ok<{ createApp: { id: string } }>(
      `mutation { createApp(input: { name: "indexer", environment: DEVELOPMENT }) { id } }`,
      {},
      t,
    );
    // Real traffic went through the data plane above; flush its usage recorder (wired by the data plane).
    for (let i = 0; i < 3; i++)
      assert.equal(
        (await rpc(endpoint, { origin: "https://allowed.example" }, "eth_blockNumber")).status,
        200,
      );
    // The data plane's own usage recording (when wired: `DataPlane.usage`). A flush already under way when
    // these were recorded is joined, not repeated: flush twice.
    const dpUsage = (dp as unknown as { usage?: { flush(): Promise<void> } }).usage;
    await dpUsage?.flush();
    await dpUsage?.flush();
    // Plus seeded history through the same pipeline (recorder -> Redis stream -> ingestion -> Postgres).
    const rec = recorderFor(h);
    const now = Date.now();
    const HOUR = 3_600_000;
    const seeds: [string, string, number][] = [
      [ErrorCategory.Success, "eth_call", 40],
      [ErrorCategory.Success, "eth_getLogs", 12],
      [ErrorCategory.Success, "eth_getBalance", 25],
      [ErrorCategory.NodeError, "eth_getLogs", 3],
      [ErrorCategory.ClientError, "eth_call", 2],
      [ErrorCategory.TooManyRequests, "eth_getBalance", 1],
      [ErrorCategory.ServiceError, "eth_call", 1],
      [ErrorCategory.UnknownError, "eth_getLogs", 1],
    ];
    for (let hr = 23; hr >= 1; hr--) {
      rec.clock.now = now - hr * HOUR;
      for (const [category, method, n] of seeds) {
        const units = Math.max(1, Math.round(n * (1 + Math.sin(hr / 3))));
        const latencyMs = method === "eth_getLogs" ? 180 + hr : method === "eth_call" ? 25 + hr : 8;
        for (const [appIdx, id] of [appId, other.createApp.id].entries())
          rec.rec.record({
            workspaceId: ws.workspace.id,
            appId: id,
            network: NETWORK,
            method,
            category: category as ErrorCategory,
            latencyMs,
            units: appIdx === 0 ? units : Math.ceil(units / 2),
          });
      }
      await rec.rec.flush();
    }
    for (let d = 12; d >= 1; d--) {
      rec.clock.now = now - d * 24 * HOUR;
      for (const [i, id] of [appId, other.createApp.id].entries())
        rec.rec.record({
          workspaceId: ws.workspace.id,
          appId: id,
          network: NETWORK,
          method: "eth_call",
          category: ErrorCategory.Success,
          latencyMs: 30,
          units: (d % 4 === 0 ? 700 : 250) + i * 120 + d * 10,
        });
      await rec.rec.flush();
    }
    await rec.close();
    const ing = ingestorFor(h);
    assert.ok((await ing.drain()) > 0);
    ing.close();
    // A small plan so that the busy days above show as "limit reached".
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "starter") { id } }`,
      { w: ws.workspace.id },
      ADMIN_TOKEN,
    );

    await page.getByRole("link", { name: "Usage" }).click();
    const methods = page.locator("table.methods");
    await methods.waitFor();
    const names = () => methods.locator("tbody tr td:first-child").allTextContents();
    const col = async (i: number) =>
      (await methods.locator(`tbody tr td:nth-child(${i})`).allTextContents()).map((s) =>
        Number(s.replace(/[^\d.]/g, "")),
      );
    const seen = await names();
    const expected = ["eth_call", "eth_getLogs", "eth_getBalance"];
    // The real calls made above, recorded by the data plane itself.
    if (dpUsage) expected.push("eth_blockNumber", "eth_chainId");
    for (const m of expected) assert.ok(seen.includes(m), `${m} in ${seen.join(",")}`);
    // Default: requests, descending.
    const byReq = await col(2);
    assert.deepEqual(
      byReq,
      [...byReq].sort((a, b) => b - a),
    );
    await methods.getByRole("button", { name: "Method" }).click();
    const alpha = await names();
    assert.deepEqual(
      alpha,
      [...alpha].sort((a, b) => a.localeCompare(b)),
    );
    await methods.getByRole("button", { name: "Method" }).click();
    assert.deepEqual(await names(), [...alpha].reverse());
    for (const [label, i] of [
      ["Errors", 4],
      ["p95", 6],
      ["Requests", 2],
    ] as const) {
      await methods.getByRole("button", { name: label }).click();
      const v = await col(i);
      assert.deepEqual(
        v,
        [...v].sort((a, b) => b - a),
        `${label} descending`,
      );
      assert.equal(await methods.locator(`th[aria-sort="descending"]`).textContent(), `${label} ▼`);
      await methods.getByRole("button", { name: label }).click();
      const w = await col(i);
      assert.deepEqual(
        w,
        [...w].sort((a, b) => a - b),
        `${label} ascending`,
      );
    }
    assert.ok(Number((await page.getByTestId("requests-total").textContent())!.replace(/\D/g, "")) > 100);
    // The 24 h chart stacks Success and the five error categories; each series sums to its category tile.
    const stacked = JSON.parse((await page.getByTestId("requests-chart").getAttribute("data-datasets"))!) as {
      label: string;
      total: number;
    }[];
    const labels = [
      "Success",
      "Client Error",
      "Too Many Requests",
      "Node Error",
      "Service Error",
      "Unknown Error",
    ];
    assert.deepEqual(
      stacked.map((d) => d.label),
      labels,
    );
    const card = page.locator('[data-card="Requests, last 24 hours"]');
    for (const d of stacked) {
      const tile = (await card.locator(".tile", { hasText: d.label }).locator(".big").textContent())!;
      assert.ok(d.total > 0, d.label);
      assert.equal(d.total, Number(tile.replace(/\D/g, "")), d.label);
    }
    await page.getByTestId("limit-days").waitFor();
    assert.match((await page.getByTestId("today-count").textContent())!, /of 1,000 requests/);
    // Response time for one method.
    const p95All = await page.getByTestId("p95").textContent();
    await page.locator('select[name="method"]').selectOption("eth_getLogs");
    await page.waitForFunction(
      (v) => document.querySelector('[data-testid="p95"]')?.textContent !== v,
      p95All,
    );
    assert.match((await page.getByTestId("p95").textContent())!, /^\d+ ms$/);
    await page.locator('select[name="method"]').selectOption("");
    await page.waitForFunction(
      (v) => document.querySelector('[data-testid="p95"]')?.textContent === v,
      p95All,
    );
    await methods.getByRole("button", { name: "Requests" }).click();
    await page.evaluate(() => window.scrollTo(0, 0));
    await shot("usage");
    // CONSOLE_DOCS_SCREENSHOT=1 refreshes the picture in docs/console.md (docs/console-dashboard.png).
    if (process.env.CONSOLE_DOCS_SCREENSHOT)
      await page.screenshot({
        path: path.resolve(__dirname, "../../../../docs/console-dashboard.png"),
        fullPage: true,
      });

    // The apps list shows today's requests per app.
    await page.getByRole("link", { name: "Apps" }).click();
    const row = page.locator("table.apps tr", { hasText: "web" });
    await row.waitFor();
    assert.ok(Number((await row.locator("td.num").textContent())!.replace(/\D/g, "")) > 0);
    await shot("apps");
  });

  it("upgrades the plan among self-service ones, shows the node deploy form, and works at phone width", async () => {
    await page.getByRole("link", { name: "Plan" }).click();
    await page.getByTestId("current-plan").filter({ hasText: "starter" }).waitFor();
    const cards = () =>
      page.locator(".plans [data-plan]").evaluateAll((els) => els.map((e) => e.getAttribute("data-plan")));
    // The self-service plans and the current (operator-assigned) one; never enterprise or a private plan.
    assert.deepEqual((await cards()).sort(), ["free", "growth", "pro", "starter"]);
    await page.locator('[data-plan="starter"]', { hasText: "Assigned by your operator" }).waitFor();
    const contact = page.getByTestId("plan-contact");
    assert.match(
      (await contact.textContent())!,
      /arranged by the platform operator: contact sales@example\.test\./,
    );
    assert.equal(await contact.getByRole("link").getAttribute("href"), "mailto:sales@example.test");
    await page.getByRole("button", { name: "Upgrade to pro" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Change plan" }).click();
    await page.getByTestId("current-plan").filter({ hasText: "pro" }).waitFor();
    // starter was the operator's to give: once left, it is no longer offered.
    await page.locator('[data-plan="starter"]').waitFor({ state: "detached" });
    assert.deepEqual((await cards()).sort(), ["free", "growth", "pro"]);
    assert.equal(await page.getByRole("button", { name: /enterprise|acme-deal|starter/ }).count(), 0);
    await shot("plan");

    await page.getByRole("link", { name: "Dedicated nodes" }).click();
    await page.getByText("No dedicated nodes yet").waitFor();
    await page.getByRole("link", { name: "Deploy node" }).click();
    const form = page.getByRole("form", { name: "Deploy node" });
    await form.waitFor();
    assert.ok((await form.locator('select[name="network"] option').count()) >= 1);
    assert.ok((await form.locator('select[name="region"] option').count()) >= 1);
    assert.match(
      (await form.locator('select[name="imageVersion"] option').first().textContent())!,
      /^Latest/,
    );
    // Deploy (no worker runs here, so the node stays PENDING): its page, then the list with its status.
    await form.getByLabel("Name").fill("archive-1");
    await form.getByLabel("Node type").selectOption("ARCHIVE");
    await form.getByLabel("Extra arguments, one per line").fill("--block-time=2");
    await form.getByRole("button", { name: "Deploy" }).click();
    await page.getByRole("heading", { name: "archive-1" }).waitFor();
    assert.equal(await page.getByTestId("node-status").textContent(), "PENDING");
    await page.getByText("--block-time=2").waitFor();
    await page.getByRole("heading", { name: "Validator checklist" }).waitFor({ state: "detached" });
    await page.getByRole("heading", { name: "Logs" }).waitFor();
    await shot("node");
    await page.getByRole("link", { name: "Dedicated nodes" }).first().click();
    await page.locator("table tr", { hasText: "archive-1" }).getByTestId("node-status").waitFor();

    await page.setViewportSize({ width: 390, height: 844 });
    await openPage(page, consoleUrl, "/usage");
    await page.locator("table.methods").waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `page wider than the phone by ${overflow}px`);
    await page.getByRole("button", { name: "Menu" }).click();
    await page.getByRole("link", { name: "Plan" }).click();
    await page.getByTestId("current-plan").waitFor();
    await shot("plan-phone");
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it("logs out (the session token stops working on the server) and back in", async () => {
    const session = await token();
    assert.ok(session);
    const me = async () => {
      const res = await fetch(`${consoleUrl.replace(/\/console$/, "")}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${session}` },
        body: JSON.stringify({ query: "{ me { email } }" }),
      });
      return (await res.json()) as {
        data?: { me?: { email: string } };
        errors?: { extensions?: { code?: string } }[];
      };
    };
    assert.equal((await me()).data?.me?.email, EMAIL);
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByRole("heading", { name: "Log in" }).waitFor();
    assert.equal(await token(), null);
    assert.equal((await me()).errors?.[0]?.extensions?.code, "UNAUTHENTICATED");
    await page.getByLabel("Email").fill(EMAIL);
    await page.getByLabel("Password").fill("wrong password!!");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.locator(".error").waitFor();
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.locator("table.apps", { hasText: "indexer" }).waitFor();
  });

  // Teams: the owner (EMAIL) invites; Ana joins while signing up, Victor with his existing account.
  const ANA = `ana-${Date.now()}@example.com`;
  const VICTOR = `victor-${Date.now()}@example.com`;
  const links: Record<string, string> = {};

  it("Members: the owner invites with a role, sees the link to copy and the pending list, and revokes one", async () => {
    await page.getByRole("link", { name: "Members" }).click();
    const row = (email: string) => page.locator(`table.members tr[data-email="${email}"]`);
    await row(EMAIL).waitFor();
    assert.match((await row(EMAIL).textContent())!, /\(you\).*OWNER/);
    const form = page.getByRole("form", { name: "Invite member" });
    assert.deepEqual(await form.getByLabel("Role").locator("option").allTextContents(), [
      "ADMIN",
      "MEMBER",
      "VIEWER",
    ]);
    const invite = async (email: string, role: string) => {
      await form.getByLabel("Email").fill(email);
      await form.getByLabel("Role").selectOption(role);
      await form.getByRole("button", { name: "Invite", exact: true }).click();
      await page.getByTestId("invite-link").filter({ hasText: email }).waitFor();
      return (await page.getByTestId("invite-url").textContent())!;
    };
    links.ana = await invite(ANA, "ADMIN");
    assert.match(links.ana, new RegExp(`^${consoleUrl.replace(/\./g, "\\.")}/invite#rgi_[A-Za-z0-9_-]{43}$`));
    await page.getByRole("button", { name: "Copy link" }).click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), links.ana);
    links.victor = await invite(VICTOR, "VIEWER");
    links.revoked = await invite(`rev-${Date.now()}@example.com`, "MEMBER");
    const pending = page.locator('[data-card="Pending invitations"] li');
    await page.waitForFunction(
      () => document.querySelectorAll('[data-card="Pending invitations"] li').length === 3,
    );
    const revokedRow = pending.filter({ hasText: "rev-" });
    assert.match((await revokedRow.textContent())!, /MEMBER.*expires/);
    await shot("members-invite");
    await revokedRow.getByRole("button", { name: "Revoke" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Revoke" }).click();
    await revokedRow.waitFor({ state: "detached" });
    assert.equal(await pending.count(), 2);
  });

  it("an invitation link: sign up with it and land in the team's workspace as its role", async () => {
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByRole("heading", { name: "Log in" }).waitFor();
    await page.goto(links.ana!);
    await page.getByRole("heading", { name: "Join Acme" }).waitFor();
    assert.match(
      (await page.getByTestId("invitation").textContent())!,
      new RegExp(`invited as ADMIN for ${ANA}`),
    );
    const form = page.getByRole("form", { name: "Create your account to join" });
    assert.equal(await form.getByLabel("Email").inputValue(), ANA);
    assert.equal(await form.getByLabel("Workspace name").count(), 0, "no workspace of her own");
    await form.getByLabel("Password").fill(PASSWORD);
    await shot("invite-signup");
    await form.getByRole("button", { name: "Sign up" }).click();
    await page.locator("table.apps", { hasText: "indexer" }).waitFor();
    const switcher = page.getByLabel("Workspace");
    assert.deepEqual(await switcher.locator("option").allTextContents(), ["Acme (admin)"]);
    // An ADMIN invites only below ADMIN, and manages keys.
    await page.getByRole("link", { name: "Members" }).click();
    const form2 = page.getByRole("form", { name: "Invite member" });
    assert.deepEqual(await form2.getByLabel("Role").locator("option").allTextContents(), [
      "MEMBER",
      "VIEWER",
    ]);
    await openPage(page, consoleUrl, `/apps/${appId}`);
    await page.getByRole("button", { name: "Regenerate key" }).waitFor();
    // The same link again (now used) says so.
    await page.goto(links.ana!);
    await page.getByTestId("invitation-closed").filter({ hasText: "already used" }).waitFor();
    await page.getByRole("link", { name: "Back to the console" }).click();
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByRole("heading", { name: "Log in" }).waitFor();
  });

  it("an invitation link with an existing account: log in, accept, switch workspaces; a VIEWER sees keys masked", async () => {
    await h.ok(`mutation($i: SignUpInput!) { signUp(input: $i) { token } }`, {
      i: { email: VICTOR, password: PASSWORD, workspaceName: "Victor's" },
    });
    await page.goto(links.victor!);
    await page.getByRole("heading", { name: "Join Acme" }).waitFor();
    await page.getByRole("button", { name: "Log in" }).click();
    const login = page.getByRole("form", { name: "Log in to accept" });
    await login.getByLabel("Email").fill(VICTOR);
    await login.getByLabel("Password").fill(PASSWORD);
    await login.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("button", { name: "Accept and join Acme" }).click();
    await page.locator("table.apps", { hasText: "web" }).waitFor();
    const switcher = page.getByLabel("Workspace");
    assert.deepEqual(await switcher.locator("option").allTextContents(), [
      "Victor's (owner)",
      "Acme (viewer)",
    ]);
    assert.equal(await switcher.locator("option:checked").textContent(), "Acme (viewer)");
    assert.equal(await page.getByRole("button", { name: "Create app" }).count(), 0);
    await page.locator("table.apps a", { hasText: "web" }).click();
    await page.getByTestId("key-masked").waitFor();
    const shown = (await page.getByTestId("api-key").textContent())!;
    const realKey = new URL(endpoint).searchParams.get("apikey")!;
    assert.equal(shown, `${realKey.slice(0, 4)}********${realKey.slice(-4)}`);
    assert.ok(!(await page.content()).includes(realKey), "the real key is nowhere on the page");
    for (const name of ["Reveal", "Regenerate key", "Add"])
      assert.equal(await page.getByRole("button", { name, exact: true }).count(), 0, name);
    await shot("app-viewer");
    // The switcher moves between the account's workspaces.
    await switcher.selectOption({ label: "Victor's (owner)" });
    await page.getByText("No apps yet").waitFor();
    await page.getByRole("button", { name: "Create app" }).waitFor();
    // A revoked and an expired link say why they no longer work.
    await page.goto(links.revoked!);
    await page.getByTestId("invitation-closed").filter({ hasText: "revoked" }).waitFor();
    const late = await h.ok<{ inviteMember: { token: string; link: string } }>(
      `mutation($w: ID) { inviteMember(email: "late@example.com", role: MEMBER, workspaceId: $w) { token link } }`,
      {
        w: (await h.ok<{ workspace: { id: string } }>("{ workspace { id } }", {}, (await token())!)).workspace
          .id,
      },
      (await token())!,
    );
    await h.cp.dataSource.query(
      "UPDATE invitations SET expires_at = now() - interval '1 second' WHERE email = 'late@example.com'",
    );
    await page.goto(late.inviteMember.link);
    await page.getByTestId("invitation-closed").filter({ hasText: "expired" }).waitFor();
    await page.getByRole("link", { name: "Back to the console" }).click();
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByRole("heading", { name: "Log in" }).waitFor();
  });

  it("the owner changes a role, transfers ownership (becoming ADMIN) and, as ADMIN, removes a VIEWER", async () => {
    await page.getByLabel("Email").fill(EMAIL);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.locator("table.apps", { hasText: "web" }).waitFor();
    await page.getByRole("link", { name: "Members" }).click();
    const row = (email: string) => page.locator(`table.members tr[data-email="${email}"]`);
    await row(VICTOR).waitFor();
    assert.equal(await page.locator("table.members tbody tr").count(), 3);
    // Ana: ADMIN -> MEMBER.
    await page.getByLabel(`Role of ${ANA}`).selectOption("MEMBER");
    await page.waitForFunction(
      (sel) => (document.querySelector(sel) as HTMLSelectElement | null)?.value === "MEMBER",
      `select[aria-label="Role of ${ANA}"]`,
    );
    await eventually(async () => {
      const m = await h.cp.dataSource.query(
        "SELECT m.role FROM memberships m JOIN accounts a ON a.id = m.account_id WHERE a.email = $1",
        [ANA],
      );
      return m[0]?.role === "MEMBER";
    }, "role stored");
    await shot("members");
    // Ownership to Ana: the owner becomes ADMIN, and the page follows.
    await row(ANA).getByRole("button", { name: "Make owner" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Transfer ownership" }).click();
    await row(ANA).getByTestId("member-role").filter({ hasText: "OWNER" }).waitFor();
    await page
      .getByLabel("Workspace")
      .locator("option", { hasText: "Acme (admin)" })
      .waitFor({ state: "attached" });
    assert.match((await row(EMAIL).textContent())!, /ADMIN/);
    assert.equal(await page.getByRole("button", { name: "Make owner" }).count(), 0);
    // As ADMIN: remove Victor (a VIEWER); Ana (OWNER) cannot be touched.
    assert.equal(await row(ANA).getByRole("button", { name: "Remove" }).count(), 0);
    await row(VICTOR).getByRole("button", { name: "Remove" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Remove" }).click();
    await row(VICTOR).waitFor({ state: "detached" });
    const owners = await h.cp.dataSource.query(
      "SELECT a.email FROM memberships m JOIN accounts a ON a.id = m.account_id JOIN workspaces w ON w.id = m.workspace_id WHERE w.name = 'Acme' AND m.role = 'OWNER'",
    );
    assert.deepEqual(owners, [{ email: ANA }]);
    const victorIn = await h.cp.dataSource.query(
      "SELECT w.name FROM memberships m JOIN accounts a ON a.id = m.account_id JOIN workspaces w ON w.id = m.workspace_id WHERE a.email = $1",
      [VICTOR],
    );
    assert.deepEqual(victorIn, [{ name: "Victor's" }]);
    // The plan is the owner's now.
    await page.getByRole("link", { name: "Plan" }).click();
    await page.getByText("Only the workspace's owner changes the plan.").waitFor();
    assert.equal(await page.getByRole("button", { name: /Upgrade|Switch/ }).count(), 0);
  });

  it("ran every page above under the CSP: no violation nor console error; an injected inline script is refused", async () => {
    assert.deepEqual(await policy.violations(), [], "CSP violations while using the console");
    assert.deepEqual(policy.errors, [], "console errors while using the console");
    // The policy is enforced: an inline script (what an XSS would add) does not run, and is reported.
    const ran = await page.evaluate(() => {
      const s = document.createElement("script");
      s.textContent = "window.__rgInjected = sessionStorage.getItem('rpc-gateway.token')";
      document.body.appendChild(s);
      return (window as unknown as { __rgInjected?: unknown }).__rgInjected;
    });
    assert.equal(ran, undefined, "an inline script ran");
    await eventually(async () => (await policy.violations()).length > 0, "the violation reported");
    assert.match((await policy.violations()).join("\n"), /^script-src-elem inline /m);
  });
});
