import { type Dispatcher, Pool } from "undici";
import { type ErrorRow, GatewayError, responseTooLargeRow } from "../../../shared/src/jsonrpc/errors";
import type { UpstreamRecord } from "../../../shared/src/redis/records";
import { type BufferBudget, defaultBufferBudget } from "./buffer-budget";
import { UpstreamCapabilities } from "./capabilities";
import { LatencyWindow, ProbeLatencies } from "./latency-window";

/**
 * Why an exchange failed. `timeout`: no complete answer in time (or HTTP 408/504 from a proxy in front of
 * the node); `unreachable`: connection refused / reset; `bad`: 5xx, another non-2xx the request cannot
 * explain, or a 2xx body that is not a valid JSON-RPC answer; `rate_limited`: HTTP 429 (the node throttles
 * us: a back-off, not a sign of ill health); `too_large`: the answer crossed maxResponseBytes; `refused`:
 * HTTP 400 / 413 / 414 / 431, the node refusing this request (its size or content, which the client
 * chooses); `buffer_full`: the answer did not fit in the process-wide UPSTREAM_BUFFER_BUDGET_BYTES (the
 * gateway's load, not the node's health); `cancelled`: the caller cancelled it (a hedged read whose other
 * copy answered first, see ExchangeHandler.cancel). `too_large`, `refused`, `buffer_full` and `cancelled`
 * are no breaker count.
 */
export type ExchangeFailure =
  | "timeout"
  | "unreachable"
  | "bad"
  | "rate_limited"
  | "too_large"
  | "refused"
  | "buffer_full"
  | "cancelled";

/** What a reply check returns for a 2xx body that is not a valid JSON-RPC answer (see Upstream.exchange). */
export const INVALID_REPLY: unique symbol = Symbol("invalid reply");

const EMPTY_BODY = Buffer.alloc(0);

export type ExchangeResult<T> = { ok: true; value: T } | { ok: false; failure: ExchangeFailure };

/**
 * A 2xx answer's body: its bytes, and its text decoded on first read. A check that can read the bytes
 * (a verbatim batch's answer, passed on to the client as they are) never pays for the text.
 */
export class ReplyBody {
  private decoded: string | undefined;

  constructor(readonly bytes: Buffer) {}

  get text(): string {
    if (this.decoded === undefined) this.decoded = this.bytes.toString("utf8");
    return this.decoded;
  }
}

/** Reads a 2xx body into the caller's answer, or INVALID_REPLY. Must not throw. */
export type ReplyCheck<T> = (body: ReplyBody) => T | typeof INVALID_REPLY;

/** Passed to Upstream.exchange by a caller that may cancel the exchange; `exchange` is set by it. */
export interface ExchangeControl {
  exchange?: { cancel(): void };
}

/**
 * What an exchange carries, which decides what its failure says about the node:
 * - `Light`: ordinary client calls. Connection errors, 5xx and invalid answers count toward the breaker;
 *   a timeout does not (a client can make even an eth_call slow), it only schedules a health probe.
 * - `Heavy`: client calls whose cost the client chooses (eth_getLogs, debug_*, trace_*, big state_* reads):
 *   as Light, and a timeout is not failed over either (NetworkPool).
 * - `Probe`: health checks (eth_blockNumber / chain_getHeader, cheap on any node): every failure counts,
 *   timeouts included, with a shorter timeout. A node that cannot answer these is sick.
 * - `Poll`: the chain watch's finalized-head and head-hash reads (upstream/chain-watch.ts), with the
 *   probe's timeout: no verdict either way (no breaker count or reset, no latency or error EWMA, never the
 *   half-open probe). A node may not know the `finalized` tag, and its proxy may answer that with a 400
 *   or a 500: that must not open its breaker.
 * - `Capability`: the state probe's reads at old blocks (state-probe.ts): no verdict at all, neither on the
 *   breaker nor on the latency EWMA (an old-state read is slow on an archive node by nature, and some
 *   providers answer a pruned read with a 5xx); the health checks judge the node.
 */
export const ExchangeKind = { Light: 0, Heavy: 1, Probe: 2, Poll: 3, Capability: 4 } as const;
export type ExchangeKind = (typeof ExchangeKind)[keyof typeof ExchangeKind];

/** Label of the metrics counter of breaker openings, by what tripped it. */
export type BreakerCause = "unreachable" | "bad_response" | "health_probe";

