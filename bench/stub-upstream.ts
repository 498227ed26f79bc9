/**
 * Benchmark stub upstream: a JSON-RPC "node" that answers instantly with canned results, so a benchmark
 * measures the proxy in front of it, not a node. Answers eth_blockNumber, eth_chainId, net_version,
 * eth_getBalance, eth_call (and `0x` for anything else), echoing each id; handles batches; keep-alive;
 * the same over WebSocket (uws implementation).
 *
 * Two implementations (the bench uses the faster one, see README in bench/run.ts):
 *   uws  - uWebSockets.js (default)
 *   node - node:http
 *
 *   node dist/bench/stub-upstream.js [--port N] [--impl uws|node]     prints `listening on <port>`
 *
 * A slow tail for the hedging bench (uws only): `--slow-percent P --slow-ms M` answers P% of HTTP exchanges
 * (chosen at random) after M ms, the others at once.
 */

import uWS from "uWebSockets.js";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const CANNED: Record<string, string> = {
  eth_blockNumber: '"0x1234"',
  eth_chainId: '"0x1"',
  net_version: '"1"',
  eth_getBalance: '"0xde0b6b3a7640000"',
  eth_call: '"0x0000000000000000000000000000000000000000000000000000000000000001"',
  eth_gasPrice: '"0x3b9aca00"',
};

function answerOne(req: unknown): string | null {
  if (typeof req !== "object" || req === null) {
    return '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}';
  }
  const r = req as { id?: unknown; method?: unknown };
  if (!("id" in r)) return null;
  const result = CANNED[String(r.method)] ?? '"0x"';
  return `{"jsonrpc":"2.0","id":${JSON.stringify(r.id)},"result":${result}}`;
}

/** The response body for one HTTP request body. */
export function answer(body: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}';
  }
  if (Array.isArray(parsed)) {
    const parts: string[] = [];
    for (const r of parsed) {
      const a = answerOne(r);
      if (a !== null) parts.push(a);
    }
    return `[${parts.join(",")}]`;
  }
  return answerOne(parsed) ?? "";
}

export interface StubUpstream {
  port: number;
  close(): Promise<void>;
}

export async function startStubUpstream(
  opts: { port?: number; impl?: "uws" | "node"; slowPercent?: number; slowMs?: number } = {},
): Promise<StubUpstream> {
  const slowShare = (opts.slowPercent ?? 0) / 100;
  const slowMs = opts.slowMs ?? 0;
  if ((opts.impl ?? "uws") === "node") {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const out = answer(Buffer.concat(chunks).toString("utf8"));
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) });
        res.end(out);
      });
    });
    server.keepAliveTimeout = 120_000;
    await new Promise<void>((resolve) => server.listen(opts.port ?? 0, "127.0.0.1", resolve));
    return {
      port: (server.address() as AddressInfo).port,
      close: () =>
        new Promise((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    };
  }

  const app = uWS.App();
  // JSON-RPC over WebSocket too (one text frame per request or batch), for the upstream-transport bench.
  app.ws("/*", {
    maxPayloadLength: 16 * 1024 * 1024,
    // uWS drops frames past this much unsent data; a bench must never lose answers.
    maxBackpressure: 1024 * 1024 * 1024,
    message: (ws, message) => {
      const out = answer(Buffer.from(message).toString("utf8"));
      if (out !== "") ws.send(out, false);
    },
  });
  app.any("/*", (res, _req) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const chunks: Buffer[] = [];
    res.onData((ab, isLast) => {
      chunks.push(Buffer.from(ab.slice(0)));
      if (!isLast) return;
      if (aborted) return;
      const out = answer(Buffer.concat(chunks).toString("utf8"));
      const send = () => {
        // An exchange the gateway cancelled (a hedge's loser) is closed before its answer is due.
        if (aborted) return;
        res.cork(() => {
          res.writeHeader("content-type", "application/json").end(out);
        });
      };
      if (slowShare > 0 && Math.random() < slowShare) setTimeout(send, slowMs);
      else send();
    });
  });
  const socket = await new Promise<uWS.us_listen_socket>((resolve, reject) =>
    app.listen("127.0.0.1", opts.port ?? 0, (s) =>
      s ? resolve(s) : reject(new Error("stub: listen failed")),
    ),
  );
  return {
    port: uWS.us_socket_local_port(socket),
    async close() {
      uWS.us_listen_socket_close(socket);
    },
  };
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const arg = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const impl = (arg("--impl") ?? process.env.STUB_IMPL ?? "uws") as "uws" | "node";
  startStubUpstream({
    port: Number(arg("--port") ?? process.env.STUB_PORT ?? 0),
    impl,
    slowPercent: Number(arg("--slow-percent") ?? 0),
    slowMs: Number(arg("--slow-ms") ?? 0),
  }).then(
    (stub) => {
      process.stdout.write(`stub upstream (${impl}) listening on ${stub.port}\n`);
      const stop = () => void stub.close().then(() => process.exit(0));
      process.on("SIGTERM", stop);
      process.on("SIGINT", stop);
    },
    (e: unknown) => {
      process.stderr.write(`stub upstream: ${String(e)}\n`);
      process.exit(1);
    },
  );
}
