import { type Dispatcher, Pool } from "undici";
import { type ErrorRow, responseTooLargeRow } from "../../../shared/src/jsonrpc/errors";
import type { UpstreamRecord } from "../../../shared/src/redis/records";

/** `too_large`: the answer crossed maxResponseBytes (the call's fault, not the node's: no breaker count). */
export type ExchangeFailure = "timeout" | "unreachable" | "bad" | "too_large";
export type ExchangeResult = { ok: true; text: string } | { ok: false; failure: ExchangeFailure };

export interface UpstreamOptions {
  timeoutMs: number;
  connections: number;
  breakerThreshold: number;
  breakerCooldownMs: number;
  /** Most bytes buffered from one answer (UPSTREAM_MAX_RESPONSE_BYTES); default 32 MiB. */
  maxResponseBytes?: number;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

const HEADERS = { "content-type": "application/json", accept: "application/json" };
const EWMA_ALPHA = 0.2;

/**
 * One upstream node: a keep-alive connection pool plus the health state the selector reads (latency EWMA,
 * error-rate EWMA, in-flight count, head height, circuit breaker).
 *
 * Breaker: closed until `breakerThreshold` consecutive failures, then open for `breakerCooldownMs`; after
 * that one half-open probe (a request or a health check) is let through: success closes it, failure
 * re-opens it for another cooldown.
 */
export class Upstream {
  readonly id: string;
  readonly httpUrl: string;
  weight: number;
  inFlight = 0;
  latencyEwmaMs = 0;
  errorRateEwma = 0;
  /** Last head height seen by a health check; -1 = unknown. */
  head = -1;
  consecutiveFailures = 0;
  private openUntil = 0;
  private probing = false;
  private readonly pool: Pool;
  private readonly path: string;
  readonly maxResponseBytes: number;
  /** The error row of an answer over the cap (one object per upstream, none per call). */
  readonly tooLargeRow: ErrorRow;

  constructor(
    record: UpstreamRecord,
    private readonly opts: UpstreamOptions,
  ) {
    this.id = record.id;
    this.httpUrl = record.httpUrl;
    this.weight = record.weight;
    this.maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.tooLargeRow = responseTooLargeRow(this.maxResponseBytes);
    const url = new URL(record.httpUrl);
    this.path = `${url.pathname}${url.search}` || "/";
    this.pool = new Pool(url.origin, {
      connections: opts.connections,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      connectTimeout: Math.min(opts.timeoutMs, 5_000),
    });
  }

  /** Whether the breaker lets a request through now (claims the half-open probe when due). */
  available(nowMs: number): boolean {
    if (this.consecutiveFailures < this.opts.breakerThreshold) return true;
    if (nowMs < this.openUntil || this.probing) return false;
    return true;
  }

  get breakerOpen(): boolean {
    return this.consecutiveFailures >= this.opts.breakerThreshold;
  }

  /**
   * POSTs one JSON-RPC body. Never throws. Uses undici's dispatch API with a small handler (no Readable
   * stream per response), which is markedly cheaper than `request()` + `body.text()` on the hot path.
   */
  exchange(body: string): Promise<ExchangeResult> {
    const halfOpen = this.breakerOpen;
    if (halfOpen) this.probing = true;
    this.inFlight++;
    return new Promise<ExchangeResult>((resolve) => {
      const handler = new ExchangeHandler(this, halfOpen, resolve);
      this.pool.dispatch({ path: this.path, method: "POST", headers: HEADERS, body }, handler);
    });
  }

  /** Called by the handler once per exchange. */
  settle(ms: number, halfOpen: boolean, ok: boolean): void {
    this.inFlight--;
    if (halfOpen) this.probing = false;
    this.latencyEwmaMs =
      this.latencyEwmaMs === 0 ? ms : this.latencyEwmaMs + EWMA_ALPHA * (ms - this.latencyEwmaMs);
    if (ok) this.recordSuccess();
    else this.recordFailure();
  }

  /** An exchange that ended without saying anything about the node's health (an answer over the cap). */
  settleNeutral(halfOpen: boolean): void {
    this.inFlight--;
    if (halfOpen) this.probing = false;
  }

  /** A response that arrived but was not a valid JSON-RPC answer counts as a failure too. */
  recordFailure(): void {
    this.errorRateEwma += EWMA_ALPHA * (1 - this.errorRateEwma);
    this.consecutiveFailures++;
    if (this.consecutiveFailures >= this.opts.breakerThreshold) {
      this.openUntil = Date.now() + this.opts.breakerCooldownMs;
    }
  }

  private recordSuccess(): void {
    this.errorRateEwma -= EWMA_ALPHA * this.errorRateEwma;
    this.consecutiveFailures = 0;
  }

  /** Undoes the success bookkeeping of an exchange whose body turned out invalid. */
  markBadReply(): void {
    this.recordFailure();
  }

  close(): Promise<void> {
    return this.pool.destroy().catch(() => undefined);
  }
}

/** Collects one response; resolves exactly once. */
class ExchangeHandler implements Dispatcher.DispatchHandler {
  private readonly start = performance.now();
  private status = 0;
  private chunks: Buffer[] | undefined;
  private first: Buffer | undefined;
  private bytes = 0;
  private done = false;

  constructor(
    private readonly upstream: Upstream,
    private readonly halfOpen: boolean,
    private readonly resolve: (r: ExchangeResult) => void,
  ) {}

  onRequestStart(): void {}

  onResponseStart(
    c: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    this.status = statusCode;
    const length = headers["content-length"];
    if (typeof length === "string" && Number(length) > this.upstream.maxResponseBytes) this.tooLarge(c);
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.done) return;
    this.bytes += chunk.length;
    if (this.bytes > this.upstream.maxResponseBytes) {
      this.tooLarge(c);
      return;
    }
    if (this.first === undefined) this.first = chunk;
    else if (this.chunks === undefined) this.chunks = [this.first, chunk];
    else this.chunks.push(chunk);
  }

  /** Drops what was buffered and aborts the request, which destroys its connection: the body stops flowing. */
  private tooLarge(c: Dispatcher.DispatchController): void {
    if (this.done) return;
    this.done = true;
    this.first = undefined;
    this.chunks = undefined;
    c.abort(new Error("upstream answer over UPSTREAM_MAX_RESPONSE_BYTES"));
    this.upstream.settleNeutral(this.halfOpen);
    this.resolve({ ok: false, failure: "too_large" });
  }

  onResponseEnd(): void {
    if (this.done) return;
    this.done = true;
    const ok = this.status < 500 && this.status !== 429 && this.status >= 200;
    let result: ExchangeResult;
    if (!ok) {
      result = { ok: false, failure: "bad" };
    } else {
      const text =
        this.chunks !== undefined
          ? Buffer.concat(this.chunks).toString("utf8")
          : this.first !== undefined
            ? this.first.toString("utf8")
            : "";
      result = { ok: true, text };
    }
    this.upstream.settle(performance.now() - this.start, this.halfOpen, ok);
    this.resolve(result);
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (this.done) return;
    this.done = true;
    this.upstream.settle(performance.now() - this.start, this.halfOpen, false);
    this.resolve({ ok: false, failure: classify(err) });
  }
}

function classify(err: unknown): ExchangeFailure {
  const code = (err as { code?: string }).code ?? "";
  if (
    code === "UND_ERR_HEADERS_TIMEOUT" ||
    code === "UND_ERR_BODY_TIMEOUT" ||
    code === "UND_ERR_CONNECT_TIMEOUT"
  ) {
    return "timeout";
  }
  return "unreachable";
}
