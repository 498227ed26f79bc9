import { categoryOfNodeError, type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { Logger } from "../../../shared/src/log/logger";
import { NetworkPool } from "../upstream/network-pool";
import { Fanout, type FanoutSink, notificationText } from "./hub/fanout";
import { type ClientEntry, type Establish, SubscriptionRegistry, UpSub } from "./hub/registry";
import { type SubscriptionTarget, UpstreamSlots } from "./hub/slots";
import {
  canonicalJson,
  FAMILY_UNSUBSCRIBE,
  newSubscriptionId,
  normaliseParams,
  type SubscribeSpec,
} from "./methods";
import type { WsSession } from "./session";

export type { FanoutSink } from "./hub/fanout";
export type { SubscriptionTarget } from "./hub/slots";

export interface HubOptions {
  /** Persistent upstream WebSockets per network. */
  connections: number;
  /** Per upstream call (subscribe / unsubscribe), and how long a subscribe waits for a socket. */
  timeoutMs: number;
  /** Reconnect backoff ceiling. */
  reconnectMaxMs: number;
  pingIntervalMs: number;
  /** Largest upstream WebSocket message (UPSTREAM_MAX_RESPONSE_BYTES); a larger one drops the socket. */
  maxResponseBytes?: number;
  /** Notifications queued for a client whose subscribe answer is not sent yet. */
  maxQueued: number;
  /**
   * Distinct upstream subscriptions one tenant (`WsSession.tenant`) may hold a share of on a network's
   * hub (dedicated-node hubs: no budget, the node is the tenant's own).
   */
  maxUpstreamPerTenant: number;
}

export type SubscribeOutcome =
  | { ok: true; id: string; activate: () => void }
  | { ok: false; row: ErrorRow; limit?: number }
  | { ok: false; row?: undefined; tail: string; category: string };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

/**
 * A network's subscriptions: a few persistent upstream WebSockets (ids rewritten; hub/slots.ts), identical
 * subscriptions merged into one upstream subscription whose clients share one id and one published
 * message per key (hub/registry.ts, hub/fanout.ts), and transparent re-subscription when an upstream
 * socket drops. This class is the lifecycle of a subscription across those parts: subscribe, establish
 * upstream, re-establish, release.
 */
export class NetworkSubscriptions {
  private readonly registry: SubscriptionRegistry;
  private readonly fanout: Fanout;
  private readonly slots: UpstreamSlots;
  private unique = 0;
  private closed = false;

  constructor(
    private readonly pool: SubscriptionTarget,
    private readonly opts: HubOptions,
    private readonly sink: FanoutSink,
    logger: Logger,
  ) {
    this.registry = new SubscriptionRegistry(sink);
    this.fanout = new Fanout(sink, opts.maxQueued, (sub) => {
      this.registry.dropClients(sub);
      this.release(sub, false);
    });
    this.slots = new UpstreamSlots(
      pool,
      opts,
      {
        notification: (sub, n) => this.fanout.fanout(sub, n),
        orphaned: (subs) => {
          for (const sub of subs) this.resubscribe(sub);
        },
      },
      logger,
    );
  }

  get slug(): string {
    return this.pool.slug;
  }

  /** A network's hub (as opposed to a custom endpoint's, e.g. a dedicated node's). */
  get isNetworkHub(): boolean {
    return this.pool instanceof NetworkPool;
  }

  /** Notifications fanned out (client deliveries), for metrics. */
  get delivered(): number {
    return this.fanout.delivered;
  }

  /** Upstream notifications fanned out (see Fanout.fanouts), for metrics. */
  get fanouts(): number {
    return this.fanout.fanouts;
  }

  /** New-heads notifications not fanned out: below (or the same as) the highest sent. */
  get headsDropped(): number {
    return this.fanout.headsDropped;
  }

  get fanoutSeconds(): number {
    return this.fanout.fanoutSeconds;
  }

  get fanoutMaxSeconds(): number {
    return this.fanout.fanoutMaxSeconds;
  }

  /** Upstream subscriptions live on upstream sockets now. */
  upstreamSubscriptions(): number {
    return this.slots.upstreamSubscriptions();
  }

  /** Distinct subscriptions (live or being (re-)established). */
  sharedSubscriptions(): number {
    return this.registry.sharedSubscriptions();
  }

  clientSubscriptions(): number {
    return this.registry.clientSubscriptions();
  }

  /** Distinct subscriptions a tenant holds a share of (0 when none). */
  tenantSubscriptions(tenant: string): number {
    return this.registry.tenantSubscriptions(tenant);
  }

  /** Tenants holding a share of any subscription (0 once every client has gone). */
  tenantCount(): number {
    return this.registry.tenantCount();
  }

  upstreamSockets(): { upstreamId: string | undefined; open: boolean; subscriptions: number }[] {
    return this.slots.upstreamSockets();
  }

  async subscribe(
    session: WsSession,
    method: string,
    params: unknown,
    spec: SubscribeSpec,
  ): Promise<SubscribeOutcome> {
    const p = normaliseParams(method, params);
    const key = spec.merged ? `${method}\u0000${canonicalJson(p)}` : `${method}\u0000#${++this.unique}`;
    let sub = this.registry.byKey.get(key);
    let created = false;
    if (sub === undefined) {
      // Only a subscription that would open a new one upstream is refused: joining one that exists costs
      // the node nothing (it still counts as a share, so the tenant's count can pass the budget that way).
      const max = this.opts.maxUpstreamPerTenant;
      if (this.isNetworkHub && this.registry.tenantSubscriptions(session.tenant) >= max) {
        return { ok: false, row: GatewayError.WsUpstreamSubscriptionLimit, limit: max };
      }
      sub = new UpSub(key, method, params, spec);
      this.registry.byKey.set(key, sub);
      created = true;
    }
    // The shared id unless this socket already holds it (two identical subscriptions on one socket must
    // stay apart: unsubscribing one must not end the other).
    const shared = sub.merged && !sub.sharers.has(session);
    const id = shared ? this.registry.sharedIdOf(sub, session, spec.evm) : newSubscriptionId(spec.evm);
    const entry: ClientEntry = { id, idJson: JSON.stringify(id), session, queue: [], shared, joined: false };
    this.registry.addClient(sub, entry);
    if (created) sub.ready = this.establish(sub, false);
    if (sub.state === "pending" && sub.ready !== undefined) {
      const r = await sub.ready;
      if (!r.ok) {
        this.registry.removeClient(sub, entry);
        if (this.registry.byKey.get(key) === sub && sub.clients.size === 0) this.registry.byKey.delete(key);
        return r;
      }
    }
    if (session.closed || !sub.clients.has(entry)) {
      this.detach(sub, entry);
      return { ok: false, row: GatewayError.Internal };
    }
    const s = sub;
    session.subs.set(id, { family: spec.family, unsubscribe: () => this.detach(s, entry) });
    return {
      ok: true,
      id,
      activate: () => {
        const q = entry.queue;
        entry.queue = undefined;
        if (session.closed || q === undefined) return;
        if (q.length === 0) {
          if (s.spec.replayLast && s.lastResult !== undefined && s.lastMethod !== undefined) {
            this.sink.deliver(session, notificationText(s.lastMethod, entry, s.lastResult), s.lastMethod);
          }
        } else {
          for (const [t, m] of q) this.sink.deliver(session, t, m);
        }
        // Sent directly so far; from now on the published message (a publish earlier in this turn is
        // not written to a socket that joins after it, and the queue held it).
        if (entry.shared && s.clients.has(entry) && this.sink.join(session, `${s.topic}:${entry.id}`)) {
          this.registry.join(s, entry);
        }
      },
    };
  }

  /** Removes one client from a shared subscription; the last one out ends it upstream. */
  private detach(sub: UpSub, entry: ClientEntry): void {
    if (!this.registry.removeClient(sub, entry)) return;
    entry.session.subs.delete(entry.id);
    if (sub.clients.size === 0) this.release(sub, true);
  }

  private release(sub: UpSub, unsubscribeUpstream: boolean): void {
    if (this.registry.byKey.get(sub.key) === sub) this.registry.byKey.delete(sub.key);
    const wasActive = sub.state === "active";
    sub.state = "closed";
    const slot = sub.slot;
    const upId = sub.upstreamId;
    sub.slot = undefined;
    sub.upstreamId = undefined;
    if (wasActive && slot !== undefined && upId !== undefined) {
      slot.byUpstreamId.delete(upId);
      if (unsubscribeUpstream && slot.client?.isOpen) {
        void slot.client.call(FAMILY_UNSUBSCRIBE[sub.spec.family]!, [upId]);
      }
    }
  }

  /**
   * Subscribes upstream. First establishment: one retry on another socket after a dropped or failed
   * socket, then -32603. Re-establishment (`persistent`): retries with backoff while clients remain.
   */
  private async establish(sub: UpSub, persistent: boolean): Promise<Establish> {
    let attempts = 0;
    let delay = 100;
    for (;;) {
      if (this.closed) return { ok: false, row: GatewayError.Internal };
      if (sub.clients.size === 0) {
        this.release(sub, false);
        return { ok: false, row: GatewayError.Internal };
      }
      attempts++;
      const slot = await this.slots.get();
      let failure: ErrorRow = GatewayError.NoUpstream;
      if (slot !== undefined && slot.client !== undefined) {
        const client = slot.client;
        const r = await client.call(sub.method, sub.params);
        if (r.ok) {
          const upId = typeof r.result === "string" || typeof r.result === "number" ? String(r.result) : "";
          if (upId !== "" && client.isOpen && slot.client === client) {
            if (sub.clients.size === 0 || this.closed) {
              void client.call(FAMILY_UNSUBSCRIBE[sub.spec.family]!, [upId]);
              this.release(sub, false);
              return { ok: false, row: GatewayError.Internal };
            }
            sub.state = "active";
            sub.slot = slot;
            sub.upstreamId = upId;
            sub.ready = undefined;
            slot.byUpstreamId.set(upId, sub);
            for (const n of client.takeOrphans(upId)) this.fanout.fanout(sub, n);
            return { ok: true };
          }
          failure = upId === "" ? GatewayError.UpstreamBadResponse : GatewayError.UpstreamUnreachable;
        } else if (r.nodeError !== undefined) {
          const code = r.nodeError.code;
          const answer = {
            ok: false as const,
            tail: `,"error":${JSON.stringify(r.nodeError)}}`,
            category: categoryOfNodeError(typeof code === "number" ? code : -32603),
          };
          if (!persistent) {
            this.release(sub, false);
            return answer;
          }
        } else {
          failure =
            r.failure === "timeout"
              ? GatewayError.UpstreamTimeout
              : r.failure === "too_large"
                ? client.tooLargeRow
                : GatewayError.UpstreamUnreachable;
        }
      }
      if (!persistent && attempts >= 2) {
        this.release(sub, false);
        return { ok: false, row: failure };
      }
      if (persistent || slot === undefined) {
        await sleep(delay);
        delay = Math.min(delay * 2, this.opts.reconnectMaxMs);
      }
    }
  }

  /** Re-establishes a subscription whose upstream socket dropped; clients keep their ids. */
  private resubscribe(sub: UpSub): void {
    sub.state = "pending";
    sub.slot = undefined;
    sub.upstreamId = undefined;
    if (sub.spec.family === "extrinsic") {
      // A watch cannot be re-attached on another node: tell the client it was dropped.
      this.registry.dropClients(sub, (c) =>
        this.sink.deliver(
          c.session,
          notificationText('"author_extrinsicUpdate"', c, '"dropped"'),
          "author_extrinsicUpdate",
        ),
      );
      this.release(sub, false);
      return;
    }
    void this.establish(sub, true);
  }

  close(): void {
    this.closed = true;
    this.slots.close();
    this.registry.clear();
  }
}

/** Subscription hubs by network slug, created on first use. */
export class SubscriptionHubs {
  private readonly hubs = new Map<string, NetworkSubscriptions>();

  constructor(
    private readonly opts: HubOptions,
    private readonly sink: FanoutSink,
    private readonly logger: Logger,
  ) {}

  for(pool: SubscriptionTarget): NetworkSubscriptions {
    let hub = this.hubs.get(pool.slug);
    if (hub === undefined) {
      hub = new NetworkSubscriptions(pool, this.opts, this.sink, this.logger);
      this.hubs.set(pool.slug, hub);
    }
    return hub;
  }

  get(slug: string): NetworkSubscriptions | undefined {
    return this.hubs.get(slug);
  }

  /** Closes and forgets a hub (its network was removed). */
  drop(slug: string): void {
    this.hubs.get(slug)?.close();
    this.hubs.delete(slug);
  }

  all(): NetworkSubscriptions[] {
    return [...this.hubs.values()];
  }

  close(): void {
    for (const h of this.hubs.values()) h.close();
    this.hubs.clear();
  }
}
