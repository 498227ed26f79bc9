import type { ErrorRow } from "../../../shared/src/jsonrpc/errors";
import type { WsSession } from "./session";

/**
 * Seams where per-key limits and usage plug into the WebSocket path (kept out of the WS code itself).
 * Every call is synchronous and on the hot path: keep it cheap.
 */
export interface WsHooks {
  /**
   * Called once per text message with its number of request objects (1 for a single, n for a batch),
   * before anything is forwarded. Return a row (e.g. GatewayError.RateLimited / DailyLimit) to refuse the
   * whole message: every element is answered with that error object (`data.retryAfterMs` from
   * `retryAfterMs`), nothing is forwarded, and the socket stays open. `session.key` is the key record
   * (undefined on the public endpoint; use `session.ip` there).
   */
  admit(
    session: WsSession,
    elements: number,
  ): { row: ErrorRow; retryAfterMs?: number; limit?: number; message?: string } | undefined;
  /** One request object answered (usage recording): method, dashboard category, latency in seconds. */
  answered(session: WsSession, method: string, category: string, seconds: number): void;
  /**
   * `count` subscription notifications delivered (one response unit each): to this client, or, for a
   * message published to every client sharing a subscription, to `count` clients with this client's key.
   * `method` is the notification method (`eth_subscription`, `chain_newHead`, ...).
   */
  notified(session: WsSession, method: string, count: number): void;
  /**
   * One request object answered with an error before anything was forwarded (unparsable message, refusal
   * from `admit`, in-flight cap): usage recording only, never counted as served. `method` is "" when the
   * message could not be parsed.
   */
  rejected?(session: WsSession, method: string, category: string): void;
}

export const NOOP_WS_HOOKS: WsHooks = {
  admit: () => undefined,
  answered: () => {},
  notified: () => {},
};
