import type { Logger } from "../../../../shared/src/log/logger";
import { type UpstreamNotification, UpstreamWsClient } from "../../upstream/ws-client";
import type { UpSub } from "./registry";

/**
 * Where a hub opens its upstream sockets: a network's pool (NetworkPool fits as is) or a dedicated node
 * (`slug` e.g. `node:<id>`, one upstream, `describe()` may return []).
 */
export interface SubscriptionTarget {
  readonly slug: string;
  readonly record: { readonly upstreams: readonly { id: string; wsUrl: string | null; weight: number }[] };
  /** `head`: the upstream's health-checked head (-1 or absent: unknown). */
  describe(): readonly { id: string; breakerOpen: boolean; head?: number }[];
}

/** What the slots read of the hub's options (HubOptions). */
export interface SlotOptions {
  /** Persistent upstream WebSockets per network. */
  readonly connections: number;
  /** Per upstream call, and how long a subscribe waits for a socket. */
  readonly timeoutMs: number;
  /** Reconnect backoff ceiling. */
  readonly reconnectMaxMs: number;
  readonly pingIntervalMs: number;
  /** Largest upstream WebSocket message (UPSTREAM_MAX_RESPONSE_BYTES); a larger one drops the socket. */
  readonly maxResponseBytes?: number;
}

/** What the slots tell the hub. */
export interface SlotEvents {
  /** A notification for upstream subscription `sub` (found by its upstream id on the slot). */
  notification(sub: UpSub, n: UpstreamNotification): void;
  /** A socket dropped: these subscriptions lived on it, and are to be established elsewhere. */
  orphaned(subs: UpSub[]): void;
}

/** One persistent upstream socket slot (reconnects, possibly to another upstream). */
export class Slot {
  client: UpstreamWsClient | undefined;
  upstreamId: string | undefined;
  failures = 0;
  readonly byUpstreamId = new Map<string, UpSub>();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

/** Nodes that failed a socket within this long rank after the others when a slot picks its node. */
const RECENT_FAILURE_MS = 10_000;

/**
 * A hub's persistent upstream sockets: a few slots per network, each connected to one node and
 * reconnected (possibly to another node) when it drops; a subscription goes on the open slot with the
 * fewest subscriptions.
 */
export class UpstreamSlots {
  private readonly slots: Slot[] = [];
  private waiters: ((s: Slot | undefined) => void)[] = [];
  private readonly failedAt = new Map<string, number>();
  private closed = false;

  constructor(
    private readonly target: SubscriptionTarget,
    private readonly opts: SlotOptions,
    private readonly events: SlotEvents,
    private readonly logger: Logger,
  ) {}

  /** Upstream subscriptions live on upstream sockets now. */
  upstreamSubscriptions(): number {
    let n = 0;
    for (const s of this.slots) n += s.byUpstreamId.size;
    return n;
  }

  upstreamSockets(): { upstreamId: string | undefined; open: boolean; subscriptions: number }[] {
    return this.slots.map((s) => ({
      upstreamId: s.upstreamId,
      open: s.client?.isOpen ?? false,
      subscriptions: s.byUpstreamId.size,
    }));
  }

