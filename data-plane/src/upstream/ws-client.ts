import WebSocket from "ws";
import { type ErrorRow, responseTooLargeRow } from "../../../shared/src/jsonrpc/errors";
import { InFlightMap } from "../memory/in-flight-map";

/** What one upstream WebSocket request ended with. */
export type WsCallResult =
  | { ok: true; result: unknown }
  | { ok: false; nodeError: { code?: unknown; message?: unknown; data?: unknown } }
  | { ok: false; nodeError?: undefined; failure: "timeout" | "unreachable" | "too_large" };

/** A subscription notification as the node sent it (`params.subscription` is the node's id). */
export interface UpstreamNotification {
  readonly method: string;
  readonly subscription: string;
  readonly result: unknown;
}

export interface UpstreamWsClientOptions {
  /** Per request (subscribe / unsubscribe / call). */
  timeoutMs: number;
  /** A ping is sent at this interval; no pong by the next one terminates the socket. */
  pingIntervalMs: number;
  /** How long notifications for a subscription id not (yet) known are kept (they can overtake the answer). */
  orphanTtlMs?: number;
  /**
   * Largest message accepted (UPSTREAM_MAX_RESPONSE_BYTES, default 32 MiB). ws refuses a frame from its declared
   * length and a fragmented message once its fragments add up past the cap, so at most the cap is buffered;
   * then it closes the socket (1009) and the hub reconnects.
   */
  maxPayloadBytes?: number;
}

interface Pending {
  readonly resolve: (r: WsCallResult) => void;
  readonly timer: NodeJS.Timeout;
}

const MAX_ORPHANS = 64;

/**
 * One persistent JSON-RPC WebSocket to an upstream node (ws package). Request ids are the client's own
 * (numeric, per socket) and mapped back; notifications are handed to `onNotification`. Never throws: a
 * dropped socket answers every in-flight request with `unreachable` and calls `onClose` once.
 */
export class UpstreamWsClient {
  private ws: WebSocket | undefined;
  private nextId = 1;
  private readonly pending = new InFlightMap<number, Pending>();
  private pingTimer: NodeJS.Timeout | undefined;
  private awaitingPong = false;
  private closed = false;
  /** The socket is being dropped because a message crossed maxPayloadBytes. */
  private oversize = false;
  readonly tooLargeRow: ErrorRow;
  /** Notifications whose subscription id nobody claimed yet (answer and first notification can race). */
  private readonly orphans = new Map<string, { at: number; items: UpstreamNotification[] }>();

  onNotification: (n: UpstreamNotification) => boolean = () => false;
  onClose: () => void = () => {};

  constructor(
    readonly upstreamId: string,
    readonly url: string,
    private readonly opts: UpstreamWsClientOptions,
  ) {
    this.tooLargeRow = responseTooLargeRow(this.maxPayload);
  }

  private get maxPayload(): number {
    return this.opts.maxPayloadBytes ?? 32 * 1024 * 1024;
  }

  get isOpen(): boolean {
    return !this.closed && this.ws?.readyState === WebSocket.OPEN;
  }

