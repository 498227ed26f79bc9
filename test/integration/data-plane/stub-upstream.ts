import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export type StubMode = "ok" | "error500" | "hang" | "garbage" | "empty200" | "http429" | "rpc429";

/**
 * A small JSON-RPC upstream for tests: counts calls per method, can proxy everything to a real node
 * (a counting proxy in front of anvil) or answer by itself, and can be switched to fail in several ways.
 */
export class StubUpstream {
  mode: StubMode = "ok";
  /** Answer batches with a single error object, like a node that does not take batches. */
  refuseBatches = false;
  /** Extra latency per exchange. */
  delayMs = 0;
  /** While set, exchanges carrying `gateMethod` wait for it before they are answered (see hold). */
  private gate: Promise<void> | undefined;
  private gateMethod = "";
  /** Calls of the held method in exchanges hold() held so far (a batch's elements count each). */
  held = 0;
  /** Extra latency of exchanges carrying these methods (e.g. a slow eth_getLogs next to fast eth_chainId). */
  readonly methodDelayMs = new Map<string, number>();
  /** `Retry-After` header value in mode http429 ("" = none). */
  retryAfter = "";
  /** Request bodies larger than this many bytes are answered 413 before parsing, as geth does (0 = no cap). */
  maxBodyBytes = 0;
  /** Bodies answered 413 because of maxBodyBytes; refusedSingles: those that were not batches. */
  refusedTooLarge = 0;
  refusedSingles = 0;
  /** Most calls seen in one batch body. */
  largestBatch = 0;
  head = 100;
  /**
   * A node behind (or lying about) its head: eth_blockNumber / chain_getHeader are answered with `head`
   * even when proxying, and calls `nullWhen` matches are answered null (a lagging node's "no such block").
   * With either set, a proxied batch is split: local answers here, the rest sent on one by one.
   */
  fixedHead = false;
  nullWhen: ((method: string, params: unknown) => boolean) | undefined;
  /** Exchanges whose connection closed before they were answered (a cancelled hedge's loser). */
  closedUnanswered = 0;
  chainIdHex = "0x7a69";
  /**
   * Answers a single (non-batch) call by itself when it returns a JSON-RPC response object (its id is set
   * here), before any proxying; undefined = as usual. For faults on some calls only (a node refusing
   * eth_getLogs ranges over N blocks, failing one sub-range).
   */
  intercept: ((call: { method?: string; params?: unknown }) => object | undefined) | undefined;
  readonly calls = new Map<string, number>();
  /** Every request body received, as sent (cleared by reset). */
  readonly bodies: string[] = [];
  /** The traceparent header of every exchange that had one, with the body it came with (cleared by reset). */
  readonly traceparents: { header: string; body: string }[] = [];
  /** Calls per exact `method params-JSON` (batch elements one each), to count one call among its kind. */
  readonly exact = new Map<string, number>();
  exchanges = 0;
  /** Calls being answered now per method, and the most at once since reset() (batch elements count each). */
  private readonly inFlight = new Map<string, number>();
  private readonly maxInFlight = new Map<string, number>();
  private server: Server | undefined;
  private readonly sockets = new Set<import("node:net").Socket>();
  url = "";

  constructor(private readonly proxyTo?: string) {}

  count(method: string): number {
    return this.calls.get(method) ?? 0;
  }

  /** Calls of `method` with exactly these params (compared as JSON text). */
  countExact(method: string, params: unknown): number {
    return this.exact.get(`${method} ${JSON.stringify(params)}`) ?? 0;
  }

  reset(): void {
    this.calls.clear();
    this.bodies.length = 0;
    this.traceparents.length = 0;
    this.exact.clear();
    this.exchanges = 0;
    this.closedUnanswered = 0;
    this.refusedTooLarge = 0;
    this.refusedSingles = 0;
    this.largestBatch = 0;
    this.maxInFlight.clear();
  }

  /**
   * Holds every exchange carrying `method` that arrives from now on at the node until the returned
   * function is called (health probes and other calls pass): a test knows what is in flight without
   * relying on how long a delay lasts.
   */
  hold(method: string): () => void {
    this.gateMethod = method;
    this.held = 0;
    let release = () => {};
    this.gate = new Promise<void>((r) => {
      release = r;
    });
    return () => {
      this.gate = undefined;
      release();
    };
  }

