import uWS from "uWebSockets.js";
import type ipaddr from "ipaddr.js";
import { Counter, Gauge } from "prom-client";
import { errorResponse } from "../../../shared/src/jsonrpc/error-object";
import { ErrorCategory, type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { logAddressPrefix } from "../../../shared/src/net/address-bucket";
import type { PlaneEvent } from "../../../shared/src/redis/records";
import { clientIp, ipBucket } from "../allowlist/ip";
import { bearerToken, type JwtCheck } from "../auth/jwt";
import type { VerifiedKey } from "../auth/key-verifier";
import { withRetryAfter } from "../auth/lookup-throttle";
import {
  elementRefusal,
  forwardCall,
  forwardPlan,
  Outcome,
  planBatch,
  planBody,
  refusalJson,
  refuseForwarded,
  resultCategory,
  resultJson,
  setElement,
} from "../forward/forward";
import { keyIdentifier, nodeIdentifier } from "../limits/admission";
import type { TenantCounts } from "../limits/tenant-counts";
import { PromMetrics } from "../metrics/metrics";
import { type BatchItem, isItemError, parseRpcBody, type RpcCall } from "../rpc/parse";
import { Endpoint, type GatewayContext } from "../server/context";
import { HandlerGuard } from "../server/guard";
import { errorJson, nextRequestId, replyJson, STATUS } from "../server/respond";
import { endByCategories, endByCategory, type RequestTrace } from "../telemetry/tracing";
import { type NetworkPool } from "../upstream/network-pool";
import type { CallResult } from "../upstream/reply";
import { NOOP_WS_HOOKS, type WsHooks } from "./hooks";
import { type FanoutSink, SubscriptionHubs } from "./hub";
import { isSubscriptionMethod, SUBSCRIBE, UNSUBSCRIBE } from "./methods";
import { type CustomSessionInit, type SessionInit, type UserData, WsClose, WsSession } from "./session";

/** What an upgrade handler sees of the HTTP upgrade request (copied synchronously from uWS). */
export interface UpgradeInfo {
  readonly url: string;
  /** Route parameters in pattern order (e.g. [network] or [nodeId, key]). */
  readonly params: readonly string[];
  /** `?apikey=` or the `apikey` header ("" when absent). */
  readonly apiKey: string;
  readonly origin: string;
  /** `User-Agent` ("" when absent): checked against the app's allowed patterns. */
  readonly userAgent: string;
  /**
   * The JWT offered: `Authorization: Bearer <jwt>`, else `?jwt=` (browsers cannot set headers on a
   * WebSocket); "" when none.
   */
  readonly jwt: string;
  readonly forwardedFor: string;
  /** Client address (X-Forwarded-For only from TRUSTED_PROXIES). */
  readonly ip: ipaddr.IPv4 | ipaddr.IPv6 | undefined;
  /**
   * The upgrade request's `traceparent` ("" when absent, or not read: tracing off): the parent of every
   * message's span on this connection (data-plane/src/telemetry).
   */
  readonly traceparent: string;
}

/**
 * Decides an upgrade: a session for an accepted connection, or an error row (its HTTP status and
 * contract error body are sent instead of upgrading). Also re-run after key invalidations: an error row
 * then closes the connection with 4001.
 */
export type Authorize = (info: UpgradeInfo) => SessionInit | ErrorRow | Promise<SessionInit | ErrorRow>;

/** The WebSocket-only rows of the shared error table, by their use here. */
export const WsLimitError = Object.freeze({
  InFlight: GatewayError.WsInFlightLimit,
  Subscriptions: GatewayError.WsSubscriptionLimit,
  NoSubscriptions: GatewayError.NoUpstreamWebSocket,
  Connections: GatewayError.WsConnectionLimit,
  IpConnections: GatewayError.WsIpConnectionLimit,
  UpstreamSubscriptions: GatewayError.WsUpstreamSubscriptionLimit,
});

/**
 * `data.retryAfterMs` of a connection-cap or subscription-budget refusal: a slot frees when one of the
 * client's own sockets or subscriptions ends, which the gateway cannot foresee; one second is the hint.
 */
const CAP_RETRY_AFTER_MS = 1000;

/** The per-key connection identity: per app (a regenerated key shares it), per node for node keys. */
function connectionKeyId(key: VerifiedKey): string {
  return key.record.kind === "node" ? nodeIdentifier(key) : keyIdentifier(key);
}

type Refusal = { row: ErrorRow; limit?: number; retryAfterMs?: number };

interface Answer {
  text: string | undefined;
  category: string;
  after?: () => void;
}

interface SessionMeta {
  info: UpgradeInfo;
  authorize: Authorize;
}

/**
 * WebSocket JSON-RPC on the data plane's port: upgrade-time auth and allowlists, requests and batches
 * with the same validation, policy, cache and upstream pools as HTTP, and subscriptions through shared
 * upstream sockets (see hub.ts). Slow consumers are closed (4008), revoked keys close within 1 s (4001).
 */
export class WsGateway {
  readonly hubs: SubscriptionHubs;
  private readonly sessions = new Set<WsSession>();
  private readonly byKeyHash = new Map<string, Set<WsSession>>();
  private readonly meta = new WeakMap<WsSession, SessionMeta>();
  private closing = false;
  private sweepTimer: NodeJS.Timeout | undefined;
  private notifications = 0;
  private readonly closedBy = new Map<string, number>();
  private drainWaiters: (() => void)[] = [];
  private inFlightTotal = 0;
  /**
   * Open sockets per key identity and per client-address bucket, in this process: every serving thread
   * counts into the same tables (limits/tenant-counts.ts; not shared through Redis: each data-plane process
   * enforces the caps on its own sockets). Raised in `onOpen`, which uWS calls synchronously inside
   * `res.upgrade`, so the check in `decide` and the count cannot interleave with another upgrade of this
   * thread; lowered once in `onClose`.
   */
  private readonly openByKey: TenantCounts;
  private readonly openByIp: TenantCounts;
  private readonly capRefusals = new Map<string, number>();
  /** Wraps every WebSocket handler: an exception closes that one socket (1011) or answers 500. */
  private readonly guard: HandlerGuard;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly app: uWS.TemplatedApp,
    private readonly hooks: WsHooks = NOOP_WS_HOOKS,
  ) {
    const c = ctx.config;
    this.openByKey = ctx.tenantCounts.wsByKey;
    this.openByIp = ctx.tenantCounts.wsByIp;
    this.guard = new HandlerGuard(ctx.logger, ctx.metrics);
    this.hubs = new SubscriptionHubs(
      {
        connections: c.UPSTREAM_WS_CONNECTIONS,
        timeoutMs: c.UPSTREAM_TIMEOUT_MS,
        reconnectMaxMs: c.UPSTREAM_WS_RECONNECT_MAX_MS,
        pingIntervalMs: c.UPSTREAM_WS_PING_INTERVAL_MS,
        maxResponseBytes: c.UPSTREAM_MAX_RESPONSE_BYTES,
        maxQueued: 256,
        maxUpstreamPerTenant: c.WS_MAX_UPSTREAM_SUBSCRIPTIONS_PER_WORKSPACE,
      },
      this.fanoutSink(),
      ctx.logger,
    );
    this.sweepTimer = setInterval(() => this.sweepExpired(), 250);
    this.sweepTimer.unref();
    this.registerMetrics();
  }

  /** Registers the standard app routes: `/{network}/rpc`, `/{network}/jsonrpc`, `/{network}/public`. */
  registerAppRoutes(): void {
    this.route("/:network/rpc", this.appAuthorize(Endpoint.App));
    this.route("/:network/jsonrpc", this.appAuthorize(Endpoint.App));
    this.route("/:network/public", this.appAuthorize(Endpoint.Public));
  }

  /**
   * Serves WebSocket JSON-RPC on `pattern` (uWS route syntax) with `authorize` deciding each upgrade.
   * The dedicated-node endpoint calls this with its own authorize (node key, Safe-mode policy).
   */
  route(pattern: string, authorize: Authorize): void {
    const paramCount = (pattern.match(/\/:/g) ?? []).length;
    // A message's span is named after the route, its parameters as placeholders (`WS /{network}/rpc`).
    const spanName = `WS ${pattern.replace(/:(\w+)/g, "{$1}")}`;
    const c = this.ctx.config;
    const maxMessage = c.MAX_BODY_BYTES;
    this.app.ws<UserData>(
      pattern,
      this.guard.ws("ws", {
        compression: uWS.DISABLED,
        // Above MAX_BODY_BYTES so that such a message reaches `message` and gets 1009 (uWS itself drops
        // the connection without a close frame, 1006, when a frame passes maxPayloadLength).
        maxPayloadLength: Math.max(c.WS_MAX_FRAME_BYTES, maxMessage),
        idleTimeout: c.WS_IDLE_TIMEOUT_S,
        sendPingsAutomatically: true,
        maxBackpressure: c.WS_MAX_BUFFERED_BYTES * 2 + 64 * 1024,
        closeOnBackpressureLimit: false,
        upgrade: (res, req, context) => this.upgrade(res, req, context, paramCount, authorize, spanName),
        open: (ws) => this.onOpen(ws),
        message: (ws, message, isBinary) =>
          message.byteLength > maxMessage ? this.tooBig(ws) : this.onMessage(ws, message, isBinary),
        close: (ws) => this.onClose(ws),
      }),
    );
  }

  /** A message over MAX_BODY_BYTES: counted as a Client Error and the socket closed with 1009. */
  private tooBig(ws: uWS.WebSocket<UserData>): void {
    const s = ws.getUserData().session;
    this.ctx.metrics.request(s.slug, ErrorCategory.ClientError, 0);
    this.hooks.rejected?.(s, "", ErrorCategory.ClientError);
    this.end(s, WsClose.TooBig);
  }

  private appAuthorize(endpoint: Endpoint): Authorize {
    return (info) => {
      const pool = this.ctx.upstreams.get(info.params[0] ?? "");
      if (pool === undefined) return GatewayError.NotFound;
      if (endpoint === Endpoint.Public) return { pool, endpoint, key: undefined };
      if (info.apiKey === "") return GatewayError.MissingKey;
      const finish = (
        v: Awaited<ReturnType<GatewayContext["verifier"]["verify"]>>,
      ): ReturnType<Authorize> => {
        if (!v.ok) return withRetryAfter(v.error, v.retryAfterMs);
        const key = v.key;
        if (key.record.kind !== "app") return GatewayError.UnknownKey;
        if (!key.allowlist.empty) {
          const refused = key.allowlist.check(info.origin, () => info.ip);
          if (refused !== undefined) return refused;
        }
        const access = key.access;
        if (access === undefined) return { pool, endpoint, key };
        const uaRefused = access.userAgentRefusal(info.userAgent);
        if (uaRefused !== undefined) return uaRefused;
        if (access.jwt === undefined) return { pool, endpoint, key };
        // The token is checked at the upgrade (and again after key.upsert); the session closes at its exp.
        const withJwt = (c: JwtCheck): SessionInit | ErrorRow =>
          c.ok ? { pool, endpoint, key, tokenExpiresAtMs: c.expiresAtMs } : refusalRow(c.row, c.message, c);
        const c = this.ctx.jwt.check(access.jwt, key.record.appId ?? key.hash, info.jwt, ipBucket(info.ip));
        return c instanceof Promise ? c.then(withJwt) : withJwt(c);
      };
      const v = this.ctx.verifier.verify(info.apiKey, Date.now(), () => ipBucket(info.ip));
      return v instanceof Promise ? v.then(finish) : finish(v);
    };
  }

  // ---- upgrade ----

  private upgrade(
    res: uWS.HttpResponse,
    req: uWS.HttpRequest,
    context: uWS.us_socket_context_t,
    paramCount: number,
    authorize: Authorize,
    spanName: string,
  ): void {
    // Everything needed from req is copied now: it is invalid once this handler returns.
    const secKey = req.getHeader("sec-websocket-key");
    const secProtocol = req.getHeader("sec-websocket-protocol");
    const secExtensions = req.getHeader("sec-websocket-extensions");
    const params: string[] = [];
    for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? "");
    const forwardedFor = req.getHeader("x-forwarded-for");
    const peer = Buffer.from(res.getRemoteAddressAsText()).toString("latin1");
    const info: UpgradeInfo = {
      url: req.getUrl(),
      params,
      apiKey: req.getQuery("apikey") || req.getHeader("apikey"),
      origin: req.getHeader("origin"),
      userAgent: req.getHeader("user-agent"),
      jwt: bearerToken(req.getHeader("authorization")) || (req.getQuery("jwt") ?? ""),
      forwardedFor,
      ip: clientIp(peer, forwardedFor, this.ctx.trustedProxies),
      traceparent: this.ctx.tracing.enabled ? req.getHeader("traceparent") : "",
    };
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const bucket = ipBucket(info.ip);
    const refuse = (r: Refusal) => {
      const d = r.row;
      const requestId = nextRequestId();
      res.cork(() => {
        res.writeStatus(STATUS[d.httpStatus] ?? `${d.httpStatus} Error`);
        res.writeHeader("x-request-id", requestId);
        if (r.retryAfterMs !== undefined) {
          res.writeHeader("retry-after", String(Math.ceil(r.retryAfterMs / 1000)));
        }
        res.writeHeader("content-type", "application/json");
        res.end(errorText(d, "null", { requestId, limit: r.limit, retryAfterMs: r.retryAfterMs }), true);
      });
    };
    // The per-address cap first, before any key lookup: a flood of upgrades from one address costs no
    // Redis round trip.
    const ipRefusal = this.ipCapRefusal(bucket);
    if (ipRefusal !== undefined) {
      refuse(ipRefusal);
      return;
    }
    const decide = (d: SessionInit | ErrorRow) => {
      if (aborted) return;
      if (this.closing) d = GatewayError.ShuttingDown;
      if (isErrorRow(d)) {
        const t = d as Partial<ThrottledRow>;
        refuse({ row: d, retryAfterMs: t.retryAfterMs, limit: t.limit });
        return;
      }
      // The places are taken here, each with one atomic add against its cap (given back when over), so
      // upgrades racing on several serving threads cannot all pass a check made before any of them opened.
      const connKey = d.key === undefined ? undefined : connectionKeyId(d.key);
      const capped = this.reservePlaces(bucket, connKey);
      if (capped !== undefined) {
        refuse(capped);
        return;
      }
      const session = new WsSession(d, info.ip);
      session.connKey = connKey;
      session.counted = true;
      session.spanName = spanName;
      session.traceparent = info.traceparent;
      this.meta.set(session, { info, authorize });
      res.cork(() => {
        res.upgrade<UserData>({ session }, secKey, secProtocol, secExtensions, context);
      });
      // uWS opens the socket within upgrade(); one that did not open (the client went away) gives its
      // places back (should it open later after all, onOpen counts it then).
      if (session.ws === undefined && !session.closed) this.releasePlaces(session);
    };
    let d: ReturnType<Authorize>;
    try {
      d = authorize(info);
    } catch (err) {
      this.ctx.logger.error({ err }, "websocket upgrade authorize threw");
      d = GatewayError.Internal;
    }
    if (d instanceof Promise) {
      d.then(decide, (err: unknown) => {
        this.ctx.logger.error({ err }, "websocket upgrade authorize failed");
        decide(GatewayError.Internal);
      }).catch((err: unknown) => {
        // `decide` threw (after the guard's try/catch had returned): answered like a throwing handler.
        if (!aborted) this.guard.httpFailed("ws.upgrade", res, err);
      });
    } else {
      decide(d);
    }
  }

  private ipCapRefusal(bucket: string): Refusal | undefined {
    const cap = this.ctx.config.WS_MAX_CONNECTIONS_PER_IP;
    if (this.openByIp.get(bucket) < cap) return undefined;
    this.countRefusal(WsLimitError.IpConnections.reason);
    return { row: WsLimitError.IpConnections, limit: cap, retryAfterMs: CAP_RETRY_AFTER_MS };
  }

  /** Upgrades and subscribes refused by the caps, by reason (rpcgw_ws_cap_refusals_total). */
  private countRefusal(reason: string): void {
    this.capRefusals.set(reason, (this.capRefusals.get(reason) ?? 0) + 1);
  }

  /** Takes one place per cap for an upgrade about to open, or answers the cap that refused (taking none). */
  private reservePlaces(bucket: string, connKey: string | undefined): Refusal | undefined {
    const ipCap = this.ctx.config.WS_MAX_CONNECTIONS_PER_IP;
    if (!this.openByIp.tryAdd(bucket, 1, ipCap)) {
      this.countRefusal(WsLimitError.IpConnections.reason);
      return { row: WsLimitError.IpConnections, limit: ipCap, retryAfterMs: CAP_RETRY_AFTER_MS };
    }
    if (connKey === undefined) return undefined;
    const keyCap = this.ctx.config.WS_MAX_CONNECTIONS_PER_KEY;
    if (this.openByKey.tryAdd(connKey, 1, keyCap)) return undefined;
    this.openByIp.sub(bucket, 1);
    this.countRefusal(WsLimitError.Connections.reason);
    return { row: WsLimitError.Connections, limit: keyCap, retryAfterMs: CAP_RETRY_AFTER_MS };
  }

  /** Gives back the places a session holds (once: `counted` is cleared). */
  private releasePlaces(s: WsSession): void {
    if (!s.counted) return;
    s.counted = false;
    this.openByIp.sub(s.ipBucket, 1);
    if (s.connKey !== undefined) this.openByKey.sub(s.connKey, 1);
  }

  private onOpen(ws: uWS.WebSocket<UserData>): void {
    const s = ws.getUserData().session;
    s.ws = ws;
    this.sessions.add(s);
    // Counted at the upgrade (reservePlaces), released once in onClose; counted here only when the
    // places were given back because the socket had not opened within upgrade().
    if (!s.counted) {
      s.counted = true;
      this.openByIp.add(s.ipBucket, 1);
      if (s.connKey !== undefined) this.openByKey.add(s.connKey, 1);
    }
    const hash = s.key?.hash;
    if (hash !== undefined) {
      let set = this.byKeyHash.get(hash);
      if (set === undefined) {
        set = new Set();
        this.byKeyHash.set(hash, set);
      }
      set.add(s);
    }
  }

  private onClose(ws: uWS.WebSocket<UserData>): void {
    const s = ws.getUserData().session;
    s.closed = true;
    s.ws = undefined;
    this.sessions.delete(s);
    this.releasePlaces(s);
    const hash = s.key?.hash;
    if (hash !== undefined) {
      const set = this.byKeyHash.get(hash);
      set?.delete(s);
      if (set?.size === 0) this.byKeyHash.delete(hash);
    }
    for (const sub of [...s.subs.values()]) sub.unsubscribe();
    s.subs.clear();
  }

  // ---- sending ----

  /** Sends one message; a client whose unsent backlog passes WS_MAX_BUFFERED_BYTES is closed (4008). */
  private send(s: WsSession, text: string | Uint8Array): void {
    if (s.closed || s.ending) return;
    const ws = s.ws!;
    let status = 1;
    ws.cork(() => {
      status = ws.send(text, false);
    });
    if (status !== 1 && ws.getBufferedAmount() > this.ctx.config.WS_MAX_BUFFERED_BYTES) {
      this.end(s, WsClose.SlowConsumer);
    }
  }

  /** A notification: sent without corking (one write per socket anyway), counted, hooked. */
  private deliver(s: WsSession, data: string | Buffer, method: string): void {
    if (s.closed || s.ending) return;
    const ws = s.ws!;
    // 1 = written out; otherwise a backlog is building up (0) or the message was dropped (2).
    if (ws.send(data, false) !== 1 && ws.getBufferedAmount() > this.ctx.config.WS_MAX_BUFFERED_BYTES) {
      this.end(s, WsClose.SlowConsumer);
    }
    this.notifications++;
    this.hooks.notified(s, method, 1);
  }

  /**
   * The hubs' way to the sockets. A published message is written by uWS after the current event-loop
   * turn; a client whose backlog then passed WS_MAX_BUFFERED_BYTES is closed (4008) right after that
   * write (`police`), before any later message, as a direct send closes it. uWS drops a message for a
   * socket past maxBackpressure (twice the limit and more): such a socket has passed the limit and is
   * closed in the same turn, so a client never sees a gap followed by later notifications.
   */
  private fanoutSink(): FanoutSink {
    const limit = this.ctx.config.WS_MAX_BUFFERED_BYTES;
    return {
      deliver: (s, data, method) => this.deliver(s, data, method),
      delivered: (s, method, count) => {
        this.notifications += count;
        this.hooks.notified(s, method, count);
      },
      join: (s, topic) => {
        if (s.closed || s.ending || s.ws === undefined) return false;
        s.ws.subscribe(topic);
        return true;
      },
      leave: (s, topic) => {
        // A closed socket's handle is invalid, and uWS has already taken it off every topic.
        if (!s.closed && s.ws !== undefined) s.ws.unsubscribe(topic);
      },
      publish: (topic, text) => {
        this.app.publish(topic, text, false);
      },
      police: (s) => {
        if (!s.closed && !s.ending && s.ws!.getBufferedAmount() > limit) this.end(s, WsClose.SlowConsumer);
      },
    };
  }

  /** Closes a session with a code: graceful close frame, then a hard close if it does not complete. */
  end(s: WsSession, close: { code: number; reason: string }): void {
    if (s.closed || s.ending) return;
    s.ending = true;
    this.closedBy.set(close.reason, (this.closedBy.get(close.reason) ?? 0) + 1);
    const ws = s.ws!;
    ws.cork(() => ws.end(close.code, close.reason));
    if (!s.closed) {
      setTimeout(() => {
        if (!s.closed) s.ws?.close();
      }, this.ctx.config.WS_CLOSE_GRACE_MS).unref();
    }
  }

  // ---- requests ----

  private onMessage(ws: uWS.WebSocket<UserData>, message: ArrayBuffer, isBinary: boolean): void {
    const s = ws.getUserData().session;
    if (s.ending) return;
    const requestId = nextRequestId();
    const slug = s.slug;
    if (isBinary) {
      this.ctx.metrics.request(slug, ErrorCategory.ClientError, 0);
      this.hooks.rejected?.(s, "", ErrorCategory.ClientError);
      this.send(s, errorText(GatewayError.ParseError, "null", { requestId }));
      return;
    }
    const bytes = Buffer.from(message);
    const text = bytes.toString("utf8");
    // The bytes are uWS's, valid during this call only: the parse reads them now, nothing keeps them.
    const parsed = parseRpcBody(text, bytes);
    if (!parsed.ok) {
      this.ctx.metrics.request(slug, parsed.error.category, 0);
      this.hooks.rejected?.(s, "", parsed.error.category);
      this.logRequest(s, undefined, parsed.error.category, 0, requestId, 0, parsed.error.reason);
      this.send(s, errorText(parsed.error, parsed.idText, { requestId, limit: parsed.limit }));
      return;
    }
    if (this.closing) {
      this.refuseShuttingDown(s, parsed, requestId);
      return;
    }
    // A message that parsed is a request: its span (when sampled) runs until its answer is sent.
    const trace = this.ctx.tracing.enabled
      ? this.ctx.tracing.start(s.spanName, s.traceparent, performance.now(), "ws", s.slug, requestId)
      : undefined;
    const custom = s.custom;
    if (
      custom !== undefined &&
      (parsed.batch || s.target === undefined || !isSubscriptionMethod(parsed.call.method))
    ) {
      this.handleCustom(s, custom, text, requestId, trace);
      return;
    }
    const items: BatchItem[] = parsed.batch ? parsed.items : [parsed.call];
    const n = items.length;
    const t0 = trace === undefined ? 0 : performance.now();
    let refusal: { row: ErrorRow; retryAfterMs?: number; limit?: number; message?: string } | undefined =
      this.hooks.admit(s, n);
    if (refusal === undefined && s.inFlight + n > this.ctx.config.WS_MAX_IN_FLIGHT_PER_CONNECTION) {
      refusal = { row: WsLimitError.InFlight, limit: this.ctx.config.WS_MAX_IN_FLIGHT_PER_CONNECTION };
    }
    if (trace !== undefined) {
      trace.step("limits.admit", t0, { "limits.admitted": refusal === undefined, "rpc.request_objects": n });
      trace.set(parsed.batch ? { "rpc.batch.size": n } : { "rpc.method": parsed.call.method });
      if (refusal !== undefined) endByCategory(trace, refusal.row.category, refusal.row.reason);
    }
    if (refusal !== undefined) {
      const r = refusal;
      const parts: string[] = [];
      for (let i = 0; i < items.length; i++) {
        const it = items[i]!;
        this.ctx.metrics.request(slug, r.row.category, 0);
        this.hooks.rejected?.(s, isItemError(it) ? "" : it.method, r.row.category);
        this.logRequest(s, it, r.row.category, 0, requestId, i, r.row.reason);
        const idText = isItemError(it) ? it.idText : it.idText;
        if (idText === undefined) continue;
        parts.push(
          errorText(r.row, idText, {
            requestId,
            retryAfterMs: r.retryAfterMs,
            limit: r.limit,
            message: r.message,
          }),
        );
      }
      if (parts.length > 0) this.send(s, parsed.batch ? `[${parts.join(",")}]` : parts[0]!);
      return;
    }
    s.inFlight += n;
    this.inFlightTotal += n;
    const work = parsed.batch
      ? this.batch(s, items, requestId, parsed.verbatim ? text : undefined, trace)
      : this.single(s, parsed.call, requestId, trace);
    work
      .catch((err: unknown) => {
        this.ctx.logger.error(
          { err, requestId, ...trace?.logFields() },
          "unhandled error in websocket pipeline",
        );
        if (trace !== undefined) endByCategory(trace, ErrorCategory.ServiceError, "internal");
        this.send(s, errorText(GatewayError.Internal, "null", { requestId }));
      })
      .finally(() => this.settled(s, n));
  }

  /**
   * During the drain (see `close`) a new message is answered with 503 `shutting_down` per request object,
   * before any work, and recorded in usage like any refusal (`rejected`): the drain then only waits for
   * what was in flight at the signal instead of running its full time under steady traffic.
   */
  private refuseShuttingDown(
    s: WsSession,
    parsed: { batch: true; items: BatchItem[] } | { batch: false; call: RpcCall },
    requestId: string,
  ): void {
    const row = GatewayError.ShuttingDown;
    const items: BatchItem[] = parsed.batch ? parsed.items : [parsed.call];
    const parts: string[] = [];
    for (const it of items) {
      this.ctx.metrics.request(s.slug, row.category, 0);
      this.hooks.rejected?.(s, isItemError(it) ? "" : it.method, row.category);
      if (it.idText !== undefined) parts.push(errorText(row, it.idText, { requestId }));
    }
    if (parts.length > 0) this.send(s, parsed.batch ? `[${parts.join(",")}]` : parts[0]!);
  }

  /** A custom endpoint's own answer (its handler does its own limits and accounting). */
  private handleCustom(
    s: WsSession,
    custom: CustomSessionInit,
    text: string,
    requestId: string,
    trace: RequestTrace | undefined,
  ): void {
    const cap = this.ctx.config.WS_MAX_IN_FLIGHT_PER_CONNECTION;
    if (s.inFlight >= cap) {
      if (trace !== undefined)
        endByCategory(trace, WsLimitError.InFlight.category, WsLimitError.InFlight.reason);
      this.send(s, errorText(WsLimitError.InFlight, "null", { requestId, limit: cap }));
      return;
    }
    s.inFlight++;
    this.inFlightTotal++;
    custom
      .handle(text, requestId, trace)
      .then(
        (body) => {
          if (body !== undefined && body !== "") this.send(s, body);
        },
        (err: unknown) => {
          this.ctx.logger.error(
            { err, requestId, ...trace?.logFields() },
            "unhandled error in websocket endpoint handler",
          );
          if (trace !== undefined) endByCategory(trace, ErrorCategory.ServiceError, "internal");
          this.send(s, errorText(GatewayError.Internal, "null", { requestId }));
        },
      )
      .finally(() => this.settled(s, 1));
  }

  private settled(s: WsSession, n: number): void {
    s.inFlight -= n;
    this.inFlightTotal -= n;
    if (this.inFlightTotal === 0 && this.drainWaiters.length > 0) {
      const w = this.drainWaiters;
      this.drainWaiters = [];
      for (const f of w) f();
    }
  }

  private async single(
    s: WsSession,
    call: RpcCall,
    requestId: string,
    trace: RequestTrace | undefined,
  ): Promise<void> {
    const started = performance.now();
    const a = await this.answer(s, call, requestId, trace);
    if (trace !== undefined) endByCategory(trace, a.category);
    if (a.text !== undefined && call.idText !== undefined) this.send(s, a.text);
    a.after?.();
    const secs = (performance.now() - started) / 1000;
    this.ctx.metrics.request(s.slug, a.category, secs);
    this.hooks.answered(s, call.method, a.category, secs);
    this.logRequest(s, call, a.category, secs, requestId, 0, "");
  }

  /**
   * One request-log record for a network endpoint's request object (custom endpoints, i.e. dedicated
   * nodes, log through their own handler). Sampling first: an unsampled success allocates nothing.
   */
  private logRequest(
    s: WsSession,
    it: BatchItem | undefined,
    category: string,
    secs: number,
    requestId: string,
    item: number,
    reason: string,
    /** The message's draw for its successes, when it has several request objects. */
    successes?: boolean,
  ): void {
    const log = this.ctx.requestLog;
    if (s.pool === undefined) return;
    const wanted =
      category === ErrorCategory.Success && successes !== undefined ? successes : log.wants(category);
    if (!wanted) return;
    const rec = s.key?.record;
    log.record({
      time: Date.now(),
      workspaceId: rec?.workspaceId ?? null,
      appId: rec?.appId ?? null,
      network: s.pool.slug,
      transport: "ws",
      method: it === undefined || isItemError(it) ? "other" : it.method,
      httpStatus: 0,
      category,
      reason,
      latencyMs: Math.round(secs * 1e6) / 1000,
      requestId,
      item,
      clientIp: s.ip === undefined ? null : logAddressPrefix(s.ip),
    });
  }

  /** `text`: the message, when it may go upstream as it is (ParseResult `verbatim`). */
  private async batch(
    s: WsSession,
    items: BatchItem[],
    requestId: string,
    text: string | undefined,
    trace: RequestTrace | undefined,
  ): Promise<void> {
    const started = performance.now();
    const n = items.length;
    const pool = s.pool!;
    const policy = s.policy ?? this.ctx.policy;
    const rules = s.key?.access?.methods;
    const plan = planBatch(
      items,
      requestId,
      (c) => elementRefusal(c, pool, policy, rules),
      isSubscriptionCall,
    );
    const pending: Promise<void>[] = [];
    // Subscription activations, run once the batch's answer is sent (as for a single subscribe).
    const after = new Array<(() => void) | undefined>(n);
    for (const i of plan.localIdx) {
      const it = items[i] as RpcCall;
      pending.push(
        this.answer(s, it, requestId, undefined).then((a) => {
          setElement(plan, i, it.idText === undefined ? undefined : a.text, a.category);
          after[i] = a.after;
        }),
      );
    }
    if (plan.forward.length > 0) {
      pending.push(
        forwardPlan(this.ctx, pool, this.flightId(s), plan, requestId, text, trace).then((done) => {
          if (done.overCap === undefined) return;
          // Over a concurrency cap: every forwarded element gets the refusal (the others keep their answers).
          this.recordConcurrencyRefusal(s, plan.forward.length);
          refuseForwarded(plan, done.overCap, requestId);
        }),
      );
    }
    await Promise.all(pending);
    if (trace !== undefined) endByCategories(trace, plan.categories);
    const body = planBody(plan);
    if (body !== "") this.send(s, body);
    const secs = (performance.now() - started) / 1000;
    // As over HTTP: one draw per message for its successes (server/exchange.ts usage).
    const successes = this.ctx.requestLog.wants(ErrorCategory.Success);
    for (let i = 0; i < n; i++) {
      after[i]?.();
      const category = plan.categories[i]!;
      this.ctx.metrics.request(pool.record.slug, category, secs);
      const it = items[i]!;
      this.hooks.answered(s, isItemError(it) ? "" : it.method, category, secs);
      this.logRequest(s, it, category, secs, requestId, i, "", successes);
    }
  }

  private fromResult(call: RpcCall, r: CallResult, requestId: string): Answer {
    return { text: resultJson(call.idText ?? "null", r, requestId), category: resultCategory(r) };
  }

  /** One request object: policy, subscriptions, else cache + upstream pool (as over HTTP). */
  /** `trace`: a sampled single call's span (a batch's local elements get none of their own). */
  private async answer(
    s: WsSession,
    call: RpcCall,
    requestId: string,
    trace: RequestTrace | undefined,
  ): Promise<Answer> {
    const idText = call.idText ?? "null";
    const pool = s.pool;
    const spec = SUBSCRIBE.get(call.method);
    const family = spec === undefined ? UNSUBSCRIBE.get(call.method) : undefined;
    // Other calls meet the method policy in the forwarding core.
    if (pool !== undefined && (spec !== undefined || family !== undefined)) {
      const refused = elementRefusal(call, pool, s.policy ?? this.ctx.policy, s.key?.access?.methods);
      if (refused !== undefined) {
        return { text: refusalJson(refused, idText, requestId), category: refused.row.category };
      }
    }
    if (spec !== undefined) {
      const max = this.ctx.config.WS_MAX_SUBSCRIPTIONS_PER_CONNECTION;
      if (s.subs.size >= max) {
        const row = WsLimitError.Subscriptions;
        return { text: errorText(row, idText, { requestId, limit: max }), category: row.category };
      }
      const target = s.target;
      if (target === undefined || !target.record.upstreams.some((u) => u.wsUrl !== null && u.wsUrl !== "")) {
        const row = WsLimitError.NoSubscriptions;
        return { text: errorText(row, idText, { requestId }), category: row.category };
      }
      const r = await this.hubs.for(target).subscribe(s, call.method, call.params, spec);
      if (r.ok) {
        return {
          text: replyJson(idText, `,"result":${JSON.stringify(r.id)}}`),
          category: ErrorCategory.Success,
          after: r.activate,
        };
      }
      if (r.row !== undefined) {
        if (r.limit !== undefined) this.countRefusal(r.row.reason);
        const x = {
          requestId,
          limit: r.limit,
          retryAfterMs: r.limit === undefined ? undefined : CAP_RETRY_AFTER_MS,
        };
        return { text: errorText(r.row, idText, x), category: r.row.category };
      }
      return { text: replyJson(idText, r.tail), category: r.category };
    }
    if (family !== undefined) {
      const p = call.params;
      const id = Array.isArray(p) ? p[0] : undefined;
      const entry = typeof id === "string" ? s.subs.get(id) : undefined;
      const ok = entry !== undefined && entry.family === family;
      if (ok) entry.unsubscribe();
      return { text: replyJson(idText, `,"result":${ok}}`), category: ErrorCategory.Success };
    }
    if (pool === undefined) {
      return {
        text: errorText(GatewayError.Internal, idText, { requestId }),
        category: ErrorCategory.ServiceError,
      };
    }
    const r = await this.forward(s, pool, call, requestId, trace);
    return "ok" in r ? this.fromResult(call, r, requestId) : r;
  }

  /**
   * The concurrency cap's tenant: the app key's limit id, else the client's address bucket (as on HTTP),
   * which is the session's `tenant` (`ip:{bucket}`), built once per connection rather than per call.
   */
  private flightId(s: WsSession): string {
    return s.key !== undefined ? keyIdentifier(s.key) : s.tenant;
  }

  /** One message's refusal by MAX_IN_FLIGHT_PER_KEY in the limits metrics (`elements` request objects). */
  private recordConcurrencyRefusal(s: WsSession, elements: number): void {
    const reason = GatewayError.ConcurrencyLimit.reason;
    this.ctx.metrics.limitRefused(s.key !== undefined ? "app" : "public", reason, elements);
  }

  /**
   * A single call (as over HTTP) through the forwarding core; a refusal by the concurrency caps is
   * answered per call.
   */
  private async forward(
    s: WsSession,
    pool: NetworkPool,
    call: RpcCall,
    requestId: string,
    trace: RequestTrace | undefined,
  ): Promise<CallResult | Answer> {
    const rules = s.key?.access?.methods;
    let out = forwardCall(this.ctx, pool, s.policy ?? this.ctx.policy, this.flightId(s), call, rules, trace);
    if (out instanceof Promise) out = await out;
    switch (out.kind) {
      case Outcome.Cached:
        return { ok: true, reply: out.reply };
      case Outcome.Forwarded:
        return out.result;
      case Outcome.Refused:
        return {
          text: refusalJson(out.refusal, call.idText ?? "null", requestId),
          category: out.refusal.row.category,
        };
      case Outcome.OverCap: {
        this.recordConcurrencyRefusal(s, 1);
        const r = out.refusal;
        return {
          text: errorJson(r.row, call.idText ?? "null", { requestId, ...r }),
          category: r.row.category,
        };
      }
    }
  }

  // ---- key invalidation ----

  /** Control-plane events (after the key cache applied them): closes sessions whose key stopped working. */
  onEvent(event: PlaneEvent): void {
    switch (event.type) {
      case "key.revoke": {
        const set = this.byKeyHash.get(event.keyHash);
        if (set !== undefined) for (const s of [...set]) this.end(s, WsClose.KeyRevoked);
        break;
      }
      case "key.upsert": {
        const set = this.byKeyHash.get(event.keyHash);
        if (set !== undefined) for (const s of [...set]) this.revalidate(s);
        break;
      }
      case "workspace.update":
        for (const set of this.byKeyHash.values()) {
          for (const s of set) if (s.key?.record.workspaceId === event.workspaceId) this.revalidate(s);
        }
        break;
      case "resync":
        this.revalidateAll();
        break;
      case "networks.update":
        break;
    }
  }

  /** Re-checks every keyed session (Redis reconnect, resync). */
  revalidateAll(): void {
    for (const set of this.byKeyHash.values()) for (const s of set) this.revalidate(s);
  }

  private revalidate(s: WsSession): void {
    const m = this.meta.get(s);
    if (m === undefined || s.key === undefined) return;
    const apply = (d: SessionInit | ErrorRow) => {
      if (s.closed || s.ending) return;
      // Internal = Redis unavailable: keep serving on what we had rather than dropping everyone. A
      // throttled re-check (someone else flooding the app with bad tokens) is no verdict on this token.
      if (isErrorRow(d)) {
        if (d !== GatewayError.Internal && d.reason !== GatewayError.JwtThrottled.reason)
          this.end(s, isJwtRow(d) ? WsClose.JwtRefused : WsClose.KeyRevoked);
        return;
      }
      if (d.key !== undefined) s.key = d.key;
      if (d.pool !== undefined) s.tokenExpiresAtMs = d.tokenExpiresAtMs;
    };
    try {
      const d = m.authorize(m.info);
      if (d instanceof Promise) d.then(apply, () => {});
      else apply(d);
    } catch {
      // keep the session
    }
  }

  private sweepExpired(): void {
    // Sessions on a network that was removed (its pool is gone or replaced) are closed with 4004.
    for (const s of this.sessions) {
      if (s.pool !== undefined && this.ctx.upstreams.get(s.slug) !== s.pool)
        this.end(s, WsClose.NetworkRemoved);
    }
    for (const h of this.hubs.all()) {
      if (h.isNetworkHub && this.ctx.upstreams.get(h.slug) === undefined) this.hubs.drop(h.slug);
    }
    const now = Date.now();
    for (const set of this.byKeyHash.values()) {
      for (const s of set) {
        const exp = s.key?.record.expiresAtMs;
        if (exp !== null && exp !== undefined && exp <= now) this.end(s, WsClose.KeyRevoked);
        // A session opened with a JWT lives as long as the token (checked every 250 ms).
        else if (s.tokenExpiresAtMs !== undefined && s.tokenExpiresAtMs <= now)
          this.end(s, WsClose.JwtRefused);
      }
    }
  }

  // ---- introspection ----

  connections(): number {
    return this.sessions.size;
  }

  /**
   * Open sockets counted against the caps: for one key identity (`app:{appId}`, `node:{nodeId}`) or
   * client-address bucket (`ipBucket`), or with no argument the number of identities / buckets tracked.
   */
  openConnections(by: { key?: string; ip?: string } = {}): number {
    if (by.key !== undefined) return this.openByKey.get(by.key);
    if (by.ip !== undefined) return this.openByIp.get(by.ip);
    return this.openByKey.size + this.openByIp.size;
  }

  /** Upstream subscriptions a tenant (`w:{workspaceId}`, `ip:{bucket}`) holds a share of on one network. */
  tenantUpstreamSubscriptions(slug: string, tenant: string): number {
    return this.hubs.get(slug)?.tenantSubscriptions(tenant) ?? 0;
  }

  /** Upstream subscriptions live now (one per distinct merged subscription), per network or in total. */
  upstreamSubscriptionCount(slug?: string): number {
    if (slug !== undefined) return this.hubs.get(slug)?.upstreamSubscriptions() ?? 0;
    let n = 0;
    for (const h of this.hubs.all()) n += h.upstreamSubscriptions();
    return n;
  }

  clientSubscriptionCount(): number {
    let n = 0;
    for (const h of this.hubs.all()) n += h.clientSubscriptions();
    return n;
  }

  /** Sessions closed by the gateway, by close reason. */
  closedCount(reason: string): number {
    return this.closedBy.get(reason) ?? 0;
  }

  private registerMetrics(): void {
    const m = this.ctx.metrics;
    if (!(m instanceof PromMetrics)) return;
    const registers = [m.registry];
    const self = this;
    new Gauge({
      name: "rpcgw_ws_connections",
      help: "Open client WebSocket connections",
      registers,
      collect() {
        this.set(self.sessions.size);
      },
    });
    new Gauge({
      name: "rpcgw_ws_upstream_subscriptions",
      help: "Upstream subscriptions (merged: one per distinct method + params per network)",
      labelNames: ["network"],
      registers,
      collect() {
        this.reset();
        for (const h of self.hubs.all()) this.set({ network: h.slug }, h.upstreamSubscriptions());
      },
    });
    new Gauge({
      name: "rpcgw_ws_client_subscriptions",
      help: "Client subscriptions (fanned out from upstream subscriptions)",
      registers,
      collect() {
        this.set(self.clientSubscriptionCount());
      },
    });
    new Counter({
      name: "rpcgw_ws_fanout_seconds_total",
      help: "Time spent fanning upstream notifications out to clients, until uWS has written the published messages",
      registers,
      collect() {
        this.reset();
        let t = 0;
        for (const h of self.hubs.all()) t += h.fanoutSeconds;
        this.inc(t);
      },
    });
    new Counter({
      name: "rpcgw_ws_fanouts_total",
      help: "Upstream notifications fanned out (each to every subscribed client)",
      registers,
      collect() {
        this.reset();
        let n = 0;
        for (const h of self.hubs.all()) n += h.fanouts;
        this.inc(n);
      },
    });
    new Counter({
      name: "rpcgw_ws_heads_dropped_total",
      help: "New-heads notifications not sent to subscribers: below, or the same as, the highest head already sent",
      registers,
      collect() {
        this.reset();
        let n = 0;
        for (const h of self.hubs.all()) n += h.headsDropped;
        this.inc(n);
      },
    });
    new Gauge({
      name: "rpcgw_ws_fanout_max_seconds",
      help: "Longest single fan-out since start",
      registers,
      aggregator: "max",
      collect() {
        let m = 0;
        for (const h of self.hubs.all()) m = Math.max(m, h.fanoutMaxSeconds);
        this.set(m);
      },
    });
    new Counter({
      name: "rpcgw_ws_notifications_total",
      help: "Subscription notifications delivered to clients",
      registers,
      collect() {
        this.reset();
        this.inc(self.notifications);
      },
    });
    new Counter({
      name: "rpcgw_ws_cap_refusals_total",
      help: "WebSocket upgrades refused by the connection caps and subscribes refused by the upstream-subscription budget, by reason",
      labelNames: ["reason"],
      registers,
      collect() {
        this.reset();
        for (const [reason, n] of self.capRefusals) this.inc({ reason }, n);
      },
    });
    new Counter({
      name: "rpcgw_ws_closed_total",
      help: "Client WebSockets closed by the gateway, by reason",
      labelNames: ["reason"],
      registers,
      collect() {
        this.reset();
        for (const [reason, n] of self.closedBy) this.inc({ reason }, n);
      },
    });
  }

  // ---- shutdown ----

  /**
   * Refuses new upgrades and new messages (503 `shutting_down`, see `refuseShuttingDown`) and waits (up to
   * `drainMs`) for the requests in flight. Sockets stay open: a message arriving later still gets its 503
   * answer (during the HTTP server's linger) instead of being lost in the close handshake; `close` ends
   * them.
   */
  async drain(drainMs: number): Promise<void> {
    this.closing = true;
    if (this.inFlightTotal > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, drainMs);
        this.drainWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** `drain`, then every socket is closed with 1001 and the upstream subscription sockets with it. */
  async close(drainMs = 0): Promise<void> {
    await this.drain(drainMs);
    for (const s of [...this.sessions]) this.end(s, WsClose.GoingAway);
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
    this.hubs.close();
    // Give close frames a moment to leave.
    if (this.sessions.size > 0) await new Promise((r) => setTimeout(r, 50));
  }
}

