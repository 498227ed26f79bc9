import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually } from "../../helpers/eventually";
import { ADMIN_TOKEN, type Harness } from "../control-plane/harness";
import { type ConsoleBrowser, launchConsoleBrowser } from "./browser";
import {
  type ConsoleStack,
  logIn,
  openPage,
  requireChromium,
  screenshot,
  startConsoleStack,
} from "./console-fixture";

describe("console: operator pages (Chromium -> /console -> GraphQL; data plane health -> anvil)", function () {
  this.timeout(90_000);
  let stack: ConsoleStack | undefined;
  let h: Harness;
  let anvil: Anvil;
  let browser: ConsoleBrowser | undefined;
  let page: Page;
  let consoleUrl: string;
  let op: { token: string; accountId: string; workspaceId: string };
  let tenant: { token: string; accountId: string; workspaceId: string };
  let tenantEmail: string;

  before(async function () {
    requireChromium(this);
    anvil = await startAnvil();
    stack = await startConsoleStack({
      network: { slug: "local-evm", name: "Local EVM", httpUrl: anvil.httpUrl },
    });
    h = stack.h;
    await fetch(anvil.httpUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x5"] }),
    });
    op = await h.signUp();
    tenantEmail = `tenant-${Date.now()}@example.com`;
    tenant = await h.signUp(tenantEmail);
    await h.ok(
      `mutation($a: String!) { setOperator(account: $a, operator: true) { id } }`,
      { a: op.accountId },
      ADMIN_TOKEN,
    );
    await stack.startDataPlane({
      RATE_LIMIT_MODE: "off",
      QUOTA_MODE: "off",
      USAGE_MODE: "off",
      HEALTH_PUBLISH_INTERVAL_MS: "200",
    });
    consoleUrl = stack.consoleUrl;
    browser = await launchConsoleBrowser({ profilePrefix: "rg-console-chromium-", timeoutMs: 15_000 });
    page = browser.page;
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
    await anvil?.stop();
  });

  const shot = (name: string) => screenshot(page, name);
  const signIn = async (token: string) => {
    await logIn(page, consoleUrl, token);
    await openPage(page, consoleUrl, "/");
    await page.getByRole("link", { name: "Apps" }).waitFor();
  };

  it("a workspace account sees no operator link, and the operator URL is not served to it", async () => {
    await signIn(tenant.token);
    await page.getByRole("link", { name: "Plan" }).waitFor();
    assert.equal(await page.getByRole("link", { name: "Operator" }).count(), 0);
    await openPage(page, consoleUrl, "/operator/networks");
    await page.getByRole("heading", { name: "Not found" }).waitFor();
    assert.equal(await page.getByRole("heading", { name: "Networks & upstreams" }).count(), 0);
  });

  it("networks & upstreams: live health, head and lag; add, edit and remove", async () => {
    await signIn(op.token);
    await page.getByRole("link", { name: "Operator" }).click();
    await page.getByRole("heading", { name: "Networks & upstreams" }).waitFor();
    const row = page.locator(`tr[data-upstream="${anvil.httpUrl}"]`);
    // The page polls every 5 s; the data plane publishes every 200 ms.
    await row.locator('[data-health="healthy"]').waitFor({ timeout: 20_000 });
    assert.equal(await row.getByTestId("head").textContent(), "5");
    assert.equal(await row.getByTestId("lag").textContent(), "0 blocks");
    await shot("operator-networks");

    const add = page.getByRole("form", { name: "Add upstream to local-evm" });
    await add.getByLabel("HTTP URL").fill("http://127.0.0.1:9");
    await add.getByRole("button", { name: "Add upstream" }).click();
    const added = page.locator('tr[data-upstream="http://127.0.0.1:9"]');
    await added.waitFor();
    await added.getByLabel("Weight", { exact: true }).fill("9");
    await added.getByRole("button", { name: "Save" }).click();
    await eventually(async () => {
      const d = await h.ok(`{ networks { upstreams { httpUrl weight } } }`, {}, ADMIN_TOKEN);
      return d.networks[0].upstreams.some(
        (u: { httpUrl: string; weight: number }) => u.httpUrl === "http://127.0.0.1:9" && u.weight === 9,
      );
    }, "weight 9 stored");
    await added.getByRole("button", { name: "Remove" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Remove" }).click();
    await added.waitFor({ state: "detached" });
    const d = await h.ok(`{ networks { upstreams { httpUrl } } }`, {}, ADMIN_TOKEN);
    assert.deepEqual(
      d.networks[0].upstreams.map((u: { httpUrl: string }) => u.httpUrl),
      [anvil.httpUrl],
    );

    const form = page.getByRole("form", { name: "Add network" });
    await form.getByLabel("Slug").fill("second-net");
    await form.getByLabel("Name").fill("Second");
    await form.getByLabel("Chain id").fill("77");
    await form.getByRole("button", { name: "Add network" }).click();
    await page.locator('[data-network="second-net"]').waitFor();
    await page.locator('[data-network="second-net"]').getByRole("button", { name: "Remove network" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Remove network" }).click();
    await page.locator('[data-network="second-net"]').waitFor({ state: "detached" });
    const left = await h.ok(`{ networks { slug } }`, {}, ADMIN_TOKEN);
    assert.deepEqual(
      left.networks.map((n: { slug: string }) => n.slug),
      ["local-evm"],
    );
  });

  it("plans: lists every plan with its self-service flag; edits a plan", async () => {
    await page.getByRole("link", { name: "Plans" }).click();
    await page.getByRole("heading", { name: "Plans", exact: true }).waitFor();
    const ent = page.locator('tr[data-plan="enterprise"]');
    assert.equal(await ent.getByTestId("self-service").textContent(), "no");
    assert.equal(await page.locator('tr[data-plan="free"]').getByTestId("self-service").textContent(), "yes");
    await ent.getByRole("button", { name: "Edit" }).click();
    const form = page.getByRole("form", { name: "Plan" });
    await form.getByLabel("Self-service").check();
    await form.getByRole("button", { name: "Save plan" }).click();
    await eventually(
      async () => (await ent.getByTestId("self-service").textContent()) === "yes",
      "enterprise self-service",
    );
    const plans = await h.ok(`{ plans { name selfService maxApps } }`, {}, ADMIN_TOKEN);
    assert.equal(plans.plans.find((p: { name: string }) => p.name === "enterprise").selfService, true);
    await shot("operator-plans");
  });

  it("plans: the concurrency caps per key are shown and edited (empty = the data plane's default)", async () => {
    const growth = page.locator('tr[data-plan="growth"]');
    assert.equal(await growth.getByTestId("in-flight").textContent(), "500 (32)");
    await growth.getByRole("button", { name: "Edit" }).click();
    const form = page.getByRole("form", { name: "Plan" });
    assert.equal(await form.getByLabel("Calls in flight per key", { exact: true }).inputValue(), "500");
    await form.getByLabel("Calls in flight per key", { exact: true }).fill("0");
    await form.getByRole("button", { name: "Save plan" }).click();
    await form.locator('[data-field="maxInFlightPerKey"]').waitFor();
    await form.getByLabel("Calls in flight per key", { exact: true }).fill("750");
    await form.getByLabel("Heavy calls in flight per key").fill("");
    await form.getByRole("button", { name: "Save plan" }).click();
    await eventually(
      async () => (await growth.getByTestId("in-flight").textContent()) === "750 (default)",
      "growth's caps shown",
    );
    const d = await h.ok(
      `{ plans { name maxApps maxInFlightPerKey maxHeavyInFlightPerKey } }`,
      {},
      ADMIN_TOKEN,
    );
    assert.deepEqual(
      d.plans.find((p: { name: string }) => p.name === "growth"),
      { name: "growth", maxApps: 100, maxInFlightPerKey: 750, maxHeavyInFlightPerKey: null },
      "saved, and the form kept the plan's maxApps",
    );
    await shot("operator-plans-caps");
  });

  it("plans: the editor sets limits in compute units (blank = none) and the table shows them", async () => {
    await page.getByRole("link", { name: "Plans" }).click();
    await page.getByRole("heading", { name: "Plans", exact: true }).waitFor();
    const form = page.getByRole("form", { name: "Plan" });
    await form.getByLabel("Plan name").fill("cu-console");
    await form.getByLabel("Requests per day").fill("100000");
    await form.getByLabel("Requests per second", { exact: true }).fill("50");
    await form.getByLabel("Compute units per second").fill("2500");
    await form.getByLabel("Compute units per day").fill("9000000");
    await form.getByRole("button", { name: "Save plan" }).click();
    const row = page.locator('tr[data-plan="cu-console"]');
    await row.waitFor();
    assert.equal(await row.getByTestId("cu-per-second").textContent(), "2,500");
    const saved = await h.ok(
      `{ plans { name computeUnitsPerSecond dailyComputeUnitLimit monthlyComputeUnitLimit } }`,
      {},
      ADMIN_TOKEN,
    );
    assert.deepEqual(
      saved.plans.find((p: { name: string }) => p.name === "cu-console"),
      {
        name: "cu-console",
        computeUnitsPerSecond: 2500,
        dailyComputeUnitLimit: 9_000_000,
        monthlyComputeUnitLimit: null,
      },
    );
    // A bad value: the server's error is shown, nothing changes.
    await row.getByRole("button", { name: "Edit" }).click();
    await form.getByLabel("Compute units per second").fill("0");
    await form.getByRole("button", { name: "Save plan" }).click();
    await form.getByText(/computeUnitsPerSecond must be a positive integer/).waitFor();
    // Blank: no limit in compute units any more.
    await form.getByLabel("Compute units per second").fill("");
    await form.getByRole("button", { name: "Save plan" }).click();
    await eventually(
      async () => (await row.getByTestId("cu-per-second").textContent()) === "–",
      "the plan's compute units per second cleared",
    );
    // The seeded plans count requests only.
    assert.equal(await page.locator('tr[data-plan="free"]').getByTestId("cu-per-second").textContent(), "–");
  });

  it("compute units: the platform table, a network override that reaches the network record, its removal", async () => {
    await page.getByRole("link", { name: "Compute units" }).click();
    await page.getByRole("heading", { name: "Compute units", exact: true }).waitFor();
    const table = page.getByRole("table", { name: "Method weights" });
    const units = (method: string) => table.locator(`tr[data-method="${method}"]`).getByTestId("units");
    await units("eth_call").waitFor();
    assert.equal(await units("eth_call").textContent(), "26");
    assert.equal(await units("eth_getLogs").textContent(), "75");
    assert.match((await page.getByTestId("default-units").textContent()) ?? "", /20 compute units/);
    await page.getByLabel("Weights of").selectOption("local-evm");
    await page.getByRole("heading", { name: "Set a weight for local-evm" }).waitFor();
    const form = page.getByRole("form", { name: "Set a weight" });
    // Hostile input is refused with the server's message.
    await form.getByLabel("Method").fill("eth call; drop");
    await form.getByLabel("Compute units").fill("5");
    await form.getByRole("button", { name: "Save weight" }).click();
    await form.getByText(/method must be a JSON-RPC method name/).waitFor();
    await form.getByLabel("Method").fill("eth_call");
    await form.getByLabel("Compute units").fill("-3");
    await form.getByRole("button", { name: "Save weight" }).click();
    await form.getByText(/units must be a whole number 0\.\.1000000/).waitFor();
    await form.getByLabel("Compute units").fill("40");
    await form.getByRole("button", { name: "Save weight" }).click();
    await eventually(async () => (await units("eth_call").textContent()) === "40", "the override listed");
    const record = async () =>
      JSON.parse((await h.redis.hget(h.names.networks(), "local-evm")) ?? "{}") as {
        methodCosts?: { methods: Record<string, number> };
      };
    assert.equal((await record()).methodCosts?.methods.eth_call, 40, "published in the network record");
    await shot("operator-compute-units");
    await table
      .locator('tr[data-method="eth_call"]')
      .getByRole("button", { name: "Remove override" })
      .click();
    await eventually(async () => (await units("eth_call").textContent()) === "26", "back to the platform's");
    assert.equal((await record()).methodCosts?.methods.eth_call, 26);
  });

  it("workspaces: plan, members and today's usage against the limit; changes the plan", async () => {
    await page.getByRole("link", { name: "Workspaces" }).click();
    const row = page.locator(`tr[data-workspace="WS ${tenantEmail}"]`);
    await row.waitFor();
    assert.ok((await row.textContent())?.includes(tenantEmail));
    assert.match((await row.getByTestId("today").textContent()) ?? "", /^0 \/ [\d,]+$/);
    await row.getByLabel(`Plan of WS ${tenantEmail}`).selectOption("growth");
    await eventually(async () => {
      const d = await h.ok("{ workspace { plan { name } } }", {}, tenant.token);
      return d.workspace.plan.name === "growth";
    }, "tenant on growth");
    await shot("operator-workspaces");
  });

  it("platform usage: totals across every workspace", async () => {
    const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    await h.cp.dataSource.query(
      `INSERT INTO usage_hour (hour, workspace_id, app_id, network, method, category, count, latency_sum_ms)
       VALUES ($1, $2, '00000000-0000-0000-0000-000000000000', 'local-evm', 'eth_call', 'Success', 30, 0),
              ($1, $3, '00000000-0000-0000-0000-000000000000', 'local-evm', 'eth_call', 'Node Error', 4, 0)`,
      [new Date(hour), tenant.workspaceId, op.workspaceId],
    );
    await page.getByRole("link", { name: "Platform usage" }).click();
    await page.getByTestId("platform-requests").waitFor();
    assert.equal(await page.getByTestId("platform-requests").textContent(), "34");
    assert.equal(await page.getByTestId("platform-errors").textContent(), "4");
    await shot("operator-usage");
  });
});