export interface UpstreamEvents {
  breakerOpened(upstream: Upstream, cause: BreakerCause): void;
  backedOff(upstream: Upstream, ms: number): void;
}

export interface UpstreamOptions {
  timeoutMs: number;
  connections: number;
  breakerThreshold: number;
  breakerCooldownMs: number;
  /** Timeout of a health probe (capped by timeoutMs; default 2 s). */
  probeTimeoutMs?: number;
  /** Back-off after a 429 without a usable Retry-After (default 1 s). */
  backoffDefaultMs?: number;
  /** Ceiling on any back-off, whatever Retry-After says (default 30 s). */
  backoffMaxMs?: number;
  /**
   * Heavy calls this node may carry at once (a share of `connections`, so that a flood of slow heavy
   * calls can never occupy every connection and queue the light calls behind it); 0 = no limit.
   */
  heavyMaxInFlight?: number;
  /** Most bytes buffered from one answer (UPSTREAM_MAX_RESPONSE_BYTES); default 32 MiB. */
  maxResponseBytes?: number;
  /** Process-wide budget of buffered answer bytes (UPSTREAM_BUFFER_BUDGET_BYTES); default: a shared 256 MiB one. */
  bufferBudget?: BufferBudget;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

const HEADERS = { "content-type": "application/json", accept: "application/json" };
const EWMA_ALPHA = 0.2;

/**
 * One upstream node: a keep-alive connection pool plus the health state the selector reads (latency EWMA,
 * error-rate EWMA, in-flight count, head height, circuit breaker, rate-limit back-off).
 *
 * Breaker: closed until `breakerThreshold` consecutive failures that say the node is unhealthy (see
 * ExchangeKind), then open for `breakerCooldownMs`; after that one half-open probe (a request or a health
 * check) is let through: success closes it, failure re-opens it for another cooldown. A client call's
 * timeout and a 429 are neutral: they neither count nor reset the count, so one tenant's slow calls
 * cannot open the breaker.
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
  /** A health probe of this node is running (at most one; see NetworkPool.probe). */
  probeRunning = false;
  /** Heavy exchanges in flight (see UpstreamOptions.heavyMaxInFlight). */
  heavyInFlight = 0;
  /** Oldest state served, declared method families, request budget (see capabilities.ts). */
  readonly caps: UpstreamCapabilities;
  /**
   * Recent latencies of Light exchanges that answered (the hedge delay derives from their p95,
   * NetworkPool). Cancelled exchanges are left out: their time is only a lower bound, and counting it
   * would push the p95 up by the hedge delay at every recomputation until hedging stopped (see settle).
   */
  readonly latency = new LatencyWindow();
  /** The last answered health probes' latencies: how selection judges a node without recent answers. */
  readonly probeLatency = new ProbeLatencies();
  private openUntil = 0;
  /** Epoch ms until which the node asked us (429) to send nothing. */
  private backoffUntil = 0;
  private probing = false;
  private readonly pool: Pool;
  private readonly path: string;
  private readonly probeTimeoutMs: number;
  readonly maxResponseBytes: number;
  /** The error row of an answer over the cap (one object per upstream, none per call). */
  readonly tooLargeRow: ErrorRow;
  readonly budget: BufferBudget;

