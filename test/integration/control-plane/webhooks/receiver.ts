import assert from "node:assert/strict";
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the receiver got, with its signature checked against the secret registered for its path. */
export interface Received {
  path: string;
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  // biome-ignore lint/suspicious/noExplicitAny: payloads are walked freely and checked by assertions
  json: any;
  /** Epoch ms when the request arrived. */
  at: number;
  /** HMAC-SHA256 over "{id}.{timestamp}.{body}" with the path's secret matched a v1 signature. */
  verified: boolean;
}

/**
 * The Standard Webhooks check written out independently of the code under test: key = base64 after
 * `whsec_`, MAC over `{id}.{timestamp}.{body}`, compared with each `v1,` signature.
 */
export function verifyIndependently(
  secret: string,
  id: string,
  ts: string,
  body: string,
  header: string,
): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const mac = createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest();
  return header.split(" ").some((s) => {
    const [v, sig] = s.split(",");
    const got = Buffer.from(sig ?? "", "base64");
    return v === "v1" && got.length === mac.length && timingSafeEqual(got, mac);
  });
}

/**
 * A webhook receiver on 127.0.0.1. Each path answers from its script of status codes (then 200) and
 * verifies signatures with the secret registered for it. Counts TCP connections, so a test can show that
 * a refused delivery never connected.
 */
export class WebhookReceiver {
  readonly requests: Received[] = [];
  connections = 0;
  private server: Server | undefined;
  private port = 0;
  private readonly secrets = new Map<string, string>();
  private readonly scripts = new Map<string, number[]>();
  /** Body sent with a non-2xx answer (longer than the stored excerpt). */
  failureBody = `{"error":"${"x".repeat(2000)}"}`;

  async start(): Promise<void> {
    const server = createServer(
      (req, res) => void this.handle(req).then(([status, body]) => res.writeHead(status).end(body)),
    );
    server.on("connection", () => this.connections++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  get portNumber(): number {
    return this.port;
  }

  url(path: string, host = "127.0.0.1"): string {
    return `http://${host}:${this.port}${path}`;
  }

  setSecret(path: string, secret: string): void {
    this.secrets.set(path, secret);
  }

  /** The next answers of `path`, in order (e.g. [500, 500]: two failures, then 200). */
  script(path: string, statuses: number[]): void {
    this.scripts.set(path, [...statuses]);
  }

  private async handle(req: IncomingMessage): Promise<[number, string]> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    const path = req.url ?? "/";
    const id = String(req.headers["webhook-id"] ?? "");
    const timestamp = String(req.headers["webhook-timestamp"] ?? "");
    const signature = String(req.headers["webhook-signature"] ?? "");
    const secret = this.secrets.get(path);
    let json: unknown = null;
    try {
      json = JSON.parse(body);
    } catch {
      // recorded as it came
    }
    this.requests.push({
      path,
      id,
      timestamp,
      signature,
      body,
      json,
      at: Date.now(),
      verified: secret !== undefined && verifyIndependently(secret, id, timestamp, body, signature),
    });
    const status = this.scripts.get(path)?.shift() ?? 200;
    return [status, status >= 200 && status < 300 ? "ok" : this.failureBody];
  }

  on(path: string): Received[] {
    return this.requests.filter((r) => r.path === path);
  }

  /** Polls until `pred` holds for the requests of `path`; returns them. */
  async waitFor(path: string, pred: (rs: Received[]) => boolean, timeoutMs = 15_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const rs = this.on(path);
      if (pred(rs)) return rs;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(
      `receiver ${path}: condition not met; got ${JSON.stringify(this.on(path).map((r) => r.json))}`,
    );
  }

  async close(): Promise<void> {
    const s = this.server;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
