import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import type { Page } from "playwright-core";
import {
  type ControlPlaneWorker,
  startWorker,
  type WorkerOptions,
} from "../../../control-plane/src/worker/worker";
import { loadDataPlaneConfig } from "../../../data-plane/src/config";
import { type DataPlane, startDataPlane } from "../../../data-plane/src/data-plane";
import { freePort } from "../../helpers/ports";
import { ADMIN_TOKEN, type Harness, startHarness } from "../control-plane/harness";
import { CHROMIUM } from "./browser";

/**
 * The set-up the console's end-to-end tests share: the control plane (which serves /console), optionally a
 * network with one upstream, a data plane and a worker on the same Postgres database and Redis prefix, and
 * a Chromium page logged in the way the console logs in.
 */

/** From dist/test/integration/console to the repository's test/artifacts (git-ignored). */
const ARTIFACTS = path.resolve(__dirname, "../../../../test/artifacts/console");

/** The sessionStorage key under which the console keeps the session token (control-plane/console/src/api.ts). */
const TOKEN_KEY = "rpc-gateway.token";

/** Skips the suite when Chromium is missing; fails it on CI, which installs it. Call from `before`. */
export function requireChromium(ctx: Mocha.Context): void {
  if (existsSync(CHROMIUM)) return;
  // CI installs it (.ci/run); elsewhere: apt-get install chromium.
  if (process.env.CI) assert.fail(`${CHROMIUM} is missing`);
  console.warn(`console e2e skipped: ${CHROMIUM} is missing (apt-get install chromium)`);
  ctx.skip();
}

/** A full-page screenshot into test/artifacts/console/<name>.png, for a person to look at. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

export interface ConsoleNetwork {
  slug: string;
  name: string;
  /** The network's one upstream. */
  httpUrl: string;
  wsUrl?: string;
}

export interface ConsoleStackOptions {
  /** Control-plane settings on top of the harness's. */
  env?: Record<string, string>;
  /** Created as ADMIN_TOKEN (chain id 31337, anvil's) before anything else can see it. */
  network?: ConsoleNetwork;
}

export interface ConsoleStack {
  readonly h: Harness;
  /** The control plane's origin, which is the console's (e.g. for the clipboard permission). */
  readonly origin: string;
  /** `${origin}/console`. */
  readonly consoleUrl: string;
  /**
   * The data plane's port, taken before the control plane starts: the endpoint URLs the console shows
   * (PUBLIC_HTTP_URL, PUBLIC_WS_URL) point at it.
   */
  readonly dpPort: number;
  /** Set once startDataPlane has resolved. */
  readonly dp: DataPlane | undefined;
  /**
   * Starts the data plane on dpPort with the harness's Redis and key prefix. `env`: settings on top of
   * those (health checked every 200 ms, so upstreams are usable soon after the start).
   */
  startDataPlane(env?: Record<string, string>): Promise<DataPlane>;
  /** Starts the control plane's worker on the harness's config. */
  startWorker(opts?: WorkerOptions): Promise<ControlPlaneWorker>;
  /** Stops what this stack started: the data plane, then the worker, then the control plane. */
  close(): Promise<void>;
}

export async function startConsoleStack(o: ConsoleStackOptions = {}): Promise<ConsoleStack> {
  const dpPort = await freePort();
  const h = await startHarness({
    PUBLIC_HTTP_URL: `http://127.0.0.1:${dpPort}`,
    PUBLIC_WS_URL: `ws://127.0.0.1:${dpPort}`,
    ...o.env,
  });
  let dp: DataPlane | undefined;
  let worker: ControlPlaneWorker | undefined;
  const close = async () => {
    await dp?.close();
    await worker?.close();
    await h.close();
  };
  try {
    if (o.network) await createNetwork(h, o.network);
  } catch (err) {
    await close();
    throw err;
  }
  const origin = `http://127.0.0.1:${h.cp.port}`;
  return {
    h,
    origin,
    consoleUrl: `${origin}/console`,
    dpPort,
    get dp() {
      return dp;
    },
    async startDataPlane(env = {}) {
      assert.equal(dp, undefined, "one data plane per stack");
      dp = await startDataPlane(
        loadDataPlaneConfig({
          ...h.ns.redis.env(),
          REDIS_KEY_PREFIX: h.ns.prefix,
          DATA_PLANE_PORT: String(dpPort),
          DATA_PLANE_HOST: "127.0.0.1",
          LOG_LEVEL: process.env.LOG_LEVEL ?? "silent",
          HEALTH_CHECK_INTERVAL_MS: "200",
          ...env,
        }),
      );
      return dp;
    },
    async startWorker(opts = {}) {
      assert.equal(worker, undefined, "one worker per stack");
      worker = await startWorker(h.config, undefined, opts);
      return worker;
    },
    close,
  };
}

async function createNetwork(h: Harness, n: ConsoleNetwork): Promise<void> {
  // An absent $w leaves wsUrl unset (HTTP only).
  await h.ok(
    `mutation($s: String!, $n: String!, $u: String!, $w: String) {
      n: createNetwork(input: { slug: $s, name: $n, protocol: EVM, chainId: 31337 }) { id }
      u: addUpstream(networkSlug: $s, input: { httpUrl: $u, wsUrl: $w }) { id } }`,
    { s: n.slug, n: n.name, u: n.httpUrl, w: n.wsUrl },
    ADMIN_TOKEN,
  );
}

/**
 * Logs `page` in as the holder of `token`, as the console does after a sign-in: the token in the console
 * origin's sessionStorage of this tab. The page stays on the login page; openPage (a fresh load in the same
 * tab) then reads the token.
 */
export async function logIn(page: Page, consoleUrl: string, token: string): Promise<void> {
  await page.goto(`${consoleUrl}/login`);
  await page.evaluate(([key, value]) => sessionStorage.setItem(key, value), [TOKEN_KEY, token] as const);
}

/** The session token the console holds in this tab (null when logged out). */
export function sessionToken(page: Page): Promise<string | null> {
  return page.evaluate((key) => sessionStorage.getItem(key), TOKEN_KEY);
}

/** What the console left in localStorage under the token key (it must leave nothing). */
export function persistedToken(page: Page): Promise<string | null> {
  return page.evaluate((key) => localStorage.getItem(key), TOKEN_KEY);
}

/**
 * Collects, from now on, every CSP violation the page reports (`securitypolicyviolation` events, through an
 * init script, which CDP runs outside the page's CSP), every console error about the policy ("Refused to
 * ...", which Chromium logs for each blocked load) and every uncaught page error, across navigations.
 * (Other console errors, e.g. Chromium's line for a fetch answered 401, are the tests' own doing.)
 */
export async function watchPolicy(
  page: Page,
): Promise<{ violations(): Promise<string[]>; errors: string[] }> {
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy|Refused to/i.test(m.text())) errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  const seen: string[] = [];
  await page.exposeFunction("__rgCspViolation", (v: string) => {
    seen.push(v);
  });
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      (window as unknown as { __rgCspViolation(v: string): void }).__rgCspViolation(
        `${e.effectiveDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`,
      );
    });
  });
  return { violations: async () => [...seen], errors };
}

/** Loads the console at `pathname` (e.g. "/", "/apps/<id>"). */
export async function openPage(page: Page, consoleUrl: string, pathname: string): Promise<void> {
  await page.goto(`${consoleUrl}${pathname}`);
}
