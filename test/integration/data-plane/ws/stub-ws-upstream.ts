import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";

/**
 * A minimal EVM-ish upstream for WebSocket tests: HTTP and WS JSON-RPC on one port, `eth_subscribe`
 * (newHeads, logs, newPendingTransactions) with notifications emitted on demand (`emitHead`) or on an
 * interval, subscription counting, and `kill()` to drop every socket (simulating a node going away).
 */
export interface StubWsUpstream {
  readonly port: number;
  readonly httpUrl: string;
  readonly wsUrl: string;
  /** Live subscriptions across all sockets. */
  subscriptions(): number;
  /** eth_subscribe calls received. */
  subscribeCalls(): number;
  /** `test_slow` requests received (each is answered 300 ms later). */
  slowCalls(): number;
  connections(): number;
  /** Emits one newHeads notification (with `padBytes` of filler in `extraData`). */
  emitHead(padBytes?: number): void;
  /**
   * Makes `number` the head and emits it; `hash` defaults to the one emitHead gives that number (so two
   * stubs agree on a block), another hash is another block at that height (a reorg).
   */
  emitHeadAt(number: number, hash?: string): void;
  /** Emits a head every `ms` until stopped. */
  startHeads(ms: number, padBytes?: number): void;
  stopHeads(): void;
  /** Drops every socket and stops listening. */
  kill(): Promise<void>;
  close(): Promise<void>;
}

export async function startStubWsUpstream(opts: { port?: number } = {}): Promise<StubWsUpstream> {
  let head = 0x100;
  let subCounter = 0;
  let subscribeCalls = 0;
  let slowCalls = 0;
  const subs = new Map<string, { ws: WebSocket; kind: string }>();
  const answer = (
    req: { id?: unknown; method?: unknown; params?: unknown },
    ws: WebSocket | null,
  ): unknown => {
    const id = req.id ?? null;
    switch (req.method) {
      case "eth_chainId":
        return { jsonrpc: "2.0", id, result: "0x7a69" };
      case "eth_blockNumber":
        return { jsonrpc: "2.0", id, result: `0x${head.toString(16)}` };
      case "eth_subscribe": {
        if (ws === null)
          return { jsonrpc: "2.0", id, error: { code: -32601, message: "no subscriptions over http" } };
        subscribeCalls++;
        const p = Array.isArray(req.params) ? req.params : [];
        if (!["newHeads", "logs", "newPendingTransactions"].includes(p[0])) {
          return { jsonrpc: "2.0", id, error: { code: -32602, message: "unknown subscription kind" } };
        }
        const sid = `0x${(++subCounter).toString(16).padStart(32, "0")}`;
        subs.set(sid, { ws, kind: String(p[0]) });
        return { jsonrpc: "2.0", id, result: sid };
      }
      case "eth_unsubscribe": {
        const p = Array.isArray(req.params) ? req.params : [];
        const s = subs.get(String(p[0]));
        const ok = s !== undefined && s.ws === ws;
        if (ok) subs.delete(String(p[0]));
        return { jsonrpc: "2.0", id, result: ok };
      }
      default:
        return { jsonrpc: "2.0", id, result: "0x" };
    }
  };
  const handle = (text: string, ws: WebSocket | null): string => {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      return JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
    }
    if (Array.isArray(v)) return JSON.stringify(v.map((r) => answer(r, ws)));
    return JSON.stringify(answer(v as object, ws));
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString();
      res.setHeader("content-type", "application/json");
      // `test_slow` answers after 300 ms (to hold a request in flight).
      if (text.includes('"test_slow"')) {
        slowCalls++;
        setTimeout(() => res.end(handle(text, null)), 300);
      } else res.end(handle(text, null));
    });
  });
  const wss = new WebSocketServer({ server });
  wss.on("connection", (ws) => {
    ws.on("message", (data) => {
      if (ws.readyState === ws.OPEN) ws.send(handle(String(data), ws));
    });
    ws.on("close", () => {
      for (const [id, s] of subs) if (s.ws === ws) subs.delete(id);
    });
    ws.on("error", () => {});
  });
  await new Promise<void>((r) => server.listen(opts.port ?? 0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  let timer: NodeJS.Timeout | undefined;
  const emitHead = (padBytes = 0, hash?: string) => {
    head++;
    const result = {
      number: `0x${head.toString(16)}`,
      hash: hash ?? `0x${head.toString(16).padStart(64, "0")}`,
      timestamp: `0x${Math.floor(Date.now() / 1000).toString(16)}`,
      emittedAtMs: Date.now(),
      extraData: `0x${"ab".repeat(padBytes)}`,
    };
    for (const [sid, s] of subs) {
      if (s.kind !== "newHeads" || s.ws.readyState !== s.ws.OPEN) continue;
      s.ws.send(
        JSON.stringify({ jsonrpc: "2.0", method: "eth_subscription", params: { subscription: sid, result } }),
      );
    }
  };
  let closed = false;
  const kill = async () => {
    if (closed) return;
    closed = true;
    if (timer !== undefined) clearInterval(timer);
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
  return {
    port,
    httpUrl: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    subscriptions: () => subs.size,
    subscribeCalls: () => subscribeCalls,
    slowCalls: () => slowCalls,
    connections: () => wss.clients.size,
    emitHead,
    emitHeadAt(number, hash) {
      head = number - 1;
      emitHead(0, hash);
    },
    startHeads(ms, padBytes = 0) {
      if (timer !== undefined) clearInterval(timer);
      timer = setInterval(() => emitHead(padBytes), ms);
    },
    stopHeads() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    },
    kill,
    close: kill,
  };
}
