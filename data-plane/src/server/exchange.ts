import type { HttpRequest, HttpResponse } from "uWebSockets.js";
import { ErrorCategory, type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { logAddressPrefix } from "../../../shared/src/net/address-bucket";
import type { RequestLogRecord } from "../../../shared/src/requestlog/contract";
import { clientIp, ipBucket } from "../allowlist/ip";
import { bearerToken, type JwtCheck, type JwtRefused } from "../auth/jwt";
import type { VerifiedKey, VerifyResult } from "../auth/key-verifier";
import {
  type CallOutcome,
  type ConcurrencyRefusal,
  elementRefusal,
  forwardCall,
  forwardPlan,
  Outcome,
  planBatch,
  planBody,
  planUnits,
  refusalJson,
} from "../forward/forward";
import { keyIdentifier, type Refused, rateLimitHeaders } from "../limits/admission";
import { type RateLimitResult, retryAfterSeconds } from "../ratelimit/rate-limiter";
import { type BatchItem, isItemError, parseRpcBody, type RpcCall } from "../rpc/parse";
import type { RequestTrace } from "../telemetry/tracing";
import { type NetworkPool } from "../upstream/network-pool";
import type { Reply } from "../upstream/reply";
import { Endpoint, type GatewayContext } from "./context";
import { requestIdFor } from "./request-id";
import { errorJson, replyJson, STATUS } from "./respond";

/**
 * Counts live exchanges (for draining) and watches those whose body arrives in several chunks (for the
 * slow-body sweep). Single-chunk bodies, the common case, never enter the watch set.
 */
export interface ExchangeTracker {
  readonly closing: boolean;
  begin(): void;
  end(): void;
  watchBody(x: RpcExchange): void;
  unwatchBody(x: RpcExchange): void;
}

/** What a pipeline step returns: a promise only when it has to wait (key lookup, upstream call). */
type Pending = Promise<void> | void;

/**
 * Decodes single-chunk bodies straight from uWS's ArrayBuffer (no Buffer view first: one object and one
 * copy less per request; figures in docs/benchmarks.md). Invalid sequences become U+FFFD as with Buffer#toString; `ignoreBOM` keeps a leading BOM
 * in the text, as Buffer#toString does, so such a body stays a parse error.
 */
const UTF8 = new TextDecoder("utf-8", { ignoreBOM: true });

const EXPOSE_HEADERS = "X-Request-Id, X-Cache, X-RateLimit-Limit, X-RateLimit-Remaining, Retry-After";

/**
 * One HTTP request on an RPC endpoint, from headers to the response. Everything needed from `req` is
 * copied in the constructor (uWS invalidates it when the handler returns); every later write is corked.
 */
export class RpcExchange {
  /** The client's own `X-Request-Id` when well formed (request-id.ts), else a fresh one. */
  readonly requestId: string;
  /** When the first partial body chunk arrived (set only for multi-chunk bodies). */
  bodyStartedAtMs = 0;
  private done = false;
  private aborted = false;
  private chunks: Buffer[] | undefined;
  /** The body's bytes when it may be a batch (see onData), else undefined. */
  private bodyBytes: Buffer | undefined;
  private bytes = 0;
  private readonly apiKey: string;
  private readonly origin: string;
  private readonly forwardedFor: string;
  /**
   * `User-Agent` and `Authorization`, read only when the key's access rules need them (or the key is not
   * cached yet, when whether they do is not known while `req` is still valid).
   */
  private userAgent = "";
  private authorization = "";
  private verification: VerifyResult | Promise<VerifyResult> | undefined;
  /** Value for Access-Control-Allow-Origin, "" = none. */
  private allowOrigin = "";
  private xCache = "";
  /** The queued response (see `send`). */
  private answerStatus = 0;
  private answerBody: string | Uint8Array = "";
  /** The admitted key (app endpoints), whose workspace is charged for what is served. */
  private key: VerifiedKey | undefined;
  /** The rate decision, for X-RateLimit-* headers; undefined before admission. */
  private rate: RateLimitResult | undefined;
  /** Retry-After in seconds on a limits refusal, else 0. */
  private retryAfterS = 0;
  /** Usage attribution: the verified app key (even when refused later), undefined = unknown key / public. */
  private usageKey: VerifiedKey | undefined;
  /** The single request's method once parsed (whole-request failures are recorded under it), else "other". */
  private usageMethod = "other";
  /** Public endpoint: the client IP text the limits saw (the concurrency cap's tenant). */
  private publicIp: string | undefined;
  /** Request-log records sampled so far, completed (HTTP status, client prefix) and handed over in `send`. */
  private logRows: RequestLogRecord[] | undefined;
  /** Whether this request's successes are logged: drawn once, at its first success (see usage). */
  private successesSampled: boolean | undefined;
  /** A sampled request's trace (telemetry/tracing.ts); undefined when not sampled or tracing is off. */
  private trace: RequestTrace | undefined;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly tracker: ExchangeTracker,
    private readonly res: HttpResponse,
    req: HttpRequest,
    private readonly endpoint: Endpoint,
    private readonly pool: NetworkPool,
    /** When the route handler took the request (performance.now() ms). */
    readonly startedAt: number,
  ) {
    this.requestId = requestIdFor(req.getHeader("x-request-id"));
    this.apiKey = endpoint === Endpoint.App ? req.getQuery("apikey") || req.getHeader("apikey") : "";
    this.origin = req.getHeader("origin");
    // Only consulted when the peer is a trusted proxy: not read (one native call less) without any.
    this.forwardedFor = ctx.trustedProxies.length > 0 ? req.getHeader("x-forwarded-for") : "";
    if (this.origin !== "") this.allowOrigin = endpoint === Endpoint.Public ? "*" : this.origin;
    // The traceparent header is read (a native call) only with tracing on.
    if (ctx.tracing.enabled) this.startTrace(req.getHeader("traceparent"));
    res.onAborted(() => {
      this.aborted = true;
      this.finish();
    });
    tracker.begin();
  }

  private startTrace(traceparent: string): void {
    this.trace = this.ctx.tracing.start(
      this.endpoint === Endpoint.App ? "POST /{network}/rpc" : "POST /{network}/public",
      traceparent,
      this.startedAt,
      "http",
      this.pool.record.slug,
      this.requestId,
    );
  }

  /** The key lookup as a span of a sampled request, from `t0` to when it settled. */
  private traceKey(v: VerifyResult | Promise<VerifyResult>, t0: number): void {
    const t = this.trace!;
    if (v instanceof Promise)
      v.then((r) => t.step("key.verify", t0, { "key.valid": r.ok, "key.cached": false }));
    else t.step("key.verify", t0, { "key.valid": v.ok, "key.cached": true });
  }

  /** Synchronous checks on headers, then body streaming. Called from the route handler. */
  start(req: HttpRequest): void {
    const contentType = req.getHeader("content-type");
    if (!isJsonContentType(contentType)) {
      this.fail(GatewayError.UnsupportedMediaType, "null");
      return;
    }
    const declared = req.getHeader("content-length");
    if (declared !== "" && Number(declared) > this.ctx.config.MAX_BODY_BYTES) {
      this.fail(GatewayError.BodyTooLarge, "null");
      return;
    }
    if (this.endpoint === Endpoint.App) {
      if (this.apiKey === "") {
        this.fail(GatewayError.MissingKey, "null");
        return;
      }
      // Starts the key lookup while the body streams in (sync on a cache hit).
      const t0 = this.trace === undefined ? 0 : performance.now();
      // The client's address bucket is worked out only when the key must be read from Redis (throttle).
      const v = this.ctx.verifier.verify(this.apiKey, Date.now(), () => ipBucket(this.clientAddress()));
      this.verification = v;
      if (this.trace !== undefined) this.traceKey(v, t0);
      if (v instanceof Promise) {
        this.userAgent = req.getHeader("user-agent");
        this.authorization = req.getHeader("authorization");
      } else if (v.ok && v.key.access !== undefined) {
        // Each header costs a native call and a string copy (a JWT is ~0.5 KB): read only what is checked.
        const access = v.key.access;
        if (access.userAgents !== undefined) this.userAgent = req.getHeader("user-agent");
        if (access.jwt !== undefined) this.authorization = req.getHeader("authorization");
      }
    }
    // uWS calls this outside the route handler's guard: an exception must not reach it (see guard.ts).
    this.res.onData((chunk, isLast) => {
      try {
        this.onData(chunk, isLast);
      } catch (err) {
        this.pipelineError(err);
      }
    });
  }

  private onData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.done) return;
    this.bytes += chunk.byteLength;
    if (this.bytes > this.ctx.config.MAX_BODY_BYTES) {
      this.fail(GatewayError.BodyTooLarge, "null"); // the chunks and the watch go once the answer is written (release)
      return;
    }
    if (isLast) {
      if (this.chunks !== undefined) this.tracker.unwatchBody(this);
      let text: string;
      if (this.chunks === undefined) {
        text = UTF8.decode(chunk);
        // A batch is scanned in its bytes and may go upstream as them (rpc/parse.ts, verbatim.ts): a copy,
        // as uWS's memory is only valid during this callback.
        if (looksLikeBatch(text)) this.bodyBytes = Buffer.from(new Uint8Array(chunk));
      } else {
        this.chunks.push(Buffer.from(chunk));
        const whole = Buffer.concat(this.chunks);
        text = whole.toString("utf8");
        this.bodyBytes = whole;
        this.chunks = undefined;
      }
      // Synchronous up to the first upstream call (or key lookup): a cache hit creates no promise.
      try {
        const pending = this.process(text);
        if (pending instanceof Promise) pending.catch((err: unknown) => this.pipelineError(err));
      } catch (err) {
        this.pipelineError(err);
      }
    } else {
      // The chunk's memory is only valid during this callback: copy it.
      const copy = Buffer.from(new Uint8Array(chunk).slice());
      if (this.chunks === undefined) {
        this.chunks = [copy];
        this.bodyStartedAtMs = Date.now();
        this.tracker.watchBody(this);
      } else {
        this.chunks.push(copy);
      }
    }
  }

  private pipelineError(err: unknown): void {
    this.ctx.metrics.handlerException("rpc.pipeline");
    this.ctx.logger.error(
      { err, requestId: this.requestId, ...this.trace?.logFields() },
      "unhandled error in request pipeline",
    );
    this.fail(GatewayError.Internal, "null");
  }

  /** Slow-body defence: closes the connection when the body did not arrive in time. */
  timeOut(): void {
    if (this.done) return;
    this.done = true;
    this.aborted = true;
    this.endTrace(408, "body_timeout");
    this.tracker.unwatchBody(this);
    this.tracker.end();
    this.res.close();
  }

  private process(text: string): Pending {
    if (this.endpoint === Endpoint.App) {
      const v = this.verification!;
      if (v instanceof Promise) return v.then((r) => this.verified(r, text));
      return this.verified(v, text);
    }
    return this.admitted(undefined, text);
  }

  private verified(v: VerifyResult, text: string): Pending {
    if (this.aborted) return;
    if (!v.ok) {
      if (v.retryAfterMs !== undefined) this.retryAfterS = Math.ceil(v.retryAfterMs / 1000);
      return this.fail(v.error, "null", undefined, true, undefined, v.retryAfterMs);
    }
    const key = v.key;
    if (key.record.kind !== "app") return this.fail(GatewayError.UnknownKey, "null");
    this.usageKey = key;
    if (!key.allowlist.empty) {
      const refused = key.allowlist.check(this.origin, () => this.clientAddress());
      if (refused !== undefined) {
        this.allowOrigin = "";
        return this.fail(refused, "null");
      }
      if (key.allowlist.restrictsOrigin && !key.allowlist.originAllowed(this.origin)) this.allowOrigin = "";
    }
    const access = key.access;
    if (access?.readsHeaders) {
      const uaRefused = access.userAgentRefusal(this.userAgent);
      if (uaRefused !== undefined) return this.fail(uaRefused, "null");
      if (access.jwt !== undefined) {
        const appId = key.record.appId ?? key.hash;
        const address = ipBucket(this.clientAddress());
        const c = this.ctx.jwt.check(access.jwt, appId, bearerToken(this.authorization), address);
        if (c instanceof Promise) return c.then((r) => this.jwtChecked(r, key, text));
        if (!c.ok) return this.jwtRefused(c);
      }
    }
    return this.admitted(key, text);
  }

  /** After a JWT that had to be verified (not cached): refused with its reason, or on to admission. */
  private jwtChecked(r: JwtCheck, key: VerifiedKey, text: string): Pending {
    if (this.aborted) return;
    if (!r.ok) return this.jwtRefused(r);
    return this.admitted(key, text);
  }

  /** A refused JWT: 401 with its reason, or 429 with `Retry-After` when failed checks are throttled. */
  private jwtRefused(r: JwtRefused): void {
    if (r.retryAfterMs === undefined) {
      this.fail(r.row, "null", undefined, true, r.message);
      return;
    }
    this.refuse(
      {
        row: r.row,
        retryAfterMs: r.retryAfterMs,
        retryAfterSeconds: retryAfterSeconds(r.retryAfterMs),
        limit: r.limit ?? 0,
        message: r.message,
      },
      "null",
    );
  }

  private admitted(key: VerifiedKey | undefined, text: string): Pending {
    const parsed = parseRpcBody(text, this.bodyBytes);
    if (!parsed.ok) return this.fail(parsed.error, parsed.idText, parsed.limit);
    if (!parsed.batch) this.usageMethod = parsed.call.method;
    const t0 = this.trace === undefined ? 0 : performance.now();
    // Limits, once per HTTP request with its whole cost (every request object, notifications and invalid
    // elements included), before anything is forwarded: per app key or per client IP (public endpoint)
    // per second, then the workspace's daily / monthly quota. A refusal answers the whole request.
    const cost = parsed.batch ? parsed.items.length : 1;
    // Public endpoint: per client address, IPv6 per /64 (ipBucket).
    const ip = key === undefined ? ipBucket(this.clientAddress()) : undefined;
    const admission = this.ctx.limits.admit(key, ip, cost);
    this.rate = admission.rate;
    if (this.trace !== undefined) {
      this.trace.step("limits.admit", t0, { "limits.admitted": admission.ok, "rpc.request_objects": cost });
      this.trace.set(parsed.batch ? { "rpc.batch.size": cost } : { "rpc.method": parsed.call.method });
    }
    if (!admission.ok) {
      return this.refuse(
        admission,
        parsed.batch ? "null" : (parsed.call.idText ?? "null"),
        parsed.batch ? parsed.items : undefined,
      );
    }
    this.key = key;
    this.publicIp = ip;
    if (parsed.batch) return this.batch(parsed.items, parsed.verbatim ? (this.bodyBytes ?? text) : undefined);
    return this.single(parsed.call);
  }

  /**
   * 429 for the whole request: nothing forwarded, nothing counted as served. Usage records every request
   * object of it under its method (a refused batch of 30 shows as 30 Too Many Requests on the dashboard).
   */
  private refuse(
    r: Pick<Refused, "row" | "retryAfterMs" | "retryAfterSeconds" | "limit" | "message">,
    idText: string,
    items?: BatchItem[],
  ): void {
    if (this.done) return;
    const elapsed = this.elapsed();
    this.ctx.metrics.request(this.pool.record.slug, r.row.category, elapsed);
    if (items === undefined) this.usage(this.usageMethod, r.row.category, elapsed, r.row.reason);
    else
      for (let i = 0; i < items.length; i++) {
        const it = items[i]!;
        this.usage(isItemError(it) ? "other" : it.method, r.row.category, elapsed, r.row.reason, i);
      }
    this.retryAfterS = r.retryAfterSeconds;
    const body = errorJson(r.row, idText, {
      requestId: this.requestId,
      retryAfterMs: r.retryAfterMs,
      limit: r.limit,
      message: r.message,
    });
    this.send(429, body);
  }

  /** Response units: each response object returned to the client counts one against the quota. */
  private served(units: number): void {
    if (this.key !== undefined) this.ctx.limits.recordServed(this.key, units);
  }

  /**
   * Usage of `units` request objects (batch elements `item`.. `item + units - 1`) alike in method and
   * category, for this request's app (or none) and network: one usage record of that many units, and
   * each element's own request-log sampling.
   */
  private usage(
    method: string,
    category: string,
    elapsedSeconds: number,
    reason = "",
    item = 0,
    units = 1,
  ): void {
    const rec = this.usageKey?.record;
    this.ctx.usage.record({
      workspaceId: rec?.workspaceId ?? null,
      appId: rec?.appId ?? null,
      network: this.pool.record.slug,
      method,
      category: category as ErrorCategory,
      latencyMs: elapsedSeconds * 1000,
      units,
    });
    // Sampling first: an unsampled success allocates nothing.
    const log = this.ctx.requestLog;
    // Successes: one draw per HTTP request, at its first success, so a request's successes are logged
    // together or not at all. Each is still logged with probability REQUEST_LOG_SAMPLE_PERCENT / 100; a
    // batch of 100 at 1% then costs a set of rows (and a read of the client's address) in 1% of batches
    // instead of about one row in 63% of them (the cost per batch is in docs/benchmarks.md).
    // Errors: each asked (always logged while the log is on).
    let successes: boolean | undefined;
    if (category === ErrorCategory.Success) {
      this.successesSampled ??= log.wants(category);
      successes = this.successesSampled;
      if (!successes) return;
    }
    for (let i = item; i < item + units; i++)
      if (successes || log.wants(category)) this.logRow(method, category, elapsedSeconds, reason, i);
  }

  private logRow(
    method: string,
    category: string,
    elapsedSeconds: number,
    reason: string,
    item: number,
  ): void {
    const rec = this.usageKey?.record;
    if (this.logRows === undefined) this.logRows = [];
    this.logRows.push({
      time: Date.now(),
      workspaceId: rec?.workspaceId ?? null,
      appId: rec?.appId ?? null,
      network: this.pool.record.slug,
      transport: "http",
      method,
      httpStatus: 0,
      category,
      reason,
      latencyMs: Math.round(elapsedSeconds * 1e6) / 1000,
      requestId: this.requestId,
      item,
      clientIp: null,
    });
  }

  /** Hands the sampled records over with the response's status and the client's truncated address. */
  private logSent(status: number): void {
    const rows = this.logRows!;
    this.logRows = undefined;
    const addr = this.clientAddress();
    const ip = addr === undefined ? null : logAddressPrefix(addr);
    for (const r of rows) {
      r.httpStatus = status;
      r.clientIp = ip;
      this.ctx.requestLog.record(r);
    }
  }

  private clientAddress() {
    if (this.aborted) return undefined;
    const peer = Buffer.from(this.res.getRemoteAddressAsText()).toString("latin1");
    const fwd = this.forwardedFor;
    const trusted = this.ctx.trustedProxies;
    const last = lastClient;
    if (last.peer === peer && last.forwardedFor === fwd && last.trusted === trusted) return last.addr;
    const addr = clientIp(peer, fwd, trusted);
    lastClient = { peer, forwardedFor: fwd, trusted, addr };
    return addr;
  }

  private single(call: RpcCall): Pending {
    const rules = this.key?.access?.methods;
    const out = forwardCall(this.ctx, this.pool, this.ctx.policy, this.flightId(), call, rules, this.trace);
    return out instanceof Promise ? out.then((o) => this.answerCall(call, o)) : this.answerCall(call, out);
  }

  /** Sends a single call's outcome (see forwardCall), unless the client went away meanwhile. */
  private answerCall(call: RpcCall, out: CallOutcome): void {
    if (this.aborted) return;
    const idText = call.idText;
    if (out.kind === Outcome.OverCap) {
      this.refuseOverCap(out.refusal, idText ?? "null");
      return;
    }
    if (out.kind === Outcome.Forwarded && !out.result.ok) {
      this.fail(out.result.error, idText ?? "null");
      return;
    }
    let category: string;
    let reason = "";
    let status = 200;
    let body = "";
    if (out.kind === Outcome.Refused) {
      const row = out.refusal.row;
      category = row.category;
      reason = row.reason;
      status = row.httpStatus;
      if (idText !== undefined) body = refusalJson(out.refusal, idText, this.requestId);
    } else {
      const reply = out.kind === Outcome.Cached ? out.reply : (out.result as { reply: Reply }).reply;
      if (out.kind === Outcome.Cached) this.xCache = "HIT";
      else if (out.cacheable) this.xCache = "MISS";
      category = reply.category;
      if (idText !== undefined) body = replyJson(idText, reply.tail);
    }
    const elapsed = this.elapsed();
    this.ctx.metrics.request(this.pool.record.slug, category, elapsed);
    this.usage(call.method, category, elapsed, reason);
    if (idText === undefined) {
      this.send(204, "");
      return;
    }
    // An answer with status 200 (a node's result or error, a method_blocked refusal) is a response
    // object served; a 4xx refusal is not.
    if (status === 200) this.served(1);
    this.send(status, body);
  }

  /** `verbatim`: the request body (text or bytes), when it may go upstream as it is (forward/verbatim.ts). */
  private async batch(items: BatchItem[], verbatim: string | Uint8Array | undefined): Promise<void> {
    const pool = this.pool;
    const n = items.length;
    const rules = this.key?.access?.methods;
    const plan = planBatch(items, this.requestId, (c) => elementRefusal(c, pool, this.ctx.policy, rules));
    const done = await forwardPlan(
      this.ctx,
      pool,
      this.flightId(),
      plan,
      this.requestId,
      verbatim,
      this.trace,
    );
    if (this.aborted) return;
    if (done.overCap !== undefined) return this.refuseOverCap(done.overCap, "null", items);
    // Every element was forwardable and none got an answer: the upstream side failed as a whole.
    const wholeFailure = plan.forward.length === n ? done.failure : undefined;
    const categories = plan.categories;
    const elapsed = this.elapsed();
    // Every element is counted, in runs of elements alike in method and category (a batch mostly repeats
    // its methods): one metrics add and one usage record of the run's size instead of one per element.
    const slug = pool.record.slug;
    let start = 0;
    let method = methodOf(items[0]!);
    for (let i = 1; i <= n; i++) {
      const next = i < n ? methodOf(items[i]!) : "";
      if (i < n && next === method && categories[i] === categories[start]) continue;
      const category = categories[start]!;
      this.ctx.metrics.request(slug, category, elapsed, i - start);
      this.usage(method, category, elapsed, "", start, i - start);
      start = i;
      method = next;
    }
    if (wholeFailure !== undefined) return this.fail(wholeFailure, "null", undefined, false);
    const body = planBody(plan);
    if (body === "") return this.send(204, "");
    this.served(planUnits(plan, items));
    this.send(200, body);
  }

  /** The tenant the concurrency caps count: the app key's limit id, else the client's address bucket. */
  private flightId(): string {
    return this.key !== undefined ? keyIdentifier(this.key) : `ip:${this.publicIp ?? "unknown"}`;
  }

  /**
   * 429 concurrency_limit for the whole request (nothing was forwarded) when a tenant's calls in flight
   * are over MAX_IN_FLIGHT_PER_KEY / MAX_HEAVY_IN_FLIGHT_PER_KEY.
   */
  private refuseOverCap(r: ConcurrencyRefusal, idText: string, items?: BatchItem[]): void {
    this.ctx.metrics.limitRefused(
      this.endpoint === Endpoint.App ? "app" : "public",
      GatewayError.ConcurrencyLimit.reason,
      items === undefined ? 1 : items.length,
    );
    this.refuse({ ...r, retryAfterSeconds: r.retryAfterMs / 1000 }, idText, items);
  }

  private elapsed(): number {
    return (performance.now() - this.startedAt) / 1000;
  }

  /**
   * Whole-request failure: the row's HTTP status and a contract error object. Counted once in the
   * request metrics under the row's category unless the caller already counted the elements.
   */
  fail(
    row: ErrorRow,
    idText: string,
    limit?: number,
    record = true,
    message?: string,
    retryAfterMs?: number,
  ): void {
    if (this.done) return;
    if (record) {
      const elapsed = this.elapsed();
      this.ctx.metrics.request(this.pool.record.slug, row.category, elapsed);
      this.usage(this.usageMethod, row.category, elapsed, row.reason);
    }
    const body = errorJson(row, idText, { requestId: this.requestId, limit, message, retryAfterMs });
    this.send(row.httpStatus, body);
  }

  /**
   * Queues the response; `flushAnswers` writes every queued one after the event loop's poll phase. While
   * the server drains, the connection is closed after it.
   *
   * Why not write at once: each response's send on loopback also wakes the client's thread when it is
   * waiting, and a client that reads one response between two of ours (spaced by our work on the next
   * request) waits, and is woken, every time, which shows as a large share of the gateway's CPU in
   * `bench:profile hit`. Answers sent back to back after the poll phase keep the reader busy instead
   * (figures in docs/benchmarks.md, "Where the gateway's time goes"). A lone request
   * waits only for the end of the loop iteration it arrived in (not counted in the latency recorded for
   * metrics and usage, which is taken when the answer is ready).
   *
   * Every answer is therefore asynchronous to uWS, which closes a connection that sends its next request
   * before the previous answer (HTTP/1.1 pipelining): pipelining is not supported (docs/json-rpc.md),
   * as it already was not for any request that waited on an upstream or a key lookup.
   */
  private send(status: number, body: string | Uint8Array): void {
    // An aborted or timed-out exchange is already done (onAborted / timeOut), so this one is live.
    if (this.done) return;
    this.done = true;
    if (this.logRows !== undefined) this.logSent(status);
    if (this.trace !== undefined) this.endTrace(status, status >= 500 ? `HTTP ${status}` : undefined);
    this.answerStatus = status;
    this.answerBody = body;
    ANSWERS.push(this);
    if (ANSWERS.length === 1) setImmediate(flushAnswers);
  }

  /** Writes the queued response (corked) and ends the exchange. Never throws. */
  writeQueued(): void {
    try {
      if (!this.aborted) this.res.cork(() => this.write(this.answerStatus, this.answerBody));
    } catch (err) {
      this.ctx.logger.error({ err, requestId: this.requestId }, "writing a response failed");
      // A response cut off mid-write would leave the client waiting: close the connection instead.
      try {
        if (!this.aborted) this.res.close();
      } catch {}
    }
    this.answerBody = "";
    this.release();
  }

  private write(status: number, body: string | Uint8Array): void {
    const res = this.res;
    // uWS writes "200 OK" itself when no status was written.
    if (status !== 200) res.writeStatus(STATUS[status] ?? `${status} Error`);
    // Every header in one writeHeader call (each native call costs about as much as building the whole
    // block): the value carries the following header lines. Safe because no value can hold CR or LF:
    // they are ours, or request header values, which uWS refuses when they contain control characters.
    let block = this.requestId;
    const origin = this.allowOrigin;
    if (origin !== "") {
      block += `\r\naccess-control-allow-origin: ${origin}\r\naccess-control-expose-headers: ${EXPOSE_HEADERS}`;
      if (origin !== "*") block += "\r\nvary: Origin";
    }
    if (this.xCache !== "") block += `\r\nx-cache: ${this.xCache}`;
    const rl = rateLimitHeaders(this.rate);
    if (rl !== undefined) block += `\r\nx-ratelimit-limit: ${rl[0]}\r\nx-ratelimit-remaining: ${rl[1]}`;
    if (this.retryAfterS > 0) block += `\r\nretry-after: ${this.retryAfterS}`;
    const close = this.tracker.closing;
    if (status === 204) {
      res.writeHeader("x-request-id", block);
      res.endWithoutBody(0, close);
    } else {
      res.writeHeader("x-request-id", `${block}\r\ncontent-type: application/json`);
      res.end(body, close);
    }
  }

  /** Ends the root span of a sampled request (once: the first of send, abort, time-out). */
  private endTrace(status: number, error: string | undefined): void {
    const t = this.trace;
    if (t === undefined) return;
    this.trace = undefined;
    t.end(
      this.xCache === ""
        ? { "http.response.status_code": status }
        : { "http.response.status_code": status, "gateway.cache": this.xCache },
      error,
    );
  }

  /** Ends the exchange without a response (aborted by the client). */
  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.endTrace(499, "aborted");
    this.release();
  }

  /** The tracker's bookkeeping, once per exchange: after its response is written, or on abort. */
  private release(): void {
    this.bodyBytes = undefined;
    if (this.chunks !== undefined) {
      this.chunks = undefined;
      this.tracker.unwatchBody(this);
    }
    this.tracker.end();
  }
}

