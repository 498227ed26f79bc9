import type { WebSocket } from "uWebSockets.js";
import type ipaddr from "ipaddr.js";
import { ipBucket } from "../allowlist/ip";
import type { VerifiedKey } from "../auth/key-verifier";
import { nodeUsageNetwork } from "../pipeline/account";
import type { Endpoint } from "../pipeline/context";
import type { MethodPolicy } from "../policy/method-policy";
import type { RequestTrace } from "../telemetry/tracing";
import type { NetworkPool } from "../upstream/network-pool";
import type { SubscriptionTarget } from "./hub";

/** Close codes the gateway uses (4000-4999 are application codes). */
export const WsClose = {
  GoingAway: { code: 1001, reason: "going away" },
  SlowConsumer: { code: 4008, reason: "slow consumer" },
  KeyRevoked: { code: 4001, reason: "api key revoked" },
  /** The JWT the session was opened with expired, or a re-check after a key change refused it. */
  JwtRefused: { code: 4003, reason: "jwt expired or refused" },
  NetworkRemoved: { code: 4004, reason: "network removed" },
  /** A message over MAX_BODY_BYTES (RFC 6455 1009). */
  TooBig: { code: 1009, reason: "message too big" },
} as const;

/** What an upgrade handler decides for an accepted connection on a network endpoint. */
export interface PoolSessionInit {
  readonly pool: NetworkPool;
  readonly endpoint: Endpoint;
  /** The verified key (app endpoints); undefined on the public endpoint. */
  readonly key: VerifiedKey | undefined;
  /** The method policy for this endpoint (default: the shared-node policy). */
  readonly policy?: MethodPolicy;
  /** The `exp` (epoch ms) of the JWT the app required at the upgrade: the session is closed then. */
  readonly tokenExpiresAtMs?: number;
}

/**
 * An endpoint that answers requests itself (the dedicated-node endpoint: NodeGateway.handle): every text
 * message goes to `handle`, except single subscribe / unsubscribe calls when `subscriptions` is given
 * (those go through shared upstream sockets to its wsUrl, like a network's).
 */
export interface CustomSessionInit {
  readonly pool?: undefined;
  /** Label for metrics and the subscription hub (e.g. `node:<id>`). */
  readonly slug: string;
  readonly key: VerifiedKey | undefined;
  /**
   * Answers one text message (single or batch); `undefined` or "" = nothing to send. `trace`: the
   * message's span when sampled (data-plane/src/telemetry), which `handle` ends once it has answered (a
   * rejection leaves it to the caller).
   */
  handle(text: string, requestId: string, trace?: RequestTrace): Promise<string | Uint8Array | undefined>;
  readonly subscriptions?: SubscriptionTarget;
}

export type SessionInit = PoolSessionInit | CustomSessionInit;

export interface UserData {
  session: WsSession;
}

/** A client subscription (the id the client knows) attached to a shared upstream subscription. */
export interface ClientSub {
  readonly id: string;
  readonly session: WsSession;
  /** Queued notifications until the subscribe answer has been sent; undefined once live. */
  queue: [text: string, method: string][] | undefined;
}

let sessionCounter = 0;

/** One client WebSocket connection. */
export class WsSession {
  readonly id = ++sessionCounter;
  /** The network's pool; undefined for a custom endpoint (see `custom`). */
  readonly pool: NetworkPool | undefined;
  readonly custom: CustomSessionInit | undefined;
  /** Metrics label: the network slug (or the custom endpoint's). */
  readonly slug: string;
  /** Where subscriptions go (the network's pool or the custom endpoint's target). */
  readonly target: SubscriptionTarget | undefined;
  readonly endpoint: Endpoint | undefined;
  /** Refreshed when the key record changes (plan edits); undefined on the public endpoint. */
  key: VerifiedKey | undefined;
  readonly policy: MethodPolicy | undefined;
  /** Set when the app requires a JWT: its exp (epoch ms), refreshed by a re-check after key changes. */
  tokenExpiresAtMs: number | undefined;
  readonly ip: ipaddr.IPv4 | ipaddr.IPv6 | undefined;
  /** The per-IP limit identity (IPv6 per /64; see ipBucket). */
  readonly ipBucket: string;
  ws: WebSocket<UserData> | undefined;
  /** Client subscription id -> its subscription. */
  readonly subs = new Map<string, { family: string; unsubscribe: () => void }>();
  /**
   * Whose upstream-subscription budget this session draws on: `w:{workspaceId}` for a key, `ip:{bucket}`
   * on the public endpoint.
   */
  readonly tenant: string;
  /** The per-key connection identity counted against WS_MAX_CONNECTIONS_PER_KEY (undefined: public endpoint). */
  connKey: string | undefined;
  /** Holds places in the gateway's connection caps (taken at the upgrade, cleared by the one release). */
  counted = false;
  /** uWS called `open` for it (before any `close`). */
  opened = false;
  /** Request objects being answered. */
  inFlight = 0;
  closed = false;
  /** Ending (slow consumer, revoked, shutdown): nothing more is sent. */
  ending = false;
  /**
   * Usage and request-log network of its messages and notifications: the network's slug, `node-{nodeId}`
   * on a dedicated node's endpoint, "" for another custom endpoint (not counted here).
   */
  readonly usageNetwork: string;
  /** Its messages' span name (the route) and parent (the upgrade's traceparent, "" = none). */
  spanName = "WS";
  traceparent = "";

  constructor(init: SessionInit, ip: ipaddr.IPv4 | ipaddr.IPv6 | undefined) {
    if (init.pool !== undefined) {
      this.pool = init.pool;
      this.custom = undefined;
      this.slug = init.pool.slug;
      this.target = init.pool;
      this.endpoint = init.endpoint;
      this.policy = init.policy;
      this.tokenExpiresAtMs = init.tokenExpiresAtMs;
    } else {
      this.pool = undefined;
      this.custom = init;
      this.slug = init.slug;
      this.target = init.subscriptions;
      this.endpoint = undefined;
      this.policy = undefined;
      this.tokenExpiresAtMs = undefined;
    }
    this.key = init.key;
    const rec = init.key?.record;
    this.usageNetwork =
      init.pool !== undefined
        ? init.pool.slug
        : rec?.kind === "node" && rec.nodeId
          ? nodeUsageNetwork(rec.nodeId)
          : "";
    this.ip = ip;
    this.ipBucket = ipBucket(ip);
    this.tenant = init.key === undefined ? `ip:${this.ipBucket}` : `w:${init.key.record.workspaceId}`;
  }
}
