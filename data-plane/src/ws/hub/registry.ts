import type { ErrorRow } from "../../../../shared/src/jsonrpc/errors";
import { newSubscriptionId, type SubscribeSpec } from "../methods";
import type { ClientSub, WsSession } from "../session";
import type { Slot } from "./slots";

/** What the registry needs of the gateway's sockets: leaving a client's topic. */
export interface TopicLeaver {
  /** Leaves `topic` (nothing to do once the socket closed: uWS drops its topics itself). */
  leave(session: WsSession, topic: string): void;
}

export interface ClientEntry extends ClientSub {
  readonly idJson: string;
  /** Holds the subscription's shared id (else its own, framed for it alone). */
  readonly shared: boolean;
  /** Subscribed to the subscription's topic: gets the published message. */
  joined: boolean;
}

/** How establishing a subscription upstream ended (the hub's establish). */
export type Establish =
  | { ok: true }
  | { ok: false; row: ErrorRow }
  | { ok: false; tail: string; category: string };

let topicCounter = 0;

/**
 * Whose usage and served units a published notification counts to: sessions with one key account
 * alike (the key's workspace and app, the network), so each key's clients are counted in one call.
 */
export function groupOf(session: WsSession): string {
  return session.key?.hash ?? "";
}

/** One upstream subscription shared by every client with the same method + params. */
export class UpSub {
  readonly clients = new Set<ClientEntry>();
  /** Clients that get their own message: not answered yet (queue), or not sharing the id. */
  readonly direct = new Set<ClientEntry>();
  /** Clients on the topic, by accounting identity (key hash, "" for the public endpoint). */
  readonly groups = new Map<string, Set<ClientEntry>>();
  joined = 0;
  /** The session's entry holding the shared id (one per session: a second one gets its own id). */
  readonly sharers = new Map<WsSession, ClientEntry>();
  /**
   * The id the clients of one key share (merged subscriptions only), and how many hold it: scoped to the
   * key so that no tenant can tell from an id that another one subscribed to the same thing. The key's
   * topic is `<topic>:<id>`.
   */
  readonly shares = new Map<string, { id: string; holders: number }>();
  readonly merged: boolean;
  readonly topic: string;
  /** Clients per tenant (their share of this upstream subscription). */
  readonly tenants = new Map<string, number>();
  state: "pending" | "active" | "closed" = "pending";
  slot: Slot | undefined;
  upstreamId: string | undefined;
  /** First establishment; awaited by clients joining while it runs. */
  ready: Promise<Establish> | undefined;
  /** Replay: last notification method + result JSON (Substrate merged subscriptions). */
  lastMethod: string | undefined;
  lastResult: string | undefined;
  storage: Map<string, unknown> | undefined;
  /** A subscription to new heads (see fanout.ts headAdvances): its notifications never go back. */
  readonly heads: boolean;
  /** The highest head number fanned out (-1: none yet), and that head's hash (its JSON when it has none). */
  headNumber = -1;
  headId = "";

  constructor(
    readonly key: string,
    readonly method: string,
    readonly params: unknown,
    readonly spec: SubscribeSpec,
  ) {
    this.merged = spec.merged;
    this.heads =
      spec.family === "newHead" ||
      spec.family === "finalizedHead" ||
      (spec.family === "eth" && Array.isArray(params) && params[0] === "newHeads");
    // Unique in this thread's uWS app (every hub and network share its topic tree).
    this.topic = `s${++topicCounter}`;
  }
}

/**
 * A hub's subscription registry: the distinct subscriptions by method + params, their clients, the ids
 * the clients of one key share, and each tenant's count of distinct subscriptions (the budget of
 * WS_MAX_UPSTREAM_SUBSCRIPTIONS_PER_TENANT). Every client joins and leaves through addClient and
 * removeClient, so the tenants' shares stay exact.
 */
export class SubscriptionRegistry {
  readonly byKey = new Map<string, UpSub>();
  /** Tenant -> distinct upstream subscriptions (live or being established) it holds a share of. */
  private readonly byTenant = new Map<string, number>();

  constructor(private readonly sink: TopicLeaver) {}

  /** Distinct subscriptions (live or being (re-)established). */
  sharedSubscriptions(): number {
    return this.byKey.size;
  }

  clientSubscriptions(): number {
    let n = 0;
    for (const s of this.byKey.values()) n += s.clients.size;
    return n;
  }

  /** Distinct subscriptions a tenant holds a share of (0 when none). */
  tenantSubscriptions(tenant: string): number {
    return this.byTenant.get(tenant) ?? 0;
  }

  /** Tenants holding a share of any subscription (0 once every client has gone). */
  tenantCount(): number {
    return this.byTenant.size;
  }

  /** The id the session's key shares on `sub`, made for its first holder (addClient counts holders). */
  sharedIdOf(sub: UpSub, session: WsSession, evm: boolean): string {
    const g = groupOf(session);
    let share = sub.shares.get(g);
    if (share === undefined) {
      share = { id: newSubscriptionId(evm), holders: 0 };
      sub.shares.set(g, share);
    }
    return share.id;
  }

  /** The client now gets the published message of its key's topic, no longer its own. */
  join(sub: UpSub, entry: ClientEntry): void {
    sub.direct.delete(entry);
    entry.joined = true;
    sub.joined++;
    const g = groupOf(entry.session);
    let set = sub.groups.get(g);
    if (set === undefined) {
      set = new Set();
      sub.groups.set(g, set);
    }
    set.add(entry);
  }

  addClient(sub: UpSub, entry: ClientEntry): void {
    sub.clients.add(entry);
    sub.direct.add(entry);
    if (entry.shared) {
      sub.sharers.set(entry.session, entry);
      sub.shares.get(groupOf(entry.session))!.holders++;
    }
    const t = entry.session.tenant;
    const n = sub.tenants.get(t) ?? 0;
    sub.tenants.set(t, n + 1);
    if (n === 0) this.byTenant.set(t, (this.byTenant.get(t) ?? 0) + 1);
  }

  /** False when `c` was no client of `sub` (already removed). */
  removeClient(sub: UpSub, c: ClientEntry): boolean {
    if (!sub.clients.delete(c)) return false;
    sub.direct.delete(c);
    if (c.shared) {
      sub.sharers.delete(c.session);
      const g = groupOf(c.session);
      const share = sub.shares.get(g);
      if (share !== undefined && --share.holders === 0) sub.shares.delete(g);
    }
    if (c.joined) {
      c.joined = false;
      sub.joined--;
      const g = groupOf(c.session);
      const set = sub.groups.get(g);
      set?.delete(c);
      if (set?.size === 0) sub.groups.delete(g);
      this.sink.leave(c.session, `${sub.topic}:${c.id}`);
    }
    const t = c.session.tenant;
    const n = (sub.tenants.get(t) ?? 1) - 1;
    if (n > 0) {
      sub.tenants.set(t, n);
    } else {
      sub.tenants.delete(t);
      const m = (this.byTenant.get(t) ?? 1) - 1;
      if (m > 0) this.byTenant.set(t, m);
      else this.byTenant.delete(t);
    }
    return true;
  }

  /** Drops every client of a subscription (it ended upstream); their sessions forget it. */
  dropClients(sub: UpSub, each?: (c: ClientEntry) => void): void {
    for (const c of [...sub.clients]) {
      this.removeClient(sub, c);
      c.session.subs.delete(c.id);
      each?.(c);
    }
  }

  clear(): void {
    this.byKey.clear();
    this.byTenant.clear();
  }
}
