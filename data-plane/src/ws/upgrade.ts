import type uWS from "uWebSockets.js";
import type ipaddr from "ipaddr.js";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { clientIp, ipBucket } from "../allowlist/ip";
import { bearerToken } from "../auth/jwt";
import type { VerifiedKey } from "../auth/key-verifier";
import { keyIdentifier, nodeIdentifier } from "../limits/admission";
import { type AppCredentials, checkAppKey, isRefusal, type KeyChecked } from "../pipeline/authorize";
import { Endpoint, type GatewayContext } from "../pipeline/context";
import { errorJson, nextRequestId, STATUS } from "../rpc/respond";
import type { HandlerGuard } from "../server/guard";
import { type SessionInit, WsSession } from "./session";
import type { WsSessions } from "./sessions";

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
export const CAP_RETRY_AFTER_MS = 1000;

type Refusal = { row: ErrorRow; limit?: number; retryAfterMs?: number };

/**
 * The app endpoints' authorize: the network, then (app endpoint) the key through the pipeline's app-key
 * authorizer (key, allowlist, User-Agent, JWT); the public endpoint has nothing to check here.
 */
export function appAuthorize(ctx: GatewayContext, endpoint: Endpoint): Authorize {
  return (info) => {
    const pool = ctx.upstreams.get(info.params[0] ?? "");
    if (pool === undefined) return GatewayError.NotFound;
    if (endpoint === Endpoint.Public) return { pool, endpoint, key: undefined };
    if (info.apiKey === "") return GatewayError.MissingKey;
    const creds: AppCredentials = {
      origin: info.origin,
      userAgent: info.userAgent,
      jwtToken: () => info.jwt,
      clientAddress: () => info.ip,
    };
    // The token is checked at the upgrade (and again after key.upsert); the session closes at its exp.
    const decide = (key: VerifiedKey | undefined, c: KeyChecked): SessionInit | ErrorRow => {
      if (isRefusal(c)) return refusalRow(c.row, c.message, c);
      return { pool, endpoint, key, tokenExpiresAtMs: c };
    };
    const v = ctx.verifier.verify(info.apiKey, Date.now(), () => ipBucket(info.ip));
    const check = (r: Awaited<typeof v>) => {
      const key = r.ok ? r.key : undefined;
      const c = checkAppKey(ctx.jwt, r, creds);
      return c instanceof Promise ? c.then((x) => decide(key, x)) : decide(key, c);
    };
    return v instanceof Promise ? v.then(check) : check(v);
  };
}

/** The per-key connection identity: per app (a regenerated key shares it), per node for node keys. */
function connectionKeyId(key: VerifiedKey): string {
  return key.record.kind === "node" ? nodeIdentifier(key) : keyIdentifier(key);
}

/**
 * Upgrades: the request copied, the per-address and per-key connection caps (process-wide counts,
 * limits/tenant-counts.ts), the endpoint's authorize, then the session.
 */
export class WsUpgrades {
  /** Upgrades and subscribes refused by the caps, by reason (rpcgw_ws_cap_refusals_total). */
  readonly capRefusals = new Map<string, number>();

  constructor(
    private readonly ctx: GatewayContext,
    private readonly sessions: WsSessions,
    private readonly guard: HandlerGuard,
    private readonly closing: () => boolean,
  ) {}

  countRefusal(reason: string): void {
    this.capRefusals.set(reason, (this.capRefusals.get(reason) ?? 0) + 1);
  }

  upgrade(
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
        res.end(errorJson(d, "null", { requestId, limit: r.limit, retryAfterMs: r.retryAfterMs }), true);
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
      if (this.closing()) d = GatewayError.ShuttingDown;
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
      this.sessions.meta.set(session, { info, authorize });
      // The places stay taken until uWS calls `close` for this socket, whether that comes after `open`,
      // before it or instead of it (sessions.ts): nothing here guesses from the order of the handlers.
      try {
        // Not within res.cork(). In the handler uWS has the socket corked already; after an await, uWS
        // 20.57's HttpResponse.cork() mistakes the socket upgraded within its callback for the HTTP
        // response it was (the allocation is resized in place), reads the response's state from memory
        // that is now the WebSocket's and can close the socket right after `open` (1006), while the client
        // holds a 101 (uNetworking/uWebSockets#1929). Uncorked, uWS writes the 101 at once and prints a
        // warning about the write (docs/runtime.md).
        res.upgrade({ session }, secKey, secProtocol, secExtensions, context);
      } catch (err) {
        // Not upgraded (the response was no longer valid): no socket will close, so the places go back.
        if (!session.opened && !session.closed) this.sessions.releasePlaces(session);
        throw err;
      }
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
    if (this.sessions.openByIp.get(bucket) < cap) return undefined;
    this.countRefusal(WsLimitError.IpConnections.reason);
    return { row: WsLimitError.IpConnections, limit: cap, retryAfterMs: CAP_RETRY_AFTER_MS };
  }

  /** Takes one place per cap for an upgrade about to open, or answers the cap that refused (taking none). */
  private reservePlaces(bucket: string, connKey: string | undefined): Refusal | undefined {
    const { openByIp, openByKey } = this.sessions;
    const ipCap = this.ctx.config.WS_MAX_CONNECTIONS_PER_IP;
    if (!openByIp.tryAdd(bucket, 1, ipCap)) {
      this.countRefusal(WsLimitError.IpConnections.reason);
      return { row: WsLimitError.IpConnections, limit: ipCap, retryAfterMs: CAP_RETRY_AFTER_MS };
    }
    if (connKey === undefined) return undefined;
    const keyCap = this.ctx.config.WS_MAX_CONNECTIONS_PER_KEY;
    if (openByKey.tryAdd(connKey, 1, keyCap)) return undefined;
    openByIp.sub(bucket, 1);
    this.countRefusal(WsLimitError.Connections.reason);
    return { row: WsLimitError.Connections, limit: keyCap, retryAfterMs: CAP_RETRY_AFTER_MS };
  }
}

/** A refusal by a throttle (JWT failures, key look-ups): its upgrade answer carries `Retry-After`. */
interface ThrottledRow extends ErrorRow {
  readonly retryAfterMs: number;
  readonly limit: number | undefined;
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
      limit: throttled.limit,
    };
    return Object.freeze(t);
  }
  return message === undefined ? row : Object.freeze({ ...row, message });
}

/** A refusal from the JWT rows (`jwt_*` reasons): a session it ends is closed with 4003. */
export function isJwtRow(row: ErrorRow): boolean {
  return row.reason.startsWith("jwt_");
}

export function isErrorRow(d: SessionInit | ErrorRow): d is ErrorRow {
  return typeof (d as ErrorRow).code === "number" && typeof (d as ErrorRow).reason === "string";
}