  constructor(
    record: UpstreamRecord,
    private readonly opts: UpstreamOptions,
    private readonly events?: UpstreamEvents,
  ) {
    this.id = record.id;
    this.httpUrl = record.httpUrl;
    this.weight = record.weight;
    this.caps = new UpstreamCapabilities(record);
    this.probeTimeoutMs = Math.min(opts.probeTimeoutMs ?? 2_000, opts.timeoutMs);
    this.maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.tooLargeRow = responseTooLargeRow(this.maxResponseBytes);
    this.budget = opts.bufferBudget ?? defaultBufferBudget;
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

  /** Whether the breaker and any back-off let a request through now (claims the half-open probe when due). */
  available(nowMs: number): boolean {
    if (nowMs < this.backoffUntil) return false;
    if (this.consecutiveFailures < this.opts.breakerThreshold) return true;
    if (nowMs < this.openUntil || this.probing) return false;
    return true;
  }

  get breakerOpen(): boolean {
    return this.consecutiveFailures >= this.opts.breakerThreshold;
  }

  /** Whether another heavy call may go to this node now. */
  heavySlotFree(): boolean {
    const max = this.opts.heavyMaxInFlight ?? 0;
    return max <= 0 || this.heavyInFlight < max;
  }

  /** Whether a 429 back-off is running now. */
  backedOff(nowMs: number): boolean {
    return nowMs < this.backoffUntil;
  }

  /**
   * POSTs one JSON-RPC body. Never throws. Uses undici's dispatch API with a small handler (no Readable
   * stream per response), which is markedly cheaper than `request()` + `body.text()` on the hot path.
   *
   * `check` reads a 2xx body before the exchange is settled, so that the breaker sees one verdict per
   * exchange: a body that is not a valid JSON-RPC answer (an HTML error page, an empty 200) is a `bad`
   * failure and never a success (a success first would reset the failure count and close a half-open
   * breaker on garbage).
   *
   * With `control`, the caller may cancel the exchange (`control.exchange.cancel()`): it then settles at
   * once as `cancelled`, a neutral outcome (see settle).
   */
  exchange<T>(
    body: string | Uint8Array,
    kind: ExchangeKind,
    check: ReplyCheck<T>,
    control?: ExchangeControl,
    /** A sampled request's W3C traceparent for this exchange (data-plane/src/telemetry). */
    traceparent?: string,
  ): Promise<ExchangeResult<T>> {
    const halfOpen = kind !== ExchangeKind.Poll && kind !== ExchangeKind.Capability && this.breakerOpen;
    if (halfOpen) this.probing = true;
    this.inFlight++;
    if (kind === ExchangeKind.Heavy) this.heavyInFlight++;
    return new Promise<ExchangeResult<T>>((resolve) => {
      const handler = new ExchangeHandler<T>(this, halfOpen, kind, check, resolve);
      if (control !== undefined) control.exchange = handler;
      if (kind === ExchangeKind.Probe || kind === ExchangeKind.Poll) {
        const t = this.probeTimeoutMs;
        this.pool.dispatch(
          { path: this.path, method: "POST", headers: HEADERS, body, headersTimeout: t, bodyTimeout: t },
          handler,
        );
      } else {
        const headers = traceparent === undefined ? HEADERS : { ...HEADERS, traceparent };
        this.pool.dispatch({ path: this.path, method: "POST", headers, body }, handler);
      }
    });
  }

  /** Called by the handler once per exchange with its outcome (undefined = success). */
  settle(ms: number, halfOpen: boolean, kind: ExchangeKind, failure: ExchangeFailure | undefined): void {
    this.inFlight--;
    if (kind === ExchangeKind.Heavy) this.heavyInFlight--;
    if (halfOpen) this.probing = false;
    if (kind === ExchangeKind.Poll || kind === ExchangeKind.Capability) return;
    this.latencyEwmaMs =
      this.latencyEwmaMs === 0 ? ms : this.latencyEwmaMs + EWMA_ALPHA * (ms - this.latencyEwmaMs);
    // The EWMA above takes a cancelled exchange's time so far (the node was at least that slow, which
    // steers selection); the p95 window only answers, whose times are known.
    if (kind === ExchangeKind.Light && failure === undefined) this.latency.record(ms, performance.now());
    else if (kind === ExchangeKind.Probe && failure === undefined) this.probeLatency.record(ms);
    if (failure === undefined) {
      this.recordSuccess();
    } else if (failure === "buffer_full" || failure === "cancelled" || failure === "rate_limited") {
      // buffer_full: the gateway's own memory is spent, nothing is known about the node, not even from a
      // probe. cancelled: another node answered a hedged read first; this one was merely slower.
      // rate_limited (HTTP 429, a health probe's too): the node throttles us and is backed off (backOff),
      // as a probe answered with a JSON-RPC rate-limit error is. None is a breaker count nor an error (the
      // half-open claim, if any, is given back above).
    } else if (kind === ExchangeKind.Probe) {
      this.recordFailure("health_probe");
    } else if (failure === "unreachable") {
      this.recordFailure("unreachable");
    } else if (failure === "bad") {
      this.recordFailure("bad_response");
    } else if (failure === "timeout") {
      // A client's call timing out says more about the call than the node: it steers selection (error
      // EWMA) but does not count toward the breaker. The pool probes the node to find out.
      this.errorRateEwma += EWMA_ALPHA * (1 - this.errorRateEwma);
    }
    // Anything else (too_large, refused: the request's doing) is no health verdict. Only the kinds above that a client
    // cannot cause at will count; a new kind a client can provoke (an answer over a size cap, say) stays
    // neutral unless it is added above on purpose.
  }

  /** A failure that says the node is unhealthy; opens the breaker at the threshold. */
  recordFailure(cause: BreakerCause): void {
    this.errorRateEwma += EWMA_ALPHA * (1 - this.errorRateEwma);
    this.consecutiveFailures++;
    if (this.consecutiveFailures >= this.opts.breakerThreshold) {
      const wasOpen = this.consecutiveFailures > this.opts.breakerThreshold;
      this.openUntil = Date.now() + this.opts.breakerCooldownMs;
      if (!wasOpen) this.events?.breakerOpened(this, cause);
    }
  }

  private recordSuccess(): void {
    this.errorRateEwma -= EWMA_ALPHA * this.errorRateEwma;
    this.consecutiveFailures = 0;
    this.openUntil = 0;
  }

  /**
   * The node throttles us (HTTP 429, or a JSON-RPC rate-limit error): send it nothing for `ms` (Retry-After,
   * else the default, capped). Not a breaker failure: the node is healthy, just busy.
   */
  backOff(ms: number | undefined): void {
    const d = Math.min(
      ms === undefined || ms <= 0 ? (this.opts.backoffDefaultMs ?? 1_000) : ms,
      this.opts.backoffMaxMs ?? 30_000,
    );
    const until = Date.now() + d;
    if (until > this.backoffUntil) this.backoffUntil = until;
    this.events?.backedOff(this, d);
  }

  close(): Promise<void> {
    return this.pool.destroy().catch(() => undefined);
  }
}

/**
 * Collects one response; resolves exactly once. Every buffered chunk is taken from the upstream's
 * BufferBudget as it arrives (`held`) and all of it is given back once when the exchange ends, whichever way
 * (answer, error, too_large, buffer_full): `free()` zeroes `held`, so a second call gives back nothing.
 */
class ExchangeHandler<T> implements Dispatcher.DispatchHandler {
  private readonly start = performance.now();
  private status = 0;
  private retryAfter: string | string[] | undefined;
  private chunks: Buffer[] | undefined;
  private first: Buffer | undefined;
  /** Bytes taken from the budget and not yet given back (= bytes buffered so far). */
  private held = 0;
  private done = false;
  /** Set once undici has given the request a connection; cancel() aborts through it. */
  private controller: Dispatcher.DispatchController | undefined;