  /** Most calls of `method` being answered at once since reset(). */
  peakInFlight(method: string): number {
    return this.maxInFlight.get(method) ?? 0;
  }

  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => {
      res.on("close", () => {
        if (!res.writableFinished) this.closedUnanswered++;
      });
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const tp = req.headers.traceparent;
        if (typeof tp === "string") this.traceparents.push({ header: tp, body });
        void this.handle(body, res);
      });
    });
    this.server.on("connection", (s) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => this.server!.listen(port, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  private async handle(body: string, res: import("node:http").ServerResponse): Promise<void> {
    this.exchanges++;
    this.bodies.push(body);
    if (this.maxBodyBytes > 0 && Buffer.byteLength(body) > this.maxBodyBytes) {
      this.refusedTooLarge++;
      if (!body.startsWith("[")) this.refusedSingles++;
      res.writeHead(413, { "content-type": "text/plain" }).end("request body too large");
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
    const list = (Array.isArray(parsed) ? parsed : [parsed]) as {
      method?: string;
      id?: unknown;
      params?: unknown;
    }[];
    const methods: string[] = [];
    for (const r of list) {
      const m = r?.method;
      if (!m) continue;
      methods.push(m);
      this.calls.set(m, (this.calls.get(m) ?? 0) + 1);
      const k = `${m} ${JSON.stringify(r.params)}`;
      this.exact.set(k, (this.exact.get(k) ?? 0) + 1);
      const now = (this.inFlight.get(m) ?? 0) + 1;
      this.inFlight.set(m, now);
      if (now > (this.maxInFlight.get(m) ?? 0)) this.maxInFlight.set(m, now);
    }
    res.once("close", () => {
      for (const m of methods) this.inFlight.set(m, this.inFlight.get(m)! - 1);
    });
    if (Array.isArray(parsed)) this.largestBatch = Math.max(this.largestBatch, parsed.length);
    let delay = this.delayMs;
    for (const r of list) delay = Math.max(delay, this.methodDelayMs.get(r?.method ?? "") ?? 0);
    if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    if (this.gate !== undefined && methods.includes(this.gateMethod)) {
      for (const m of methods) if (m === this.gateMethod) this.held++;
      await this.gate;
    }
    if (this.mode === "hang") return;
    if (this.mode === "http429") {
      const headers: Record<string, string> = { "content-type": "text/plain" };
      if (this.retryAfter !== "") headers["retry-after"] = this.retryAfter;
      res.writeHead(429, headers).end("too many requests");
      return;
    }
    if (this.mode === "rpc429") {
      const answers = list.map((r) => ({
        jsonrpc: "2.0",
        id: r?.id ?? null,
        error: { code: -32005, message: "project ID request rate exceeded" },
      }));
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
      return;
    }
    if (this.mode === "error500") {
      res.writeHead(500, { "content-type": "text/plain" }).end("internal error");
      return;
    }
    if (this.mode === "garbage") {
      res.writeHead(200, { "content-type": "application/json" }).end("<html>not json");
      return;
    }
    if (this.mode === "empty200") {
      res.writeHead(200, { "content-type": "application/json" }).end();
      return;
    }
    const own =
      this.intercept !== undefined && !Array.isArray(parsed) ? this.intercept(list[0] ?? {}) : undefined;
    if (own !== undefined) {
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ jsonrpc: "2.0", id: list[0]?.id ?? null, ...own }));
      return;
    }
    if (this.refuseBatches && Array.isArray(parsed)) {
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(
          '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}',
        );
      return;
    }
    if (this.proxyTo !== undefined && (this.fixedHead || this.nullWhen !== undefined)) {
      const answers = await Promise.all(list.map((r) => this.answerOrProxy(r)));
      if (res.destroyed) return;
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
      return;
    }
    if (this.proxyTo !== undefined) {
      const up = await fetch(this.proxyTo, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      res.writeHead(up.status, { "content-type": "application/json" }).end(await up.text());
      return;
    }
    const answers = list.map((r) => this.answer(r));
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
  }

  /** One call of a proxying stub with fixedHead / nullWhen: answered here when they say so, else proxied. */
  private async answerOrProxy(r: { method?: string; id?: unknown; params?: unknown }): Promise<unknown> {
    const id = r?.id ?? null;
    const method = r?.method ?? "";
    const headCall =
      method === "eth_blockNumber" ||
      (method === "chain_getHeader" && !(Array.isArray(r?.params) && r.params.length > 0));
    if (this.fixedHead && headCall) return this.answer(r);
    if (this.nullWhen?.(method, r?.params)) return { jsonrpc: "2.0", id, result: null };
    const up = await fetch(this.proxyTo!, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(r),
    });
    return JSON.parse(await up.text()) as unknown;
  }

  private answer(r: { method?: string; id?: unknown; params?: unknown }): unknown {
    const id = r?.id ?? null;
    switch (r?.method) {
      case "eth_chainId":
        return { jsonrpc: "2.0", id, result: this.chainIdHex };
      case "eth_blockNumber":
        return { jsonrpc: "2.0", id, result: `0x${this.head.toString(16)}` };
      case "chain_getHeader":
        return { jsonrpc: "2.0", id, result: { number: `0x${this.head.toString(16)}` } };
      case "stub_error":
        return { jsonrpc: "2.0", id, error: { code: -32000, message: "execution reverted" } };
      case "stub_invalidParams":
        return { jsonrpc: "2.0", id, error: { code: -32602, message: "invalid params" } };
      case "stub_null":
        return { jsonrpc: "2.0", id, result: null };
      default:
        return { jsonrpc: "2.0", id, result: { method: r?.method, params: r?.params ?? null } };
    }
  }

  /** Closes the listener and every open connection (simulates the node dying). */
  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = undefined;
  }
}
