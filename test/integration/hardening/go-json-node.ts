import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { GoObject, type GoValue, goField, goParse, goPlain } from "../../helpers/go-json";

/** What the stand-in would have run: the method and, for eth_getLogs / eth_newFilter, the filter's bounds. */
export interface Ran {
  readonly method: string;
  readonly fromBlock?: unknown;
  readonly toBlock?: unknown;
  readonly blockHash?: unknown;
}

const LOG_METHODS = new Set(["eth_getLogs", "eth_newFilter"]);

/**
 * A stand-in for a Go JSON-RPC node (geth, erigon, bor): it decodes each request object and each
 * eth_getLogs / eth_newFilter filter as Go's encoding/json does (test/helpers/go-json.ts: member names
 * folded, the last match winning), records what it would have run, and answers plausibly. It exists
 * because anvil, the node the tests can run here, decodes strictly and so cannot show a request that a
 * Go node reads differently from the gateway. The gateway's own probes (eth_blockNumber, and
 * eth_getBlockByNumber for finality) are answered like any call.
 */
export class GoJsonNode {
  /** Every call decoded, in arrival order (batch elements one each). */
  readonly ran: Ran[] = [];
  /** Request bodies as received. */
  readonly bodies: string[] = [];
  head = 0x1000;
  url = "";
  private server: Server | undefined;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        this.bodies.push(body);
        let parsed: GoValue;
        try {
          parsed = goParse(body);
        } catch {
          res.writeHead(200, { "content-type": "application/json" });
          res.end('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}');
          return;
        }
        const answers = (Array.isArray(parsed) ? parsed : [parsed]).map((o) => this.run(o));
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** Calls run since `from` (an index into `ran`) that were not the gateway's own health probes. */
  since(from: number): Ran[] {
    return this.ran
      .slice(from)
      .filter((r) => r.method !== "eth_blockNumber" && r.method !== "eth_getBlockByNumber");
  }

  private run(o: GoValue): unknown {
    const id = goPlain(goField(o, "id")) ?? null;
    const method = goField(o, "method");
    if (!(o instanceof GoObject) || typeof method !== "string") {
      return { jsonrpc: "2.0", id, error: { code: -32600, message: "invalid request" } };
    }
    const params = goField(o, "params");
    if (LOG_METHODS.has(method)) {
      const filter = Array.isArray(params) ? params[0] : undefined;
      this.ran.push({
        method,
        fromBlock: goPlain(goField(filter, "fromBlock")),
        toBlock: goPlain(goField(filter, "toBlock")),
        blockHash: goPlain(goField(filter, "blockHash")),
      });
    } else {
      this.ran.push({ method });
    }
    return { jsonrpc: "2.0", id, result: this.answer(method) };
  }

  private answer(method: string): unknown {
    switch (method) {
      case "eth_chainId":
        return "0x7a69";
      case "eth_blockNumber":
        return `0x${this.head.toString(16)}`;
      case "eth_getLogs":
        return [];
      case "eth_newFilter":
        return "0x1";
      default:
        return { ran: method };
    }
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
