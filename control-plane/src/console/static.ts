import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";

/** Where `vite build` writes the console (control-plane/console/dist), from dist/control-plane/src/console. */
export const DEFAULT_CONSOLE_DIR = path.resolve(__dirname, "../../../../control-plane/console/dist");

/** URL prefix the console is served under (same origin as /graphql). */
export const CONSOLE_PREFIX = "/console";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".webp": "image/webp",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

/**
 * The console's Content-Security-Policy. Scripts, styles, fonts and images come from this origin only,
 * with no inline script or style element and no eval (the Vite build has none: one module script and one
 * stylesheet, both files); the console calls nothing but `/graphql` on this origin (connect-src 'self'),
 * and may be framed by no page (frame-ancestors, against clickjacking). `img-src data:` covers Chart.js's
 * canvas exports; `form-action 'self'` and `base-uri 'none'` keep an injected form or <base> from sending
 * anything elsewhere.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join("; ");

/** Sent with every /console response (the assets too: a browser may be pointed at one directly). */
export const CONSOLE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  // Console URLs carry workspace and app ids (and /invite a token, in the fragment): sent nowhere.
  "referrer-policy": "no-referrer",
  // For browsers without frame-ancestors.
  "x-frame-options": "DENY",
  // A page the console opens (docs, a node's explorer) gets no handle on the console's window.
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
};

export function isConsolePath(pathname: string): boolean {
  return pathname === CONSOLE_PREFIX || pathname.startsWith(`${CONSOLE_PREFIX}/`);
}

async function fileSize(p: string): Promise<number | null> {
  try {
    const s = await stat(p);
    return s.isFile() ? s.size : null;
  } catch {
    return null;
  }
}

/**
 * Serves the console's static build under /console: files as they are (hashed files under assets/ are
 * immutable for a year), any other path without a file extension gets index.html (SPA routes; never
 * cached), a missing file with an extension is a 404. Only GET and HEAD.
 */
export async function serveConsole(
  req: IncomingMessage,
  res: ServerResponse,
  pathname: string,
  dir: string = DEFAULT_CONSOLE_DIR,
): Promise<void> {
  if (req.method !== "GET" && req.method !== "HEAD") {
    res
      .writeHead(405, {
        ...CONSOLE_SECURITY_HEADERS,
        allow: "GET, HEAD",
        "content-type": "text/plain; charset=utf-8",
      })
      .end("Method not allowed");
    return;
  }
  if (pathname === CONSOLE_PREFIX) {
    res.writeHead(308, { ...CONSOLE_SECURITY_HEADERS, location: `${CONSOLE_PREFIX}/` }).end();
    return;
  }
  let rel: string;
  try {
    rel = decodeURIComponent(pathname.slice(CONSOLE_PREFIX.length + 1));
  } catch {
    res
      .writeHead(400, { ...CONSOLE_SECURITY_HEADERS, "content-type": "text/plain; charset=utf-8" })
      .end("Bad path");
    return;
  }
  const root = path.resolve(dir);
  let file = path.resolve(root, rel);
  if (rel.includes("\0") || (file !== root && !file.startsWith(root + path.sep))) {
    res
      .writeHead(404, { ...CONSOLE_SECURITY_HEADERS, "content-type": "text/plain; charset=utf-8" })
      .end("Not found");
    return;
  }
  let size = rel === "" ? null : await fileSize(file);
  let isIndex = false;
  if (size === null) {
    // A client-side route (no extension) gets the app; a missing asset is a real 404.
    if (path.extname(rel) !== "") {
      res
        .writeHead(404, { ...CONSOLE_SECURITY_HEADERS, "content-type": "text/plain; charset=utf-8" })
        .end("Not found");
      return;
    }
    file = path.join(root, "index.html");
    size = await fileSize(file);
    isIndex = true;
    if (size === null) {
      res
        .writeHead(503, { ...CONSOLE_SECURITY_HEADERS, "content-type": "text/plain; charset=utf-8" })
        .end("The console is not built: run `npm run build`");
      return;
    }
  }
  const ext = path.extname(file).toLowerCase();
  const immutable = !isIndex && rel.startsWith("assets/");
  res.writeHead(200, {
    ...CONSOLE_SECURITY_HEADERS,
    "content-type": CONTENT_TYPES[ext] ?? "application/octet-stream",
    "content-length": String(size),
    "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
  });
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const s = createReadStream(file);
    s.on("error", reject);
    s.on("end", resolve);
    s.pipe(res);
  });
}
