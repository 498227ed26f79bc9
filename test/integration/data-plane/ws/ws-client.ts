import type { IncomingMessage } from "node:http";
import WebSocket from "ws";
import type { NetworkRecord } from "../../../../shared/src/redis/records";

/** A test client: collects every message, matches answers by id, waits for conditions. */
export class TestWsClient {
  // biome-ignore lint/suspicious/noExplicitAny: test convenience
  readonly messages: any[] = [];
  closeCode: number | undefined;
  closeReason = "";
  private nextId = 1;
  private readonly closed: Promise<void>;
  private listeners: (() => void)[] = [];

  constructor(readonly ws: WebSocket) {
    ws.on("message", (data) => {
      this.messages.push(JSON.parse(String(data)));
      this.poke();
    });
    this.closed = new Promise((resolve) => {
      ws.on("close", (code, reason) => {
        this.closeCode = code;
        this.closeReason = String(reason);
        this.poke();
        resolve();
      });
    });
    ws.on("error", () => {});
  }

  static open(url: string, headers: Record<string, string> = {}): Promise<TestWsClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers });
      const c = new TestWsClient(ws);
      ws.once("open", () => resolve(c));
      ws.once("unexpected-response", (_req, res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => {
          const err = new Error(`upgrade refused: ${res.statusCode}`) as Error & {
            status?: number;
            // biome-ignore lint/suspicious/noExplicitAny: test convenience
            body?: any;
          };
          err.status = res.statusCode;
          try {
            err.body = JSON.parse(Buffer.concat(chunks).toString());
          } catch {
            err.body = Buffer.concat(chunks).toString();
          }
          reject(err);
        });
      });
      ws.once("error", reject);
    });
  }

  private poke(): void {
    const l = this.listeners;
    this.listeners = [];
    for (const f of l) f();
  }

  /** Resolves once `pred` holds (checked on every message / close), or rejects after `ms`. */
  async until(pred: () => boolean, ms = 5000, what = "condition"): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 100));
        this.listeners.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  sendRaw(text: string | Buffer, binary = false): void {
    this.ws.send(text, { binary });
  }

  // biome-ignore lint/suspicious/noExplicitAny: test convenience
  async call(method: string, params?: unknown, ms = 5000): Promise<any> {
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }));
    let found: unknown;
    await this.until(
      () => {
        found = this.messages.find((m) => !Array.isArray(m) && m.id === id);
        return found !== undefined;
      },
      ms,
      `answer to ${method}`,
    );
    return found;
  }

  /** Notifications for one subscription id. */
  // biome-ignore lint/suspicious/noExplicitAny: test convenience
  notifications(subId: string): any[] {
    return this.messages.filter((m) => !Array.isArray(m) && m.params?.subscription === subId);
  }

  async waitClosed(ms = 5000): Promise<void> {
    await Promise.race([
      this.closed,
      new Promise((_, reject) => setTimeout(() => reject(new Error("socket did not close")), ms)),
    ]);
  }

  close(): void {
    this.ws.close();
  }

  terminate(): void {
    this.ws.terminate();
  }
}

export function wsNetwork(
  slug: string,
  protocol: "EVM" | "SUBSTRATE",
  upstreams: { id: string; httpUrl: string; wsUrl: string | null; weight?: number }[],
): NetworkRecord {
  return {
    slug,
    name: slug,
    protocol,
    chainId: protocol === "EVM" ? 31337 : null,
    allowDebug: false,
    upstreams: upstreams.map((u) => ({
      id: u.id,
      httpUrl: u.httpUrl,
      wsUrl: u.wsUrl,
      weight: u.weight ?? 100,
    })),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
