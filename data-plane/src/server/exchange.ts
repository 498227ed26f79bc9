import type { HttpRequest, HttpResponse } from "uWebSockets.js";
import { GatewayError } from "../../../shared/src/jsonrpc/errors";
import { logAddressPrefix } from "../../../shared/src/net/address-bucket";
import { clientIp, ipBucket } from "../allowlist/ip";
import { bearerToken } from "../auth/jwt";
import type { VerifyResult } from "../auth/key-verifier";
import { rateLimitHeaders } from "../limits/admission";
import { nodeUsageNetwork } from "../pipeline/account";
import {
  type AppCredentials,
  checkAppKey,
  isRefusal,
  type KeyChecked,
  type NodeAuthResult,
} from "../pipeline/authorize";
import { Endpoint, type GatewayContext } from "../pipeline/context";
import { type Pending, PipelineRequest } from "../pipeline/request";
import { STATUS } from "../rpc/respond";
import type { NetworkPool } from "../upstream/network-pool";
import { requestIdFor } from "./request-id";

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

/**
 * Decodes single-chunk bodies straight from uWS's ArrayBuffer (no Buffer view first: one object and one
 * copy less per request; figures in docs/benchmarks.md). Invalid sequences become U+FFFD as with Buffer#toString; `ignoreBOM` keeps a leading BOM
 * in the text, as Buffer#toString does, so such a body stays a parse error.
 */
const UTF8 = new TextDecoder("utf-8", { ignoreBOM: true });

const EXPOSE_HEADERS =
  "X-Request-Id, X-Cache, X-Compute-Units, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Unit, Retry-After";

/** A dedicated node's route: the node named in the path and the key as sent (path, query or header). */
export interface NodeRoute {
  readonly nodeId: string;
  readonly apiKey: string;
  readonly keyInPath: boolean;
}

/**
 * The HTTP transport of one request on an RPC endpoint (an app's, the public one, a dedicated node's):
 * body intake, the slow-body timeout, the client's address, and header writing. Checks, admission,
 * forwarding, the answer and its accounting are the pipeline's (PipelineRequest). Everything needed from
 * `req` is copied in the constructor (uWS invalidates it when the handler returns); every later write is
 * corked.
 */
export class RpcExchange extends PipelineRequest implements AppCredentials {
  /** When the first partial body chunk arrived (set only for multi-chunk bodies). */
  bodyStartedAtMs = 0;
  private aborted = false;
  private chunks: Buffer[] | undefined;
  private bytes = 0;
  private readonly apiKey: string;
  readonly origin: string;
  private readonly forwardedFor: string;
  /**
   * `User-Agent` and `Authorization`, read only when the key's access rules need them (or the key is not
   * cached yet, when whether they do is not known while `req` is still valid).
   */
  userAgent = "";
  private authorization = "";
  private verification: VerifyResult | Promise<VerifyResult> | Promise<NodeAuthResult> | undefined;
  /** Value for Access-Control-Allow-Origin, "" = none. */
  private allowOrigin = "";

