import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A stand-in EVM node for the eth_getLogs split bench (bench/logs-split.ts): a chain of `blocks` blocks with
 * `perBlock` logs in every `every`-th block, whose eth_getLogs costs what a node's does, in proportion to the
 * range it scans: `baseMs` + `perBlockUs` per block of the range, on one of `workers` workers (a node's
 * cores / disk queue: more calls at once wait for a free worker). Used because anvil cannot build a
 * 50,000-block history in bench time (its per-block mining cost grows with the chain: measured 2 ms per
 * block at the start, 14 ms per block by block 10,000, on this machine). Two instances with the same
 * parameters serve byte-identical logs, as two archive nodes of one chain.
 *
 * Logs are shaped as nodes write them (address, topics, data, blockHash, blockNumber, transactionHash,
 * transactionIndex, logIndex, removed), made once at start; answers are assembled from those texts.
 */
export interface LogsNodeOptions {
  blocks: number;
  every: number;
  perBlock: number;
  baseMs: number;
  perBlockUs: number;
  workers: number;
}

export interface LogsNode {
  url: string;
  /** eth_getLogs calls answered since start. */
  getLogsCalls(): number;
  close(): Promise<void>;
}

const word = (n: number) => n.toString(16).padStart(64, "0");

export async function startLogsNode(o: LogsNodeOptions): Promise<LogsNode> {
  const head = o.blocks - 1;
  /** Heights of the blocks holding logs (ascending) and each one's logs as JSON text (joined). */
  const logBlocks: number[] = [];
  const logTexts: string[] = [];
  for (let n = 1; n <= head; n += o.every) {
    const items: string[] = [];
    for (let i = 0; i < o.perBlock; i++) {
      items.push(
        `{"address":"0x5fbdb2315678afecb367f032d93f642f64180aa3","topics":["0x${"ab".repeat(32)}","0x${word(i)}"],"data":"0x${word(n)}","blockHash":"0x${word(n * 7919)}","blockNumber":"0x${n.toString(16)}","transactionHash":"0x${word(n * 104729 + i)}","transactionIndex":"0x${i.toString(16)}","logIndex":"0x${i.toString(16)}","removed":false}`,
      );
    }
    logBlocks.push(n);
    logTexts.push(items.join(","));
  }

  let busy = 0;
  const waiting: (() => void)[] = [];
  let calls = 0;
  /** Holds one of the node's workers for `ms`. */
  const work = async (ms: number): Promise<void> => {
    if (busy >= o.workers) await new Promise<void>((r) => waiting.push(r));
    else busy++;
    await new Promise((r) => setTimeout(r, ms));
    const next = waiting.shift();
    if (next !== undefined) next();
    else busy--;
  };

  const height = (v: unknown): number => {
    if (v === undefined || v === null || v === "latest" || v === "pending") return head;
    if (v === "earliest") return 0;
    return Number.parseInt(String(v), 16);
  };

  const getLogs = async (params: unknown): Promise<string> => {
    const f = ((params as unknown[] | undefined)?.[0] ?? {}) as { fromBlock?: unknown; toBlock?: unknown };
    const from = height(f.fromBlock ?? "latest");
    const to = height(f.toBlock);
    if (!(from >= 0 && to <= head && from <= to)) {
      return '"error":{"code":-32602,"message":"invalid block range params"}';
    }
    calls++;
    await work(o.baseMs + ((to - from + 1) * o.perBlockUs) / 1000);
    let lo = 0;
    while (lo < logBlocks.length && logBlocks[lo]! < from) lo++;
    const parts: string[] = [];
    for (let i = lo; i < logBlocks.length && logBlocks[i]! <= to; i++) parts.push(logTexts[i]!);
    return `"result":[${parts.join(",")}]`;
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        let r: { id?: unknown; method?: string; params?: unknown };
        try {
          r = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          res.writeHead(400).end();
          return;
        }
        let body: string;
        if (r.method === "eth_getLogs") body = await getLogs(r.params);
        else if (r.method === "eth_blockNumber") body = `"result":"0x${head.toString(16)}"`;
        else if (r.method === "eth_chainId") body = '"result":"0x7a69"';
        else body = '"error":{"code":-32601,"message":"method not found"}';
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(`{"jsonrpc":"2.0","id":${JSON.stringify(r.id ?? null)},${body}}`);
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    getLogsCalls: () => calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