  /** Connects; resolves false when the socket could not be opened within the timeout. */
  open(): Promise<boolean> {
    return new Promise((resolve) => {
      let settled = false;
      const ws = new WebSocket(this.url, {
        handshakeTimeout: this.opts.timeoutMs,
        perMessageDeflate: false,
        maxPayload: this.maxPayload,
      });
      this.ws = ws;
      ws.on("open", () => {
        settled = true;
        this.pingTimer = setInterval(() => this.ping(), this.opts.pingIntervalMs);
        this.pingTimer.unref();
        resolve(true);
      });
      ws.on("message", (data, isBinary) =>
        this.onMessage(isBinary ? Buffer.from(data as Buffer).toString() : String(data)),
      );
      ws.on("pong", () => {
        this.awaitingPong = false;
      });
      ws.on("error", (err) => {
        if ((err as { code?: string }).code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") this.oversize = true;
      });
      ws.on("close", () => {
        if (!settled) {
          settled = true;
          resolve(false);
        }
        this.teardown();
      });
    });
  }

  private ping(): void {
    const ws = this.ws;
    if (ws === undefined || ws.readyState !== WebSocket.OPEN) return;
    if (this.awaitingPong) {
      ws.terminate();
      return;
    }
    this.awaitingPong = true;
    ws.ping();
  }

  /** Sends one call and resolves with the node's answer. */
  call(method: string, params: unknown): Promise<WsCallResult> {
    const ws = this.ws;
    if (this.closed || ws === undefined || ws.readyState !== WebSocket.OPEN) {
      return Promise.resolve({ ok: false, failure: "unreachable" });
    }
    const id = this.nextId++;
    if (this.nextId > 0x3fffffff) this.nextId = 1;
    const body =
      params === undefined
        ? `{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)}}`
        : `{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)},"params":${JSON.stringify(params)}}`;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve({ ok: false, failure: "timeout" });
      }, this.opts.timeoutMs);
      this.pending.set(id, { resolve, timer });
      ws.send(body);
    });
  }

  /** Hands back (and forgets) notifications that arrived for `subscription` before anyone claimed it. */
  takeOrphans(subscription: string): UpstreamNotification[] {
    const o = this.orphans.get(subscription);
    if (o === undefined) return [];
    this.orphans.delete(subscription);
    return o.items;
  }

  private onMessage(text: string): void {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return;
    }
    if (Array.isArray(value)) {
      for (const v of value) this.onObject(v);
    } else {
      this.onObject(value);
    }
  }

  private onObject(v: unknown): void {
    if (v === null || typeof v !== "object") return;
    const o = v as Record<string, unknown>;
    if (typeof o.id === "number") {
      const p = this.pending.get(o.id);
      if (p === undefined) return;
      this.pending.delete(o.id);
      clearTimeout(p.timer);
      if (o.error !== undefined && o.error !== null && typeof o.error === "object") {
        p.resolve({ ok: false, nodeError: o.error as { code?: unknown } });
      } else {
        p.resolve({ ok: true, result: o.result });
      }
      return;
    }
    if (typeof o.method === "string" && o.params !== null && typeof o.params === "object") {
      const params = o.params as { subscription?: unknown; result?: unknown };
      const sub = params.subscription;
      if (typeof sub !== "string" && typeof sub !== "number") return;
      const n: UpstreamNotification = { method: o.method, subscription: String(sub), result: params.result };
      if (!this.onNotification(n)) this.keepOrphan(n);
    }
  }

  private keepOrphan(n: UpstreamNotification): void {
    const now = Date.now();
    const ttl = this.opts.orphanTtlMs ?? 5_000;
    for (const [k, o] of this.orphans) if (now - o.at > ttl) this.orphans.delete(k);
    let o = this.orphans.get(n.subscription);
    if (o === undefined) {
      if (this.orphans.size >= MAX_ORPHANS) return;
      o = { at: now, items: [] };
      this.orphans.set(n.subscription, o);
    }
    if (o.items.length < MAX_ORPHANS) o.items.push(n);
  }

  private teardown(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.pingTimer !== undefined) clearInterval(this.pingTimer);
    const pending = [...this.pending.values()];
    this.pending.clear();
    this.orphans.clear();
    // Which call the oversized message answered is unknowable (it was never read): every call in flight on
    // the socket fails with the cap row, which is at least the truth about why the socket went away.
    const failure = this.oversize ? "too_large" : "unreachable";
    for (const p of pending) {
      clearTimeout(p.timer);
      p.resolve({ ok: false, failure });
    }
    this.onClose();
  }

  /** Closes the socket (no reconnect; `onClose` still runs once). */
  close(): void {
    const ws = this.ws;
    if (ws !== undefined && ws.readyState !== WebSocket.CLOSED) ws.terminate();
    this.teardown();
  }
}
