import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";

/**
 * A hostile-but-correct upstream (HTTP and WebSocket JSON-RPC on one loopback port). Ordinary calls get small
 * answers; `eth_getLogs` with `[{}, { "hugeBytes": N }]` gets a valid answer whose result is N bytes, generated
 * on the fly in 1 MiB chunks with backpressure (never held in memory), optionally with a Content-Length.
 * Over WebSocket, `eth_subscribe` `["logs", { "hugeBytes": N }]` answers with one N-byte message sent as
 * 1 MiB fragments. (The options ride in a second param: the gateway forwards a filter object with its own
 * members only, docs/contracts.md "What reaches the node".) `holdMs` in the same object holds the answer's last bytes back that long (so that many
 * answers are half-read by the gateway at once). Records how much of each huge answer it managed to send
 * before the reader hung up.
 * `eth_call` with `[{ "sizedBytes": N }, ...]` gets an N-byte result built in memory (for coalescing tests).
 */
export interface HugeUpstream {
  readonly httpUrl: string;
  readonly wsUrl: string;
  /** Per huge answer: bytes written, and whether it was complete when the connection closed. */
  readonly huge: { written: number; complete: boolean }[];
  /** Number of eth_call elements of each HTTP request that carried any. */
  readonly ethCallBatches: number[];
  /** Resolves once every huge answer started so far has ended (finished or cut off). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

const CHUNK = 1024 * 1024;

interface RpcReq {
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

function hugeBytesOf(req: RpcReq, index: number): number {
  const p = Array.isArray(req.params) ? req.params[index] : undefined;
  const n = (p as { hugeBytes?: unknown } | undefined)?.hugeBytes;
  return typeof n === "number" ? n : 0;
}

function sizedBytesOf(req: RpcReq): number {
  const p = Array.isArray(req.params) ? req.params[0] : undefined;
  const n = (p as { sizedBytes?: unknown } | undefined)?.sizedBytes;
  return typeof n === "number" ? n : 0;
}

function small(req: RpcReq): unknown {
  const id = req.id ?? null;
  switch (req.method) {
    case "eth_chainId":
      return { jsonrpc: "2.0", id, result: "0x7a69" };
    case "eth_blockNumber":
      return { jsonrpc: "2.0", id, result: "0x100" };
    case "eth_getLogs":
      return { jsonrpc: "2.0", id, result: [] };
    case "eth_call":
      return { jsonrpc: "2.0", id, result: `0x${"b".repeat(sizedBytesOf(req))}` };
    default:
      return { jsonrpc: "2.0", id, error: { code: -32601, message: "Method not found" } };
  }
}

export async function startHugeUpstream(): Promise<HugeUpstream> {
  const huge: { written: number; complete: boolean }[] = [];
  const ethCallBatches: number[] = [];
  const pending = new Set<Promise<void>>();
  const track = (p: Promise<void>) => {
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };

  /** Writes `prefix`, `size` bytes of 'a', `suffix` through `write` (false = wait for `drain`). */
  const stream = async (
    size: number,
    prefix: string,
    suffix: string,
    write: (b: Buffer | string, last: boolean) => Promise<boolean>,
    holdMs = 0,
  ) => {
    const entry = { written: 0, complete: false };
    huge.push(entry);
    const filler = Buffer.alloc(CHUNK, 0x61);
    if (!(await write(prefix, false))) return;
    entry.written += prefix.length;
    let left = size;
    while (left > 0) {
      const n = Math.min(left, CHUNK);
      if (!(await write(n === CHUNK ? filler : filler.subarray(0, n), false))) return;
      entry.written += n;
      left -= n;
    }
    if (holdMs > 0) await new Promise((r) => setTimeout(r, holdMs));
    if (!(await write(suffix, true))) return;
    entry.written += suffix.length;
    entry.complete = true;
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", () => {
      let body: RpcReq | RpcReq[];
      try {
        body = JSON.parse(Buffer.concat(chunks).toString());
      } catch {
        res.writeHead(400).end();
        return;
      }
      const list = Array.isArray(body) ? body : [body];
      const calls = list.filter((r) => r?.method === "eth_call").length;
      if (calls > 0) ethCallBatches.push(calls);
      const first = list[0] ?? {};
      const size = first.method === "eth_getLogs" ? hugeBytesOf(first, 1) : 0;
      if (size === 0) {
        const out = Array.isArray(body) ? list.map(small) : small(first);
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(out));
        return;
      }
      const opts = (Array.isArray(first.params) ? first.params[1] : {}) ?? {};
      const declare = opts.declareLength === true;
      const holdMs = typeof opts.holdMs === "number" ? opts.holdMs : 0;
      const open = Array.isArray(body) ? "[" : "";
      const close = Array.isArray(body) ? "]" : "";
      const prefix = `${open}{"jsonrpc":"2.0","id":${JSON.stringify(first.id ?? null)},"result":"0x`;
      const suffix = `"}${close}`;
      res.writeHead(200, {
        "content-type": "application/json",
        ...(declare ? { "content-length": String(prefix.length + size + suffix.length) } : {}),
      });
      let gone = false;
      res.on("close", () => {
        gone = true;
      });
      track(
        stream(
          size,
          prefix,
          suffix,
          (b, last) => {
            if (gone || res.destroyed) return Promise.resolve(false);
            if (last) {
              res.end(b);
              return Promise.resolve(true);
            }
            if (res.write(b)) return Promise.resolve(true);
            return new Promise((resolve) => {
              const onDrain = () => {
                res.off("close", onClose);
                resolve(true);
              };
              const onClose = () => {
                res.off("drain", onDrain);
                resolve(false);
              };
              res.once("drain", onDrain);
              res.once("close", onClose);
            });
          },
          holdMs,
        ),
      );
    });
  });

  const wss = new WebSocketServer({ server, perMessageDeflate: false });
  let subCounter = 0;
  wss.on("connection", (ws: WebSocket) => {
    ws.on("error", () => {});
    ws.on("message", (data) => {
      let req: RpcReq;
      try {
        req = JSON.parse(String(data));
      } catch {
        return;
      }
      if (req.method === "eth_subscribe") {
        const size = hugeBytesOf(req, 1);
        if (size === 0) {
          ws.send(JSON.stringify({ jsonrpc: "2.0", id: req.id, result: `0x${(++subCounter).toString(16)}` }));
          return;
        }
        const prefix = `{"jsonrpc":"2.0","id":${JSON.stringify(req.id)},"result":"0x`;
        track(
          stream(size, prefix, '"}', (b, last) => {
            if (ws.readyState !== ws.OPEN) return Promise.resolve(false);
            return new Promise((resolve) =>
              ws.send(b, { fin: last, binary: false }, (err) => resolve(!err && ws.readyState === ws.OPEN)),
            );
          }),
        );
        return;
      }
      if (req.method === "eth_unsubscribe") {
        ws.send(JSON.stringify({ jsonrpc: "2.0", id: req.id, result: true }));
        return;
      }
      ws.send(JSON.stringify(small(req)));
    });
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    httpUrl: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    huge,
    ethCallBatches,
    async settled() {
      await Promise.all([...pending]);
    },
    async close() {
      for (const c of wss.clients) c.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
