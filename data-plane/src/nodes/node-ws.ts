import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import { logAddressPrefix } from "../../../shared/src/net/address-bucket";
import type { NodeRecord } from "../../../shared/src/redis/records";
import { ipBucket } from "../allowlist/ip";
import { withRetryAfter } from "../auth/lookup-throttle";
import { errorJson } from "../rpc/respond";
import { endByStatus } from "../telemetry/tracing";
import type { Authorize, UpgradeInfo, WsGateway } from "../ws/gateway";
import type { SubscriptionTarget } from "../ws/hub";
import type { CustomSessionInit } from "../ws/session";
import type { NodeGateway } from "./node-gateway";
import { decodePathKey } from "./node-http";

/**
 * Where a node's subscriptions go: one live target per node (the WS gateway keeps one subscription hub
 * per slug), its `wsUrl` refreshed from the node record on every upgrade and message, so a node that
 * came back on another address is reconnected there.
 */
class NodeSubscriptionTarget implements SubscriptionTarget {
  readonly slug: string;
  private upstreams: { id: string; wsUrl: string | null; weight: number }[];

  constructor(
    readonly nodeId: string,
    wsUrl: string | null,
  ) {
    this.slug = `node:${nodeId}`;
    this.upstreams = [{ id: nodeId, wsUrl, weight: 1 }];
  }

  get record() {
    return { upstreams: this.upstreams };
  }

  update(wsUrl: string | null): void {
    if (this.upstreams[0]!.wsUrl !== wsUrl) this.upstreams = [{ id: this.nodeId, wsUrl, weight: 1 }];
  }

  describe(): readonly { id: string; breakerOpen: boolean }[] {
    return [];
  }
}

/**
 * WebSocket on the dedicated-node endpoint: `/nodes/{nodeId}/{KEY}` and `/nodes/{nodeId}` (`?apikey=` or
 * header `apikey`), the same rules as HTTP (NodeGateway):
 *
 * - Upgrade: 401 for a missing / wrong key (only the node's own key opens it), 503 when the node has no
 *   record or is not SYNCED; the refusal is the contract error body with that status.
 * - Each text message (single or batch) goes through the request pipeline with the node's stage
 *   (`NodeGateway.handle`: per-second limit, Safe mode per element with -32601, forwarding to the node's
 *   RPC, accounting). The key is re-read per message from the in-process key cache, so switching the node
 *   to SAFE applies to open connections at once.
 * - Single subscribe / unsubscribe calls go through the gateway's subscription hub to the node's own
 *   WebSocket (`eth_subscribe`, `chain_subscribeNewHeads`, ...); they are admitted like any keyed message
 *   (a node key: per node per second, no quota).
 * - Key revoked or regenerated while connected: the gateway re-runs this authorize and closes the socket
 *   with 4001. A node that stops serving while connected keeps the socket (its requests answer 503).
 */
export function registerNodeWsRoutes(
  ws: WsGateway,
  gateway: NodeGateway,
  opts: { idleHubSweepMs?: number } = {},
): { close(): void } {
  const targets = new Map<string, NodeSubscriptionTarget>();
  const targetFor = (node: NodeRecord): NodeSubscriptionTarget => {
    let t = targets.get(node.nodeId);
    if (t === undefined) {
      t = new NodeSubscriptionTarget(node.nodeId, node.wsUrl);
      targets.set(node.nodeId, t);
    } else {
      t.update(node.wsUrl);
    }
    return t;
  };
  // Upgrade infos already accepted: a re-run (key invalidation) checks the key only, not the node state.
  const accepted = new WeakSet<UpgradeInfo>();

  const authorize =
    (keyInPath: boolean): Authorize =>
    async (info): Promise<CustomSessionInit | ErrorRow> => {
      const nodeId = info.params[0] ?? "";
      const apiKey = keyInPath ? decodePathKey(info.params[1] ?? "") : info.apiKey;
      const a = await gateway.authorize(nodeId, apiKey, () => ipBucket(info.ip));
      if (!a.ok) return withRetryAfter(a.error, a.retryAfterMs);
      if (!accepted.has(info)) {
        if (!gateway.serving(a.node)) return GatewayError.NodeUnavailable;
        accepted.add(info);
      }
      const target = targetFor(a.node);
      const ip = info.ip;
      const logIp = () => (ip === undefined ? null : logAddressPrefix(ip));
      return {
        slug: target.slug,
        key: a.key,
        subscriptions: target,
        async handle(text, requestId, trace) {
          const t0 = trace === undefined ? 0 : performance.now();
          const cur = await gateway.authorize(nodeId, apiKey);
          trace?.step("key.verify", t0, { "key.valid": cur.ok });
          // The key stopped working: the gateway is closing this socket (4001); answer meanwhile.
          if (!cur.ok) {
            if (trace !== undefined) endByStatus(trace, cur.error.httpStatus, true);
            return errorJson(cur.error, "null", { requestId });
          }
          target.update(cur.node.wsUrl);
          const reply = await gateway.handle(cur.key, nodeId, text, requestId, logIp, trace);
          // The status the answer would have had over HTTP: a WebSocket message has none of its own.
          if (trace !== undefined) endByStatus(trace, reply.status, true);
          return reply.body;
        },
      };
    };
  ws.route("/nodes/:nodeId/:key", authorize(true));
  ws.route("/nodes/:nodeId", authorize(false));

  // A node's hub keeps its upstream socket (and reconnects it) while it exists: drop the hubs of nodes
  // nobody subscribes to any more, so a stopped or deleted node is not redialled forever. (A subscribe
  // registers itself synchronously before awaiting, so a hub being subscribed to is never idle here.)
  // Targets stay (open sessions hold them; one small object per node seen), so a later subscribe
  // re-creates the hub on the same live target.
  const sweep = setInterval(() => {
    for (const t of targets.values()) {
      const hub = ws.hubs.get(t.slug);
      if (hub !== undefined && hub.sharedSubscriptions() === 0 && hub.clientSubscriptions() === 0) {
        ws.hubs.drop(t.slug);
      }
    }
  }, opts.idleHubSweepMs ?? 30_000);
  sweep.unref();
  return {
    close() {
      clearInterval(sweep);
    },
  };
}