  constructor(
    private readonly upstream: Upstream,
    private readonly halfOpen: boolean,
    private readonly kind: ExchangeKind,
    private readonly check: ReplyCheck<T>,
    private readonly resolve: (r: ExchangeResult<T>) => void,
  ) {}

  onRequestStart(c: Dispatcher.DispatchController): void {
    this.controller = c;
    // Cancelled while it waited for a free connection: it is never sent (undici closes that connection).
    if (this.done) c.abort(CANCELLED);
  }

  /**
   * Ends the exchange at once as `cancelled` (a hedged read's other copy answered first): what was
   * buffered is given back, the request is aborted (undici destroys its connection, the only way to stop
   * an HTTP/1.1 answer midway; the pool opens another when needed), and the upstream settles it as a
   * neutral outcome (in-flight counts released, no breaker count). No-op once the exchange has ended.
   */
  cancel(): void {
    if (this.done) return;
    this.done = true;
    this.first = undefined;
    this.chunks = undefined;
    this.free();
    this.controller?.abort(CANCELLED);
    this.upstream.settle(performance.now() - this.start, this.halfOpen, this.kind, "cancelled");
    this.resolve({ ok: false, failure: "cancelled" });
  }

  onResponseStart(
    c: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    this.status = statusCode;
    if (statusCode === 429) this.retryAfter = headers["retry-after"];
    const length = headers["content-length"];
    if (typeof length === "string") {
      const n = Number(length);
      if (n > this.upstream.maxResponseBytes) this.fail(c, "too_large");
      else if (!this.upstream.budget.fits(n)) this.fail(c, "buffer_full");
    }
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.done) return;
    const n = chunk.length;
    if (this.held + n > this.upstream.maxResponseBytes) {
      this.fail(c, "too_large");
      return;
    }
    if (!this.upstream.budget.take(n)) {
      this.fail(c, "buffer_full");
      return;
    }
    this.held += n;
    if (this.first === undefined) this.first = chunk;
    else if (this.chunks === undefined) this.chunks = [this.first, chunk];
    else this.chunks.push(chunk);
  }

