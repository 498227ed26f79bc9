import { ErrorCategory } from "../../../shared/src/jsonrpc/errors";
import { nodeUsageNetwork } from "../nodes/node-gateway";
import type { WsHooks } from "../ws/hooks";
import type { WsSession } from "../ws/session";
import type { UsageRecorder } from "./recorder";

/**
 * The WebSocket side of usage recording, as `WsHooks` (compose under the limits:
 * `limitsWsHooks(gate, usageWsHooks(recorder))`). Network endpoints record under the network's slug; on a
 * dedicated node's endpoint (custom session) the node gateway records what it answers itself, and these
 * hooks record the rest (subscribe / unsubscribe, notifications, unparsable messages) under
 * `node-{nodeId}` like it does; other custom endpoints are not recorded here.
 *
 * - `answered`: one row unit per request object answered, with its method, category and latency.
 * - `rejected`: one per request object refused before being forwarded (parse error, 429, in-flight cap).
 * - `notified`: one per subscription notification delivered (one response unit; a published message
 *   counts its clients of one key in one call), category Success,
 *   latency 0 (a push has no request to time), method = the notification method (`eth_subscription`...).
 *
 * Workspace and app come from `session.key` (undefined on the public endpoint: null, null).
 */
export function usageWsHooks(recorder: UsageRecorder): WsHooks {
  const record = (s: WsSession, method: string, category: string, latencyMs: number, units = 1) => {
    const rec = s.key?.record;
    let network: string;
    if (s.pool !== undefined) network = s.pool.slug;
    else if (rec?.kind === "node" && rec.nodeId) network = nodeUsageNetwork(rec.nodeId);
    else return;
    recorder.record({
      workspaceId: rec?.workspaceId ?? null,
      appId: rec?.appId ?? null,
      network,
      method,
      category: category as ErrorCategory,
      latencyMs,
      units,
    });
  };
  return {
    admit: () => undefined,
    answered(s, method, category, seconds) {
      record(s, method, category, seconds * 1000);
    },
    rejected(s, method, category) {
      record(s, method, category, 0);
    },
    notified(s, method, count) {
      record(s, method, ErrorCategory.Success, 0, count);
    },
  };
}
