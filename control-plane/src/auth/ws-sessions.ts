import { GraphQLError } from "graphql";
import type { WebSocket } from "ws";
import { Logger } from "../../../shared/src/log/logger";
import { AuthService } from "./auth.service";
import { Principal } from "./context";

/**
 * graphql-ws close code for "no usable token": sent when `connection_init` carries no token or a bad one,
 * and when the token of an open connection is revoked, expires or is deleted. The graphql-ws client
 * treats 4401 as fatal (no automatic reconnect with the same token).
 */
export const WS_CLOSE_UNAUTHORIZED = 4401;
/** The token could not be checked (database down): the client may retry. */
export const WS_CLOSE_INTERNAL = 4500;

/**
 * Authenticated graphql-ws connections, by access-token id. A connection authenticates once, in
 * `connection_init` (`connectionParams.authorization: "Bearer TOKEN"`), and is closed with 4401:
 * - at once when this process revokes its token (logOut, revokeAccessToken);
 * - within `recheckMs` when the token is revoked by another control-plane instance, expires or is
 *   deleted: one query per period checks the tokens of every open connection.
 * The operator token (ADMIN_TOKEN) comes from the environment and can't be revoked; it is not tracked.
 */
export class WsSessions {
  private readonly byToken = new Map<string, Set<WebSocket>>();
  private readonly timer: NodeJS.Timeout;
  private readonly unsubscribe: () => void;
  private checking = false;

  constructor(
    private readonly auth: AuthService,
    recheckMs: number,
    private readonly log: Logger,
  ) {
    this.unsubscribe = auth.onTokenRevoked((id) => this.closeToken(id, "token revoked"));
    this.timer = setInterval(() => void this.recheck(), recheckMs);
    this.timer.unref();
  }

  /**
   * `onConnect` of graphql-ws: authenticates the connection's token. Returns the principal, or closes
   * the socket (4401 / 4500) and returns null; never throws (a throw would close with its message).
   */
  async connect(socket: WebSocket, params: Record<string, unknown> | undefined): Promise<Principal | null> {
    const auth = params?.authorization ?? params?.Authorization;
    if (typeof auth !== "string" || auth.length === 0) {
      socket.close(WS_CLOSE_UNAUTHORIZED, "Unauthorized: connectionParams.authorization required");
      return null;
    }
    let principal: Principal | null;
    try {
      principal = await this.auth.authenticate(auth);
    } catch (err) {
      if (err instanceof GraphQLError && err.extensions?.code === "UNAUTHENTICATED") {
        socket.close(WS_CLOSE_UNAUTHORIZED, `Unauthorized: ${err.message}`);
      } else {
        this.log.error({ err }, "graphql-ws: token check failed");
        socket.close(WS_CLOSE_INTERNAL, "Internal server error");
      }
      return null;
    }
    if (!principal) {
      socket.close(WS_CLOSE_UNAUTHORIZED, "Unauthorized");
      return null;
    }
    // The socket may have closed while the token was looked up: nothing to track then.
    if (principal.kind === "account" && socket.readyState === socket.OPEN) {
      const id = principal.tokenId;
      let set = this.byToken.get(id);
      if (!set) {
        set = new Set();
        this.byToken.set(id, set);
      }
      set.add(socket);
      socket.once("close", () => {
        const s = this.byToken.get(id);
        s?.delete(socket);
        if (s?.size === 0) this.byToken.delete(id);
      });
    }
    return principal;
  }

  /** Open connections tracked (one per socket authenticated with an account token). */
  get size(): number {
    let n = 0;
    for (const s of this.byToken.values()) n += s.size;
    return n;
  }

  private closeToken(tokenId: string, why: string): void {
    const set = this.byToken.get(tokenId);
    if (!set) return;
    this.byToken.delete(tokenId);
    for (const socket of set) socket.close(WS_CLOSE_UNAUTHORIZED, `Unauthorized: ${why}`);
    this.log.info({ tokenId, sockets: set.size, why }, "graphql-ws: closed connections of a token");
  }

  /** Closes the connections whose token is no longer live. A database failure keeps them until next time. */
  async recheck(): Promise<void> {
    if (this.checking || this.byToken.size === 0) return;
    this.checking = true;
    try {
      const ids = [...this.byToken.keys()];
      const live = await this.auth.liveTokenIds(ids);
      for (const id of ids) if (!live.has(id)) this.closeToken(id, "token revoked or expired");
    } catch (err) {
      this.log.warn({ err }, "graphql-ws: token re-check failed; will retry");
    } finally {
      this.checking = false;
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.unsubscribe();
  }
}