  /** Gives back what this exchange holds of the budget (idempotent). */
  private free(): void {
    if (this.held !== 0) {
      this.upstream.budget.release(this.held);
      this.held = 0;
    }
  }

  /**
   * Drops what was buffered and aborts the request, which destroys its connection: the body stops flowing.
   * Both are the call's doing (its answer's size, or answers in flight together), not the node's.
   */
  private fail(c: Dispatcher.DispatchController, failure: "too_large" | "buffer_full"): void {
    if (this.done) return;
    this.done = true;
    this.first = undefined;
    this.chunks = undefined;
    this.free();
    c.abort(
      new Error(
        failure === "too_large"
          ? "upstream answer over UPSTREAM_MAX_RESPONSE_BYTES"
          : "upstream answers over UPSTREAM_BUFFER_BUDGET_BYTES",
      ),
    );
    this.upstream.settle(performance.now() - this.start, this.halfOpen, this.kind, failure);
    this.resolve({ ok: false, failure });
  }

  onResponseEnd(): void {
    if (this.done) return;
    this.done = true;
    const status = this.status;
    let result: ExchangeResult<T>;
    if (status >= 200 && status < 300) {
      const body = new ReplyBody(
        this.chunks !== undefined ? Buffer.concat(this.chunks) : (this.first ?? EMPTY_BODY),
      );
      this.first = undefined;
      this.chunks = undefined;
      this.free();
      let value: T | typeof INVALID_REPLY;
      try {
        value = this.check(body);
      } catch {
        value = INVALID_REPLY;
      }
      result = value === INVALID_REPLY ? { ok: false, failure: "bad" } : { ok: true, value };
    } else if (status === 413 || status === 400 || status === 414 || status === 431) {
      // The node refuses this request: its body size (413: geth caps bodies at 5 MiB), or content that the
      // node reads differently (400). The client chose both; coalescing puts many clients' calls in one
      // body, so counting these would let one client open every breaker. A node that refuses everything
      // still fails its health probes (every probe failure counts).
      result = { ok: false, failure: "refused" };
    } else if (status === 429) {
      result = { ok: false, failure: "rate_limited" };
      this.upstream.backOff(retryAfterMs(this.retryAfter));
    } else if (status === 408 || status === 504) {
      // A proxy in front of the node gave up waiting: as a timeout of ours.
      result = { ok: false, failure: "timeout" };
    } else {
      result = { ok: false, failure: "bad" };
    }
    this.first = undefined;
    this.chunks = undefined;
    this.free();
    this.upstream.settle(
      performance.now() - this.start,
      this.halfOpen,
      this.kind,
      result.ok ? undefined : result.failure,
    );
    this.resolve(result);
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    if (this.done) return;
    this.done = true;
    this.first = undefined;
    this.chunks = undefined;
    this.free();
    const failure = classify(err);
    this.upstream.settle(performance.now() - this.start, this.halfOpen, this.kind, failure);
    this.resolve({ ok: false, failure });
  }
}

/** The abort reason of a cancelled exchange (one object: nothing is allocated per cancel). */
const CANCELLED = new Error("exchange cancelled: another upstream answered first");

/** The error row a client gets for an exchange with `u` that failed with `f` (shared networks and nodes). */
export function exchangeFailureRow(f: ExchangeFailure, u: Upstream): ErrorRow {
  switch (f) {
    case "timeout":
      return GatewayError.UpstreamTimeout;
    case "unreachable":
      return GatewayError.UpstreamUnreachable;
    case "too_large":
      return u.tooLargeRow;
    case "refused":
      return GatewayError.UpstreamRequestRefused;
    case "rate_limited":
      return GatewayError.UpstreamRateLimited;
    case "buffer_full":
      return GatewayError.UpstreamBufferFull;
    default:
      return GatewayError.UpstreamBadResponse;
  }
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date; undefined when absent or unusable. */
export function retryAfterMs(v: string | string[] | undefined, nowMs = Date.now()): number | undefined {
  const text = Array.isArray(v) ? v[0] : v;
  if (text === undefined || text === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(text.trim())) return Math.ceil(Number(text.trim()) * 1000);
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : undefined;
}

function classify(err: unknown): ExchangeFailure {
  const code = (err as { code?: string }).code ?? "";
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") {
    return "timeout";
  }
  // Everything else, UND_ERR_CONNECT_TIMEOUT included (no connection at all), says the node is unreachable.
  return "unreachable";
}