  constructor(
    private readonly ctx: GatewayContext,
    private readonly tracker: ExchangeTracker,
    private readonly res: HttpResponse,
    req: HttpRequest,
    private readonly endpoint: Endpoint,
    pool: NetworkPool | undefined,
    /** When the route handler took the request (performance.now() ms). */
    startedAt: number,
    private readonly node?: NodeRoute,
  ) {
    const slug = node === undefined ? pool!.record.slug : nodeUsageNetwork(node.nodeId);
    super(
      node === undefined ? ctx : ctx.nodes!.deps,
      node === undefined ? "http" : "node",
      // The client's own X-Request-Id when well formed (request-id.ts), else a fresh one.
      requestIdFor(req.getHeader("x-request-id")),
      slug,
      node === undefined ? slug : "",
      startedAt,
      pool,
      ctx.policy,
      endpoint === Endpoint.App ? "app" : endpoint === Endpoint.Public ? "public" : "node",
    );
    this.apiKey =
      node !== undefined
        ? node.apiKey
        : endpoint === Endpoint.App
          ? req.getQuery("apikey") || req.getHeader("apikey")
          : "";
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

  protected get gone(): boolean {
    return this.aborted;
  }

  private startTrace(traceparent: string): void {
    const node = this.node;
    const name =
      node !== undefined
        ? node.keyInPath
          ? "POST /nodes/{nodeId}/{key}"
          : "POST /nodes/{nodeId}"
        : this.endpoint === Endpoint.App
          ? "POST /{network}/rpc"
          : "POST /{network}/public";
    const label = node !== undefined ? `node:${node.nodeId}` : this.network;
    this.trace = this.ctx.tracing.start(name, traceparent, this.startedAt, "http", label, this.requestId);
  }

  /** The key lookup as a span of a sampled request, from `t0` to when it settled. */
  private traceKey(v: VerifyResult | Promise<VerifyResult | NodeAuthResult>, t0: number): void {
    const t = this.trace!;
    if (v instanceof Promise)
      v.then(
        (r) => t.step("key.verify", t0, { "key.valid": r.ok, "key.cached": false }),
        () => {},
      );
    else t.step("key.verify", t0, { "key.valid": v.ok, "key.cached": true });
  }

  /** Synchronous checks on headers, then body streaming. Called from the route handler. */
  start(req: HttpRequest): void {
    if (!isJsonContentType(req.getHeader("content-type"))) {
      this.fail(GatewayError.UnsupportedMediaType, "null");
      return;
    }
    const declared = req.getHeader("content-length");
    if (declared !== "" && Number(declared) > this.ctx.config.MAX_BODY_BYTES) {
      this.fail(GatewayError.BodyTooLarge, "null");
      return;
    }
    if (this.endpoint !== Endpoint.Public) {
      if (this.apiKey === "") {
        this.fail(GatewayError.MissingKey, "null");
        return;
      }
      // Starts the key lookup while the body streams in (sync on a cache hit).
      const t0 = this.trace === undefined ? 0 : performance.now();
      // The client's address bucket is worked out only when the key must be read from Redis (throttle).
      const node = this.node;
      if (node !== undefined) {
        const a = this.ctx.nodes!.authorize(node.nodeId, node.apiKey, () => ipBucket(this.clientAddress()));
        // Awaited once the body is in; handled here too so a failed lookup of an aborted request is not
        // an unhandled rejection.
        a.catch(() => {});
        this.verification = a;
        if (this.trace !== undefined) this.traceKey(a, t0);
      } else {
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
    const v = this.verification;
    if (v === undefined) {
      // Public endpoint: per client address, IPv6 per /64 (ipBucket).
      this.ipBucket = ipBucket(this.clientAddress());
      return this.run(text);
    }
    if (this.node !== undefined)
      return (v as Promise<NodeAuthResult>).then((a) => this.nodeAuthorized(a, text));
    if (v instanceof Promise) return (v as Promise<VerifyResult>).then((r) => this.verified(r, text));
    return this.verified(v as VerifyResult, text);
  }

  private verified(v: VerifyResult, text: string): Pending {
    if (this.aborted) return;
    // Usage attribution from here on, even when a later check refuses.
    if (v.ok && v.key.record.kind === "app") this.key = v.key;
    const c = checkAppKey(this.ctx.jwt, v, this);
    if (c instanceof Promise) return c.then((r) => this.keyChecked(r, text));
    return this.keyChecked(c, text);
  }

  private keyChecked(c: KeyChecked, text: string): Pending {
    if (this.aborted) return;
    if (isRefusal(c)) {
      // An origin or address off the allowlist gets no CORS headers.
      if (c.row === GatewayError.OriginNotAllowed || c.row === GatewayError.IpNotAllowed)
        this.allowOrigin = "";
      return this.fail(c.row, "null", c.limit, true, c.message, c.retryAfterMs);
    }
    const allowlist = this.key!.allowlist;
    if (allowlist.restrictsOrigin && !allowlist.originAllowed(this.origin)) this.allowOrigin = "";
    return this.run(text);
  }

  private nodeAuthorized(a: NodeAuthResult, text: string): Pending {
    if (this.aborted) return;
    if (!a.ok) return this.fail(a.error, "null", undefined, true, undefined, a.retryAfterMs);
    this.key = a.key;
    this.stage = this.ctx.nodes!.stage;
    return this.run(text);
  }

  /** The JWT offered: `Authorization: Bearer <jwt>` ("" when none, or not read). */
  jwtToken(): string {
    return bearerToken(this.authorization);
  }

  /**
   * The client's address: the socket's peer, or `X-Forwarded-For` when the peer is in TRUSTED_PROXIES.
   * Undefined once the client went away.
   */
  clientAddress(): ReturnType<typeof clientIp> {
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

  /**
   * Queues the response; `flushAnswers` writes every queued one after the event loop's poll phase. While
   * the server drains, the connection is closed after it.
   *
   * Why not write at once: each response's send on loopback also wakes the client's thread when it is
   * waiting, and a client that reads one response between two of ours (spaced by our work on the next
   * request) waits, and is woken, every time. Answers sent back to back after the poll phase keep the
   * reader busy instead (docs/benchmarks.md). A lone request waits only for the end of the loop iteration
   * it arrived in (not counted in the latency recorded for metrics and usage, which is taken when the
   * answer is ready).
   *
   * Every answer is therefore asynchronous to uWS, which closes a connection that sends its next request
   * before the previous answer (HTTP/1.1 pipelining): pipelining is not supported (README "Endpoints"),
   * as it already was not for any request that waited on an upstream or a key lookup.
   */
  protected deliver(): void {
    // An aborted or timed-out exchange is already done (onAborted / timeOut), so this one is live.
    if (this.hasLogRows) {
      const addr = this.clientAddress();
      this.logged(this.status, addr === undefined ? null : logAddressPrefix(addr));
    }
    if (this.trace !== undefined)
      this.endTrace(this.status, this.status >= 500 ? `HTTP ${this.status}` : undefined);
    ANSWERS.push(this);
    if (ANSWERS.length === 1) setImmediate(flushAnswers);
  }

  /** Writes the queued response (corked) and ends the exchange. Never throws. */
  writeQueued(): void {
    try {
      if (!this.aborted) this.res.cork(() => this.write(this.status, this.body));
    } catch (err) {
      this.ctx.logger.error({ err, requestId: this.requestId }, "writing a response failed");
      // A response cut off mid-write would leave the client waiting: close the connection instead.
      try {
        if (!this.aborted) this.res.close();
      } catch {}
    }
    this.body = "";
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
    if (this.cache !== "") block += `\r\nx-cache: ${this.cache}`;
    const rl = rateLimitHeaders(this.rate);
    if (rl !== undefined) {
      block += `\r\nx-ratelimit-limit: ${rl[0]}\r\nx-ratelimit-remaining: ${rl[1]}`;
      if (this.rateUnit !== "") block += `\r\nx-ratelimit-unit: ${this.rateUnit}`;
    }
    if (this.computeUnits >= 0) block += `\r\nx-compute-units: ${this.computeUnits}`;
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
      this.cache === ""
        ? { "http.response.status_code": status }
        : { "http.response.status_code": status, "gateway.cache": this.cache },
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

/** Whether the body's first non-blank character opens an array. */
function looksLikeBatch(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return c === 0x5b;
  }
  return false;
}

/** `application/json`, optionally with parameters (`; charset=utf-8`); any letter case. */
export function isJsonContentType(value: string): boolean {
  if (value === "application/json") return true;
  if (value.length < 16) return false;
  const v = value.toLowerCase();
  if (!v.startsWith("application/json")) return false;
  return v.length === 16 || v[16] === ";" || v[16] === " ";
}
