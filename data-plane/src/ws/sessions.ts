import type uWS from "uWebSockets.js";
import { UNIT_WEIGHTS } from "../limits/compute-units";
import type { TenantCounts } from "../limits/tenant-counts";
import { countPushes } from "../pipeline/account";
import type { GatewayContext } from "../pipeline/context";
import type { FanoutSink } from "./hub";
import { type UserData, WsClose, type WsSession } from "./session";
import type { Authorize, UpgradeInfo } from "./upgrade";

/** What a session was opened with: re-run after key invalidations (revalidate.ts). */
export interface SessionMeta {
  info: UpgradeInfo;
  authorize: Authorize;
}

/**
 * The open sessions: the registry (all, by key hash, what each was opened with), the connection caps'
 * counts, and the way to a socket (sends, notifications and their accounting, closing).
 */
export class WsSessions {
  readonly all = new Set<WsSession>();
  readonly byKeyHash = new Map<string, Set<WsSession>>();
  readonly meta = new WeakMap<WsSession, SessionMeta>();
  /** Notifications delivered to clients (rpcgw_ws_notifications_total). */
  notifications = 0;
  /** Sessions closed by the gateway, by close reason. */
  readonly closedBy = new Map<string, number>();
  /**
   * Open sockets per key identity and per client-address bucket, in this process: every serving thread
   * counts into the same tables (limits/tenant-counts.ts; not shared through Redis: each data-plane process
   * enforces the caps on its own sockets). Raised at the upgrade, before `res.upgrade` (one check-and-add
   * per cap), and lowered once, when uWS calls `close` for that socket, whether it called `open` before,
   * after or not at all: a place is held exactly from the upgrade's decision to the socket's close.
   */
  readonly openByKey: TenantCounts;
  readonly openByIp: TenantCounts;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly app: uWS.TemplatedApp,
  ) {
    this.openByKey = ctx.tenantCounts.wsByKey;
    this.openByIp = ctx.tenantCounts.wsByIp;
  }

  /** Gives back the places a session holds (once: `counted` is cleared). */
  releasePlaces(s: WsSession): void {
    if (!s.counted) return;
    s.counted = false;
    this.openByIp.sub(s.ipBucket, 1);
    if (s.connKey !== undefined) this.openByKey.sub(s.connKey, 1);
  }

  onOpen(ws: uWS.WebSocket<UserData>): void {
    const s = ws.getUserData().session;
    // A socket uWS already reported closed is not brought back (its handle is invalid, its places are
    // back). Places are never taken here: the upgrade took them (reservePlaces), `close` gives them back.
    if (s.closed) return;
    s.opened = true;
    s.ws = ws;
    this.all.add(s);
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

  onClose(ws: uWS.WebSocket<UserData>): void {
    const s = ws.getUserData().session;
    s.closed = true;
    s.ws = undefined;
    this.all.delete(s);
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

  /** Sends one message; a client whose unsent backlog passes WS_MAX_BUFFERED_BYTES is closed (4008). */
  send(s: WsSession, text: string | Uint8Array): void {
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

  /**
   * Notifications delivered: counted, and accounted to the session's key (pipeline/account.ts) at the
   * network's weight for the notification method (a dedicated node's endpoint weighs every method 1).
   */
  private notified(s: WsSession, method: string, count: number): void {
    this.notifications += count;
    countPushes(this.ctx, s.key, s.usageNetwork, method, count, s.pool?.weights ?? UNIT_WEIGHTS);
  }

  /** A notification: sent without corking (one write per socket anyway), counted. */
  private deliver(s: WsSession, data: string | Buffer, method: string): void {
    if (s.closed || s.ending) return;
    const ws = s.ws!;
    // 1 = written out; otherwise a backlog is building up (0) or the message was dropped (2).
    if (ws.send(data, false) !== 1 && ws.getBufferedAmount() > this.ctx.config.WS_MAX_BUFFERED_BYTES) {
      this.end(s, WsClose.SlowConsumer);
    }
    this.notified(s, method, 1);
  }

  /**
   * The hubs' way to the sockets. A published message is written by uWS after the current event-loop
   * turn; a client whose backlog then passed WS_MAX_BUFFERED_BYTES is closed (4008) right after that
   * write (`police`), before any later message, as a direct send closes it. uWS drops a message for a
   * socket past maxBackpressure (twice the limit and more): such a socket has passed the limit and is
   * closed in the same turn, so a client never sees a gap followed by later notifications.
   */
  fanoutSink(): FanoutSink {
    const limit = this.ctx.config.WS_MAX_BUFFERED_BYTES;
    return {
      deliver: (s, data, method) => this.deliver(s, data, method),
      delivered: (s, method, count) => this.notified(s, method, count),
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
}
