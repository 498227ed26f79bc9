import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";

/** Debian's Chromium (apt-get install chromium); CHROMIUM_PATH overrides. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export interface ConsoleBrowser {
  readonly ctx: BrowserContext;
  readonly page: Page;
  /** Closes the browser and removes its profile directory. */
  close(): Promise<void>;
}

/**
 * Headless Chromium on a fresh profile for the console tests. The background-networking flags keep it
 * from reaching out (this machine's network is closed: every such connection would be refused).
 * `clipboardOrigin`: the console's origin, granted clipboard read/write (copy buttons).
 */
export async function launchConsoleBrowser(o: {
  profilePrefix: string;
  timeoutMs: number;
  clipboardOrigin?: string;
}): Promise<ConsoleBrowser> {
  const profileDir = mkdtempSync(path.join(tmpdir(), o.profilePrefix));
  const ctx = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-quic",
      "--no-first-run",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1280, height: 900 },
  });
  ctx.setDefaultTimeout(o.timeoutMs);
  if (o.clipboardOrigin !== undefined) {
    await ctx.grantPermissions(["clipboard-read", "clipboard-write"], { origin: o.clipboardOrigin });
  }
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  return {
    ctx,
    page,
    async close() {
      await ctx.close().catch(() => undefined);
      rmSync(profileDir, { recursive: true, force: true });
    },
  };
}
