import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { PlaneEvent } from "../../../shared/src/redis/records";
import type { GatewayContext } from "../pipeline/context";
import type { SubscriptionHubs } from "./hub";
import { type SessionInit, WsClose, type WsSession } from "./session";
import type { WsSessions } from "./sessions";
import { isErrorRow, isJwtRow } from "./upgrade";

/**
 * Keeps open sessions honest: control-plane events (after the key cache applied them) re-run each
 * affected session's authorize and close those whose key or JWT stopped working (4001 / 4003), and a
 * sweep closes sessions whose key or token expired or whose network was removed (4004).
 */
export class WsRevalidation {
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly sessions: WsSessions,
    private readonly hubs: SubscriptionHubs,
  ) {
    this.timer = setInterval(() => this.sweepExpired(), 250);
    this.timer.unref();
  }

  onEvent(event: PlaneEvent): void {
    const byKeyHash = this.sessions.byKeyHash;
    switch (event.type) {
      case "key.revoke": {
        const set = byKeyHash.get(event.keyHash);
        if (set !== undefined) for (const s of [...set]) this.sessions.end(s, WsClose.KeyRevoked);
        break;
      }
      case "key.upsert": {
        const set = byKeyHash.get(event.keyHash);
        if (set !== undefined) for (const s of [...set]) this.revalidate(s);
        break;
      }
      case "workspace.update":
        for (const set of byKeyHash.values()) {
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
    for (const set of this.sessions.byKeyHash.values()) for (const s of set) this.revalidate(s);
  }

  private revalidate(s: WsSession): void {
    const m = this.sessions.meta.get(s);
    if (m === undefined || s.key === undefined) return;
    const apply = (d: SessionInit | ErrorRow) => {
      if (s.closed || s.ending) return;
      // Internal = Redis unavailable: keep serving on what we had rather than dropping everyone. A
      // throttled re-check (someone else flooding the app with bad tokens) is no verdict on this token.
      if (isErrorRow(d)) {
        if (d !== GatewayError.Internal && d.reason !== GatewayError.JwtThrottled.reason)
          this.sessions.end(s, isJwtRow(d) ? WsClose.JwtRefused : WsClose.KeyRevoked);
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
    for (const s of this.sessions.all) {
      if (s.pool !== undefined && this.ctx.upstreams.get(s.slug) !== s.pool)
        this.sessions.end(s, WsClose.NetworkRemoved);
    }
    for (const h of this.hubs.all()) {
      if (h.isNetworkHub && this.ctx.upstreams.get(h.slug) === undefined) this.hubs.drop(h.slug);
    }
    const now = Date.now();
    for (const set of this.sessions.byKeyHash.values()) {
      for (const s of set) {
        const exp = s.key?.record.expiresAtMs;
        if (exp !== null && exp !== undefined && exp <= now) this.sessions.end(s, WsClose.KeyRevoked);
        // A session opened with a JWT lives as long as the token (checked every 250 ms).
        else if (s.tokenExpiresAtMs !== undefined && s.tokenExpiresAtMs <= now)
          this.sessions.end(s, WsClose.JwtRefused);
      }
    }
  }

  close(): void {
    clearInterval(this.timer);
  }
}