/**
 * The last client address worked out (clientIp parses text with ipaddr.js): a connection's requests, and a
 * busy client's connections, come from the same peer one after another. The address objects are only read.
 */
let lastClient: {
  readonly peer: string;
  readonly forwardedFor: string;
  readonly trusted: GatewayContext["trustedProxies"] | undefined;
  readonly addr: ReturnType<typeof clientIp>;
} = { peer: "", forwardedFor: "", trusted: undefined, addr: undefined };

/** Responses waiting for the end of the poll phase, in the order they were answered. */
const ANSWERS: RpcExchange[] = [];

function flushAnswers(): void {
  const queued = ANSWERS.splice(0);
  for (const x of queued) x.writeQueued();
}

/** A batch element's method for usage records ("other" for an invalid element). */
function methodOf(item: BatchItem): string {
  return isItemError(item) ? "other" : item.method;
}

/** Whether the body's first non-blank character opens an array. */
function looksLikeBatch(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return c === 0x5b;
  }
  return false;
}

function isJsonContentType(value: string): boolean {
  if (value === "application/json") return true;
  if (value.length < 16) return false;
  const v = value.toLowerCase();
  if (!v.startsWith("application/json")) return false;
  return v.length === 16 || v[16] === ";" || v[16] === " ";
}

/** The error of the first failed result (all failed: the batch's whole-request error). */
