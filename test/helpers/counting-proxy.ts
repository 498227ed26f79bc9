import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the proxy passed on, and what the gateway answered. */
export interface ProxiedExchange {
  method: string;
  /** Path and query as the client sent them. */
  url: string;
  /** The request body as text. */
  body: string;
  status: number;
  retryAfter: string | null;
}

/** Request headers not passed on (hop-by-hop, or recomputed by fetch). */
const DROP = new Set(["host", "connection", "keep-alive", "content-length", "transfer-encoding", "expect"]);

/**
 * A loopback HTTP proxy that passes every request to `target` unchanged and records each exchange, so a
 * test can count what a client library really sent (its retries included) without trusting the client.
 */
export class CountingProxy {
  readonly exchanges: ProxiedExchange[] = [];
  private server: Server | undefined;
  base = "";

  constructor(private readonly target: string) {}

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      this.pass(req)
        .then(({ status, headers, body }) => {
          res.writeHead(status, headers);
          res.end(body);
        })
        .catch((err: unknown) => {
          res.writeHead(599, { "content-type": "text/plain" });
          res.end(`proxy failed: ${String(err)}`);
        });
    });
    server.keepAliveTimeout = 1_000;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.server = server;
    this.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this;
  }

  /** The exchanges whose URL starts with `path` (e.g. "/eth/rpc"). */
  to(path: string): ProxiedExchange[] {
    return this.exchanges.filter((e) => e.url.startsWith(path));
  }

  clear(): void {
    this.exchanges.length = 0;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (s === undefined) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  private async pass(
    req: IncomingMessage,
  ): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (v !== undefined && !DROP.has(k)) headers[k] = Array.isArray(v) ? v.join(", ") : v;
    }
    const method = req.method ?? "GET";
    const res = await fetch(`${this.target}${req.url ?? "/"}`, {
      method,
      headers,
      body: method === "GET" || method === "HEAD" ? undefined : body,
    });
    const answer = Buffer.from(await res.arrayBuffer());
    this.exchanges.push({
      method,
      url: req.url ?? "/",
      body: body.toString("utf8"),
      status: res.status,
      retryAfter: res.headers.get("retry-after"),
    });
    const out: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      if (
        k !== "content-length" &&
        k !== "transfer-encoding" &&
        k !== "connection" &&
        k !== "content-encoding"
      )
        out[k] = v;
    });
    return { status: res.status, headers: out, body: answer };
  }
}