/** Batch elements the WebSocket transport answers itself: subscribe and unsubscribe calls. */
function isSubscriptionCall(call: RpcCall): boolean {
  return SUBSCRIBE.has(call.method) || UNSUBSCRIBE.has(call.method);
}

/** A refusal by a throttle (JWT failures, key look-ups): its upgrade answer carries `Retry-After`. */
interface ThrottledRow extends ErrorRow {
  readonly retryAfterMs: number;
  readonly limit: number;
}

/** `row` with a more specific message (a JWT refusal's), as the upgrade refusal's body carries it. */
function refusalRow(
  row: ErrorRow,
  message: string | undefined,
  throttled?: { retryAfterMs?: number; limit?: number },
): ErrorRow {
  if (throttled?.retryAfterMs !== undefined) {
    const t: ThrottledRow = {
      ...row,
      message: message ?? row.message,
      retryAfterMs: throttled.retryAfterMs,
      limit: throttled.limit ?? 0,
    };
    return Object.freeze(t);
  }
  return message === undefined ? row : Object.freeze({ ...row, message });
}

/** A refusal from the JWT rows (`jwt_*` reasons): a session it ends is closed with 4003. */
function isJwtRow(row: ErrorRow): boolean {
  return row.reason.startsWith("jwt_");
}

function isErrorRow(d: SessionInit | ErrorRow): d is ErrorRow {
  return typeof (d as ErrorRow).code === "number" && typeof (d as ErrorRow).reason === "string";
}

function errorText(
  row: ErrorRow,
  idText: string,
  extras: { requestId: string; limit?: number; retryAfterMs?: number; message?: string },
): string {
  const x: Record<string, unknown> = { requestId: extras.requestId };
  if (extras.limit !== undefined) x.limit = extras.limit;
  if (extras.retryAfterMs !== undefined) x.retryAfterMs = extras.retryAfterMs;
  if (extras.message !== undefined) x.message = extras.message;
  const obj = errorResponse(row, null, x);
  return `{"jsonrpc":"2.0","id":${idText},"error":${JSON.stringify(obj.error)}}`;
}
