import uWS from "uWebSockets.js";
import type { PlaneEvent } from "../../../shared/src/redis/records";
import { Endpoint, type GatewayContext } from "../pipeline/context";
import { HandlerGuard } from "../server/guard";
import { SubscriptionHubs } from "./hub";
import { WsMessages } from "./messages";
import { WsRevalidation } from "./revalidate";
import { type UserData, WsClose } from "./session";
import { WsSessions } from "./sessions";
import { type Authorize, appAuthorize, WsUpgrades } from "./upgrade";
import { registerWsMetrics } from "./ws-metrics";

export { type Authorize, type UpgradeInfo, WsLimitError } from "./upgrade";

/**
 * WebSocket JSON-RPC on the data plane's port, the transport's parts side by side: upgrades and the
 * connection caps (upgrade.ts), the open sessions (sessions.ts), text messages through the request
 * pipeline (messages.ts), key revalidation (revalidate.ts), subscriptions through shared upstream sockets
 * (hub.ts) and the metrics (ws-metrics.ts). Slow consumers are closed (4008), revoked keys within 1 s (4001).
 */
export class WsGateway {
  readonly hubs: SubscriptionHubs;
  private readonly sessions: WsSessions;
  private readonly upgrades: WsUpgrades;
  private readonly messages: WsMessages;
  private readonly revalidation: WsRevalidation;
  /** Wraps every WebSocket handler: an exception closes that one socket (1011) or answers 500. */
  private readonly guard: HandlerGuard;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly app: uWS.TemplatedApp,
  ) {
    const c = ctx.config;
    this.guard = new HandlerGuard(ctx.logger, ctx.metrics);
    this.sessions = new WsSessions(ctx, app);
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
      this.sessions.fanoutSink(),
      ctx.logger,
    );
    this.upgrades = new WsUpgrades(ctx, this.sessions, this.guard, () => this.messages.closing);
    this.messages = new WsMessages(ctx, this.sessions, this.hubs, (r) => this.upgrades.countRefusal(r));
    this.revalidation = new WsRevalidation(ctx, this.sessions, this.hubs);
    registerWsMetrics(ctx.metrics, {
      sessions: this.sessions,
      hubs: this.hubs,
      capRefusals: this.upgrades.capRefusals,
      clientSubscriptionCount: () => this.clientSubscriptionCount(),
    });
  }

  /** Registers the standard app routes: `/{network}/rpc`, `/{network}/jsonrpc`, `/{network}/public`. */
  registerAppRoutes(): void {
    this.route("/:network/rpc", appAuthorize(this.ctx, Endpoint.App));
    this.route("/:network/jsonrpc", appAuthorize(this.ctx, Endpoint.App));
    this.route("/:network/public", appAuthorize(this.ctx, Endpoint.Public));
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
    const messages = this.messages;
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
        upgrade: (res, req, context) =>
          this.upgrades.upgrade(res, req, context, paramCount, authorize, spanName),
        open: (ws) => this.sessions.onOpen(ws),
        message: (ws, message, isBinary) =>
          message.byteLength > maxMessage ? messages.tooBig(ws) : messages.onMessage(ws, message, isBinary),
        close: (ws) => this.sessions.onClose(ws),
      }),
    );
  }

  /** Closes a session with a code: graceful close frame, then a hard close if it does not complete. */
  end(s: Parameters<WsSessions["end"]>[0], close: { code: number; reason: string }): void {
    this.sessions.end(s, close);
  }

  /** Control-plane events (after the key cache applied them): closes sessions whose key stopped working. */
  onEvent(event: PlaneEvent): void {
    this.revalidation.onEvent(event);
  }

  /** Re-checks every keyed session (Redis reconnect, resync). */
  revalidateAll(): void {
    this.revalidation.revalidateAll();
  }

  // ---- introspection ----

  connections(): number {
    return this.sessions.all.size;
  }

  /**
   * Open sockets counted against the caps: for one key identity (`app:{appId}`, `node:{nodeId}`) or
   * client-address bucket (`ipBucket`), or with no argument the number of identities / buckets tracked.
   */
  openConnections(by: { key?: string; ip?: string } = {}): number {
    const { openByKey, openByIp } = this.sessions;
    if (by.key !== undefined) return openByKey.get(by.key);
    if (by.ip !== undefined) return openByIp.get(by.ip);
    return openByKey.size + openByIp.size;
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
    return this.sessions.closedBy.get(reason) ?? 0;
  }

  // ---- shutdown ----

  /**
   * Refuses new upgrades and new messages (503 `shutting_down`, see WsMessages) and waits (up to
   * `drainMs`) for the requests in flight. Sockets stay open: a message arriving later still gets its 503
   * answer (during the HTTP server's linger) instead of being lost in the close handshake; `close` ends
   * them.
   */
  drain(drainMs: number): Promise<void> {
    return this.messages.drain(drainMs);
  }

  /** `drain`, then every socket is closed with 1001 and the upstream subscription sockets with it. */
  async close(drainMs = 0): Promise<void> {
    await this.drain(drainMs);
    for (const s of [...this.sessions.all]) this.sessions.end(s, WsClose.GoingAway);
    this.revalidation.close();
    this.hubs.close();
    // Give close frames a moment to leave.
    if (this.sessions.all.size > 0) await new Promise((r) => setTimeout(r, 50));
  }
}
