import assert from "node:assert/strict";
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { SignJWT } from "jose";
import type { Page } from "playwright-core";
import { type Anvil, startAnvil } from "../../helpers/anvil";
import { eventually, nextSecond } from "../../helpers/eventually";
import type { Harness } from "../control-plane/harness";
import { type ConsoleBrowser, launchConsoleBrowser } from "./browser";
import {
  type ConsoleStack,
  logIn,
  openPage,
  requireChromium,
  screenshot,
  startConsoleStack,
} from "./console-fixture";

/**
 * The console's access rules and JWT keys, end to end: Chromium edits an app's rules and keys on its page
 * (/console -> GraphQL -> Postgres -> Redis), and the data plane in front of anvil applies them.
 */

const NETWORK = "local-evm";

interface Rpc {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: test convenience
  body: any;
}

async function rpc(url: string, method = "eth_chainId", headers: Record<string, string> = {}): Promise<Rpc> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
  });
  return { status: res.status, body: await res.json() };
}

function pem(key: KeyObject): string {
  return key.export({ type: "spki", format: "pem" }) as string;
}

describe("console: access rules and JWT keys (Chromium -> /console -> GraphQL; data plane -> anvil)", function () {
  this.timeout(90_000);
  let anvil: Anvil;
  let stack: ConsoleStack | undefined;
  let h: Harness;
  let browser: ConsoleBrowser | undefined;
  let page: Page;
  let consoleUrl: string;
  let owner: { token: string; workspaceId: string };
  let app: { id: string; apiKey: string };
  let endpoint: string;

  before(async function () {
    requireChromium(this);
    anvil = await startAnvil();
    stack = await startConsoleStack({
      network: { slug: NETWORK, name: "Local EVM", httpUrl: anvil.httpUrl },
    });
    h = stack.h;
    await stack.startDataPlane();
    owner = await h.signUp();
    const created = await h.ok<{ createApp: { id: string; apiKey: string } }>(
      `mutation { createApp(input: { name: "dapp", environment: PRODUCTION }) { id apiKey } }`,
      {},
      owner.token,
    );
    app = created.createApp;
    endpoint = `http://127.0.0.1:${stack.dpPort}/${NETWORK}/rpc?apikey=${app.apiKey}`;
    consoleUrl = stack.consoleUrl;
    browser = await launchConsoleBrowser({ profilePrefix: "rg-access-chromium-", timeoutMs: 10_000 });
    page = browser.page;
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
    await anvil?.stop();
  });

  const shot = (name: string) => screenshot(page, name);

  /** Opens the app's page logged in with `token`. */
  async function openApp(token: string): Promise<void> {
    await logIn(page, consoleUrl, token);
    await openPage(page, consoleUrl, `/apps/${app.id}`);
    await page.getByRole("heading", { name: "dapp" }).waitFor();
  }

  it("edits the method rules: an invalid entry shows inline, a deny-list then refuses that method per call", async () => {
    await openApp(owner.token);
    assert.equal((await rpc(endpoint, "eth_blockNumber")).status, 200);
    const form = page.getByRole("form", { name: "Access rules" });
    await form.locator('textarea[name="methods"]').fill("eth_blockNumber\nnot a method");
    await form.getByRole("button", { name: "Save access rules" }).click();
    await page.locator('.field-error[data-field="methods"]').waitFor();
    assert.match(
      (await page.locator('.field-error[data-field="methods"]').textContent())!,
      /"not a method" is not a method name/,
    );
    await form.locator('textarea[name="methods"]').fill("eth_blockNumber");
    await form.getByRole("button", { name: "Save access rules" }).click();
    await form.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    assert.equal(await page.locator('.field-error[data-field="methods"]').count(), 0);
    await eventually(async () => {
      const r = await rpc(endpoint, "eth_blockNumber");
      return r.status === 200 && r.body.error?.data?.reason === "method_not_allowed_by_app";
    }, "eth_blockNumber refused by the app's rules");
    assert.equal((await rpc(endpoint, "eth_chainId")).body.result, "0x7a69");
    // An allow-list, from the same form: only the listed methods now.
    await form.locator('select[name="methodMode"]').selectOption("ALLOW");
    await form.locator('textarea[name="methods"]').fill("eth_chainId\nnet_*");
    await form.getByRole("button", { name: "Save access rules" }).click();
    await eventually(async () => {
      const r = await rpc(endpoint, "eth_gasPrice");
      return r.body.error?.data?.reason === "method_not_allowed_by_app";
    }, "allow-list applied");
    assert.equal((await rpc(endpoint, "net_version")).status, 200);
    assert.equal((await rpc(endpoint, "net_version")).body.result, "31337");
    // The form shows what the server holds after a reload.
    await page.reload();
    await page.getByRole("heading", { name: "dapp" }).waitFor();
    assert.equal(await page.locator('select[name="methodMode"]').inputValue(), "ALLOW");
    assert.equal(await page.locator('textarea[name="methods"]').inputValue(), "eth_chainId\nnet_*");
  });

  it("sets the app's caps and User-Agent patterns; the data plane applies them", async () => {
    const form = page.getByRole("form", { name: "Access rules" });
    await form.locator('select[name="methodMode"]').selectOption("DENY");
    await form.locator('textarea[name="methods"]').fill("");
    // Above the highest cap accepted (1,000,000/s): the server's refusal shows on the field.
    await form.locator('input[name="requestsPerSecond"]').fill("2000000");
    await form.getByRole("button", { name: "Save access rules" }).click();
    await page.locator('.field-error[data-field="requestsPerSecond"]').waitFor();
    await form.locator('input[name="requestsPerSecond"]').fill("3");
    await form.locator('textarea[name="userAgents"]').fill("MyWallet/*");
    await form.getByRole("button", { name: "Save access rules" }).click();
    await form.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    const ua = { "user-agent": "MyWallet/1.0" };
    await eventually(async () => {
      const r = await rpc(endpoint, "eth_chainId", { "user-agent": "curl/8" });
      return r.status === 403 && r.body.error.data.reason === "user_agent_not_allowed";
    }, "a foreign user agent refused");
    // The app's 3/s: a burst of 8 gets 429 app_rate_limit for the rest.
    await nextSecond();
    const burst = await Promise.all(Array.from({ length: 8 }, () => rpc(endpoint, "eth_chainId", ua)));
    const ok = burst.filter((r) => r.status === 200).length;
    const capped = burst.filter((r) => r.status === 429 && r.body.error.data.reason === "app_rate_limit");
    assert.ok(ok >= 3 && ok <= 6, `${ok} served`);
    assert.ok(capped.length > 0);
    assert.equal(capped[0]!.body.error.data.limit, 3);
    await shot("app-access-rules");
    // Cleared again.
    await form.locator('input[name="requestsPerSecond"]').fill("");
    await form.locator('textarea[name="userAgents"]').fill("");
    await form.getByRole("button", { name: "Save access rules" }).click();
    await eventually(
      async () => (await rpc(endpoint, "eth_chainId", { "user-agent": "curl/8" })).status === 200,
      "rules cleared",
    );
  });

  it("sets the app's cap in compute units; the data plane weighs calls by the network's weights", async () => {
    const form = page.getByRole("form", { name: "Access rules" });
    // Above the highest cap accepted (1,000,000,000/s): the server's refusal shows on the field.
    await form.locator('input[name="computeUnitsPerSecond"]').fill("2000000000");
    await form.getByRole("button", { name: "Save access rules" }).click();
    await page.locator('.field-error[data-field="computeUnitsPerSecond"]').waitFor();
    // eth_blockNumber weighs 10 in the seeded platform table: a cap of 25 lets two through per second.
    await form.locator('input[name="computeUnitsPerSecond"]').fill("25");
    await form.getByRole("button", { name: "Save access rules" }).click();
    await form.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    await eventually(async () => {
      await nextSecond();
      const burst = await Promise.all(Array.from({ length: 4 }, () => rpc(endpoint, "eth_blockNumber")));
      const capped = burst.filter((r) => r.status === 429 && r.body.error.data.reason === "app_rate_limit");
      return burst.filter((r) => r.status === 200).length <= 2 && capped[0]?.body.error.data.limit === 25;
    }, "the app's compute-unit cap applied");
    await form.locator('input[name="computeUnitsPerSecond"]').fill("");
    await form.getByRole("button", { name: "Save access rules" }).click();
    await form.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    await eventually(async () => {
      await nextSecond();
      const burst = await Promise.all(Array.from({ length: 4 }, () => rpc(endpoint, "eth_blockNumber")));
      return burst.every((r) => r.status === 200);
    }, "the cap cleared");
  });

  it("registers JWT keys (bad PEM inline, a 4th refused), requires JWTs: no token 401, a signed one served", async () => {
    const card = page.locator('[data-card="JWT"]');
    const add = page.getByRole("form", { name: "Add JWT key" });
    await add.locator('input[name="kid"]').fill("main");
    await add
      .locator('textarea[name="key"]')
      .fill("-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----");
    await add.getByRole("button", { name: "Add key" }).click();
    await page.locator('.field-error[data-field="key"]').waitFor();
    const signing = generateKeyPairSync("ec", { namedCurve: "P-256" });
    await add.locator('textarea[name="key"]').fill(pem(signing.publicKey));
    await add.getByRole("button", { name: "Add key" }).click();
    await card.locator('li[data-kid="main"]').waitFor();
    assert.match((await card.locator('li[data-kid="main"]').textContent())!, /ES256/);
    for (const kid of ["second", "third"]) {
      await add.locator('input[name="kid"]').fill(kid);
      await add
        .locator('textarea[name="key"]')
        .fill(pem(generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey));
      await add.getByRole("button", { name: "Add key" }).click();
      await card.locator(`li[data-kid="${kid}"]`).waitFor();
    }
    await add.locator('input[name="kid"]').fill("fourth");
    await add
      .locator('textarea[name="key"]')
      .fill(pem(generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey));
    await add.getByRole("button", { name: "Add key" }).click();
    await page.locator('.field-error[data-field="key"]', { hasText: "at most 3 JWT keys" }).waitFor();
    assert.equal(await card.locator("li[data-kid]").count(), 3);

    const settings = page.getByRole("form", { name: "JWT settings" });
    await settings.locator('input[name="jwtRequired"]').check();
    await settings.locator('input[name="jwtAudience"]').fill("https://dapp.example");
    await settings.getByRole("button", { name: "Save JWT settings" }).click();
    await page.getByTestId("jwt-status").filter({ hasText: "Every request must carry" }).waitFor();
    await eventually(async () => {
      const r = await rpc(endpoint);
      return r.status === 401 && r.body.error.data.reason === "jwt_missing";
    }, "no token refused");
    const token = await new SignJWT({ aud: "https://dapp.example" })
      .setProtectedHeader({ alg: "ES256", kid: "main" })
      .setExpirationTime("5m")
      .sign(signing.privateKey);
    const served = await rpc(endpoint, "eth_chainId", { authorization: `Bearer ${token}` });
    assert.equal(served.status, 200, JSON.stringify(served.body));
    assert.equal(served.body.result, "0x7a69");
    const wrongAud = await new SignJWT({ aud: "https://other.example" })
      .setProtectedHeader({ alg: "ES256", kid: "main" })
      .setExpirationTime("5m")
      .sign(signing.privateKey);
    assert.equal(
      (await rpc(endpoint, "eth_chainId", { authorization: `Bearer ${wrongAud}` })).body.error.data.reason,
      "jwt_wrong_audience",
    );
    await shot("app-jwt");
    // Removing a key updates the list (two remain, JWT still required).
    await card.locator('li[data-kid="third"]').getByRole("button", { name: "Remove" }).click();
    await card.locator('li[data-kid="third"]').waitFor({ state: "detached" });
    assert.equal(await card.locator("li[data-kid]").count(), 2);
  });

  it("a VIEWER sees the rules and keys read-only (no forms)", async () => {
    const [acc] = await h.cp.dataSource.query(
      "INSERT INTO accounts (email, password_hash) VALUES ($1, 'unused') RETURNING id",
      [`viewer-${Date.now()}@example.com`],
    );
    await h.cp.dataSource.query(
      "INSERT INTO memberships (account_id, workspace_id, role) VALUES ($1, $2, 'VIEWER')",
      [acc.id, owner.workspaceId],
    );
    const viewer = await h.cp.services.auth.issueSessionToken(acc.id);
    await openApp(viewer);
    await page.getByTestId("access-rules-summary").waitFor();
    assert.match((await page.getByTestId("access-rules-summary").textContent())!, /any method/);
    assert.equal(await page.getByRole("form", { name: "Access rules" }).count(), 0);
    assert.equal(await page.getByRole("form", { name: "Add JWT key" }).count(), 0);
    assert.equal(await page.getByRole("form", { name: "JWT settings" }).count(), 0);
    assert.equal(await page.locator('[data-card="JWT"] li[data-kid]').count(), 2);
    assert.equal(await page.locator('[data-card="JWT"]').getByRole("button", { name: "Remove" }).count(), 0);
    assert.match((await page.getByTestId("jwt-status").textContent())!, /Every request must carry/);
  });
});
