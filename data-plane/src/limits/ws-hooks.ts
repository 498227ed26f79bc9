import type { ErrorRow } from "../../../shared/src/jsonrpc/errors";
import type { WsHooks } from "../ws/hooks";
import type { LimitsGate } from "./admission";

/** What a WebSocket refusal carries (every element of the message is answered with it). */
export interface WsRefusal {
  row: ErrorRow;
  retryAfterMs: number;
  limit: number;
  message: string | undefined;
}

/**
 * The WebSocket side of the limits, as `WsHooks` (the same rules as HTTP: one admission per text message
 * with its number of request objects, per app key or per client IP on the public endpoint, then the
 * workspace quota). `base` (usage recording, say) is called after, for admitted messages and for every
 * answer and notification.
 *
 * Units: one per `answered` call (the WS gateway calls it once per request object answered; a
 * notification-only request, which gets no response object, is counted too: the gateway does not tell
 * the hook) and one per subscription notification delivered.
 */
export function limitsWsHooks(gate: LimitsGate, base?: WsHooks): WsHooks {
  return {
    admit(session, elements) {
      // Public endpoint: per client address, IPv6 per /64 (computed once per connection).
      const a = gate.admit(session.key, session.key === undefined ? session.ipBucket : undefined, elements);
      if (!a.ok) {
        const refusal: WsRefusal = {
          row: a.row,
          retryAfterMs: a.retryAfterMs,
          limit: a.limit,
          message: a.message,
        };
        return refusal;
      }
      return base?.admit(session, elements);
    },
    answered(session, method, category, seconds) {
      gate.recordServed(session.key, 1);
      base?.answered(session, method, category, seconds);
    },
    notified(session, method, count) {
      gate.recordServed(session.key, count);
      base?.notified(session, method, count);
    },
    rejected(session, method, category) {
      base?.rejected?.(session, method, category);
    },
  };
}