  /** An open upstream socket with the fewest subscriptions; waits for one while all are (re)connecting. */
  get(): Promise<Slot | undefined> {
    while (this.slots.length < this.opts.connections) {
      const slot = new Slot();
      this.slots.push(slot);
      void this.run(slot);
    }
    let best: Slot | undefined;
    for (const s of this.slots) {
      if (s.client?.isOpen && (best === undefined || s.byUpstreamId.size < best.byUpstreamId.size)) best = s;
    }
    if (best !== undefined) return Promise.resolve(best);
    if (this.wsUpstreams().length === 0) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      let done = false;
      const waiter = (s: Slot | undefined) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(s);
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        waiter(undefined);
      }, this.opts.timeoutMs);
      this.waiters.push(waiter);
    });
  }

  private wsUpstreams(): { id: string; wsUrl: string; weight: number }[] {
    const out: { id: string; wsUrl: string; weight: number }[] = [];
    for (const u of this.target.record.upstreams) {
      if (u.wsUrl !== null && u.wsUrl !== "") out.push({ id: u.id, wsUrl: u.wsUrl, weight: u.weight });
    }
    return out;
  }

  /**
   * Picks an upstream for a slot: not recently failed, breaker closed, not used by another slot, at the
   * highest health-checked head among those with a closed breaker (in that order of weight: spreading the
   * sockets over nodes comes before a node a block behind, whose heads headAdvances holds back anyway).
   */
  choose(
    slot: Slot,
    nowMs = Date.now(),
    random: () => number = Math.random,
  ): { id: string; wsUrl: string; weight: number } | undefined {
    const candidates = this.wsUpstreams();
    if (candidates.length === 0) return undefined;
    const described = this.target.describe();
    const health = new Map(described.map((d) => [d.id, d]));
    let top = -1;
    for (const d of described) if (!d.breakerOpen && (d.head ?? -1) > top) top = d.head ?? -1;
    let bestPenalty = Number.POSITIVE_INFINITY;
    let best: { id: string; wsUrl: string; weight: number }[] = [];
    for (const c of candidates) {
      let penalty = 0;
      const failed = this.failedAt.get(c.id);
      if (failed !== undefined && nowMs - failed < RECENT_FAILURE_MS) penalty += 8;
      const h = health.get(c.id);
      if (h?.breakerOpen) penalty += 4;
      if (this.slots.some((s) => s !== slot && s.upstreamId === c.id && s.client?.isOpen)) penalty += 2;
      if (top >= 0 && (h?.head ?? -1) < top) penalty += 1;
      if (penalty < bestPenalty) {
        bestPenalty = penalty;
        best = [c];
      } else if (penalty === bestPenalty) {
        best.push(c);
      }
    }
    let total = 0;
    for (const c of best) total += c.weight;
    let r = random() * total;
    for (const c of best) {
      r -= c.weight;
      if (r < 0) return c;
    }
    return best[best.length - 1];
  }

  /** Records that node `id`'s socket failed or dropped at `nowMs` (choose ranks it last for a while). */
  failed(id: string, nowMs = Date.now()): void {
    this.failedAt.set(id, nowMs);
  }

  private async run(slot: Slot): Promise<void> {
    while (!this.closed) {
      const up = this.choose(slot);
      if (up === undefined) {
        await sleep(this.opts.reconnectMaxMs);
        continue;
      }
      const client = new UpstreamWsClient(up.id, up.wsUrl, {
        timeoutMs: this.opts.timeoutMs,
        pingIntervalMs: this.opts.pingIntervalMs,
        maxPayloadBytes: this.opts.maxResponseBytes,
      });
      client.onNotification = (n) => {
        const sub = slot.byUpstreamId.get(n.subscription);
        if (sub === undefined) return false;
        this.events.notification(sub, n);
        return true;
      };
      const dropped = new Promise<void>((r) => {
        client.onClose = r;
      });
      const ok = await client.open();
      if (this.closed) {
        client.close();
        return;
      }
      if (!ok) {
        this.failed(up.id);
        slot.failures++;
        this.logger.warn({ network: this.target.slug, upstream: up.id }, "upstream websocket connect failed");
        await sleep(Math.min(100 * 2 ** slot.failures, this.opts.reconnectMaxMs));
        continue;
      }
      slot.failures = 0;
      slot.client = client;
      slot.upstreamId = up.id;
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w(slot);
      await dropped;
      slot.client = undefined;
      if (this.closed) return;
      this.failed(up.id);
      const orphaned = [...slot.byUpstreamId.values()];
      slot.byUpstreamId.clear();
      this.logger.warn(
        { network: this.target.slug, upstream: up.id, subscriptions: orphaned.length },
        "upstream websocket dropped; re-subscribing elsewhere",
      );
      this.events.orphaned(orphaned);
      slot.failures++;
      await sleep(Math.min(50 * 2 ** slot.failures, this.opts.reconnectMaxMs));
    }
  }

  close(): void {
    this.closed = true;
    for (const w of this.waiters) w(undefined);
    this.waiters = [];
    for (const s of this.slots) s.client?.close();
  }
}
