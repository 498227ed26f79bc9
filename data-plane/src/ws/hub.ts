import { categoryOfNodeError, type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { Logger } from "../../../shared/src/log/logger";
import { NetworkPool } from "../upstream/network-pool";
import { type UpstreamNotification, UpstreamWsClient } from "../upstream/ws-client";
import {
  canonicalJson,
  FAMILY_UNSUBSCRIBE,
  newSubscriptionId,
  normaliseParams,
  type SubscribeSpec,
} from "./methods";
import type { ClientSub, WsSession } from "./session";

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

/**
 * How notifications reach clients; the gateway owns the sockets, sending and slow-consumer policing.
 * The clients of one key on a merged upstream subscription share an id (each key its own, so an id
 * never tells a tenant that another subscribed to the same thing) and get one message, built once per key
 * and published to that key's uWS topic (written by uWS after the current event-loop turn, in native code); the others (not yet
 * answered, a second identical subscription on one socket, unmerged ones) get their own framing.
 */
export interface FanoutSink {
  /** One message to one client, sent now; counted and policed like any notification. */
  deliver(session: WsSession, data: string | Buffer, method: string): void;
  /** `count` notifications published to clients accounted as `session` (same key): usage, served units. */
  delivered(session: WsSession, method: string, count: number): void;
  /** Subscribes the client's socket to `topic`; false when the socket is closing or gone. */
  join(session: WsSession, topic: string): boolean;
  /** Leaves `topic` (nothing to do once the socket closed: uWS drops its topics itself). */
  leave(session: WsSession, topic: string): void;
  publish(topic: string, text: string): void;
  /** After a publish was written: closes the client if its unsent backlog passed the limit (4008). */
  police(session: WsSession): void;
}

export type SubscribeOutcome =
  | { ok: true; id: string; activate: () => void }
  | { ok: false; row: ErrorRow; limit?: number }
  | { ok: false; row?: undefined; tail: string; category: string };

type Establish = { ok: true } | { ok: false; row: ErrorRow } | { ok: false; tail: string; category: string };

interface ClientEntry extends ClientSub {
  readonly idJson: string;
  /** Holds the subscription's shared id (else its own, framed for it alone). */
  readonly shared: boolean;
  /** Subscribed to the subscription's topic: gets the published message. */
  joined: boolean;
}

let topicCounter = 0;

/** One upstream subscription shared by every client with the same method + params. */
class UpSub {
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
  /** A subscription to new heads (see headAdvances): its notifications never go back. */
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

/** One persistent upstream socket slot (reconnects, possibly to another upstream). */
class Slot {
  client: UpstreamWsClient | undefined;
  upstreamId: string | undefined;
  failures = 0;
  readonly byUpstreamId = new Map<string, UpSub>();
}

const FINAL_EXTRINSIC = new Set(["finalized", "usurped", "dropped", "invalid", "finalityTimeout"]);

function extrinsicFinal(result: unknown): boolean {
  if (typeof result === "string") return FINAL_EXTRINSIC.has(result);
  if (result !== null && typeof result === "object") {
    for (const k of Object.keys(result)) if (FINAL_EXTRINSIC.has(k)) return true;
  }
  return false;
}

/**
 * Whether a new-heads notification (`result`, `resultJson` its JSON) may go to the subscription's clients,
 * and if so records it as the highest sent (docs/contracts.md "A head that never goes back"). Dropped: a
 * head below the highest one sent, and the same head again (same number and hash: a node the subscription
 * moved to after a failover, or that is catching up, sends heads the clients already have). Passed: a
 * higher head, and a different block at the highest height (a reorg, which clients need to see). A head
 * without a readable number is passed as it is (not a head this check understands).
 */
function headAdvances(sub: UpSub, result: unknown, resultJson: string): boolean {
  if (result === null || typeof result !== "object") return true;
  const r = result as { number?: unknown; hash?: unknown };
  const v = r.number;
  const n =
    typeof v === "string" && v.length > 2 && v.length <= 15 && (v.charCodeAt(1) | 0x20) === 0x78
      ? Number.parseInt(v.slice(2), 16)
      : typeof v === "number"
        ? v
        : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 0) return true;
  if (n < sub.headNumber) return false;
  // EVM heads carry their hash; Substrate headers do not, and the same header is the same JSON.
  const id = typeof r.hash === "string" ? r.hash.toLowerCase() : resultJson;
  if (n === sub.headNumber && id === sub.headId) return false;
  sub.headNumber = n;
  sub.headId = id;
  return true;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

/**
 * Whose usage and served units a published notification counts to: sessions with one key account
 * alike (the key's workspace and app, the network), so each key's clients are counted in one call.
 */
function groupOf(session: WsSession): string {
  return session.key?.hash ?? "";
}

/**
 * A network's subscriptions: a few persistent upstream WebSockets (ids rewritten), identical
 * subscriptions merged into one upstream subscription whose clients share one id and one published
 * message per key (see FanoutSink), and transparent re-subscription when an upstream socket drops.
 */
export class NetworkSubscriptions {
  private readonly slots: Slot[] = [];
  private readonly byKey = new Map<string, UpSub>();
  private waiters: ((s: Slot | undefined) => void)[] = [];
  private readonly failedAt = new Map<string, number>();
  /** Tenant -> distinct upstream subscriptions (live or being established) it holds a share of. */
  private readonly byTenant = new Map<string, number>();
  private unique = 0;
  private closed = false;
  /** Notifications fanned out (client deliveries), for metrics. */
  delivered = 0;
  /**
   * Upstream notifications fanned out, and the time spent doing it (seconds), for metrics. A turn that
   * published is timed from its first notification to after uWS wrote the published messages.
   */
  fanouts = 0;
  /** New-heads notifications not fanned out: below (or the same as) the highest sent (headAdvances). */
  headsDropped = 0;
  fanoutSeconds = 0;
  fanoutMaxSeconds = 0;
  /** This event-loop turn's publishes, finished (timed, policed) once uWS has written them. */
  private turn: { started: number; fanouts: number; subs: Set<UpSub> } | undefined;

  constructor(
    private readonly pool: SubscriptionTarget,
    private readonly opts: HubOptions,
    private readonly sink: FanoutSink,
    private readonly logger: Logger,
  ) {}

  get slug(): string {
    return this.pool.slug;
  }

  /** A network's hub (as opposed to a custom endpoint's, e.g. a dedicated node's). */
  get isNetworkHub(): boolean {
    return this.pool instanceof NetworkPool;
  }

  /** Upstream subscriptions live on upstream sockets now. */
  upstreamSubscriptions(): number {
    let n = 0;
    for (const s of this.slots) n += s.byUpstreamId.size;
    return n;
  }

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

  upstreamSockets(): { upstreamId: string | undefined; open: boolean; subscriptions: number }[] {
    return this.slots.map((s) => ({
      upstreamId: s.upstreamId,
      open: s.client?.isOpen ?? false,
      subscriptions: s.byUpstreamId.size,
    }));
  }

  async subscribe(
    session: WsSession,
    method: string,
    params: unknown,
    spec: SubscribeSpec,
  ): Promise<SubscribeOutcome> {
    const p = normaliseParams(method, params);
    const key = spec.merged ? `${method}\u0000${canonicalJson(p)}` : `${method}\u0000#${++this.unique}`;
    let sub = this.byKey.get(key);
    let created = false;
    if (sub === undefined) {
      // Only a subscription that would open a new one upstream is refused: joining one that exists costs
      // the node nothing (it still counts as a share, so the tenant's count can pass the budget that way).
      const max = this.opts.maxUpstreamPerTenant;
      if (this.isNetworkHub && (this.byTenant.get(session.tenant) ?? 0) >= max) {
        return { ok: false, row: GatewayError.WsUpstreamSubscriptionLimit, limit: max };
      }
      sub = new UpSub(key, method, params, spec);
      this.byKey.set(key, sub);
      created = true;
    }
    // The shared id unless this socket already holds it (two identical subscriptions on one socket must
    // stay apart: unsubscribing one must not end the other).
    const shared = sub.merged && !sub.sharers.has(session);
    const id = shared ? this.sharedIdOf(sub, session, spec.evm) : newSubscriptionId(spec.evm);
    const entry: ClientEntry = { id, idJson: JSON.stringify(id), session, queue: [], shared, joined: false };
    this.addClient(sub, entry);
    if (created) sub.ready = this.establish(sub, false);
    if (sub.state === "pending" && sub.ready !== undefined) {
      const r = await sub.ready;
      if (!r.ok) {
        this.removeClient(sub, entry);
        if (this.byKey.get(key) === sub && sub.clients.size === 0) this.byKey.delete(key);
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
            this.sink.deliver(session, this.text(s.lastMethod, entry, s.lastResult), s.lastMethod);
          }
        } else {
          for (const [t, m] of q) this.sink.deliver(session, t, m);
        }
        // Sent directly so far; from now on the published message (a publish earlier in this turn is
        // not written to a socket that joins after it, and the queue held it).
        if (entry.shared && s.clients.has(entry) && this.sink.join(session, `${s.topic}:${entry.id}`)) {
          this.join(s, entry);
        }
      },
    };
  }

  /** The id the session's key shares on `sub`, made for its first holder (addClient counts holders). */
  private sharedIdOf(sub: UpSub, session: WsSession, evm: boolean): string {
    const g = groupOf(session);
    let share = sub.shares.get(g);
    if (share === undefined) {
      share = { id: newSubscriptionId(evm), holders: 0 };
      sub.shares.set(g, share);
    }
    return share.id;
  }

  private join(sub: UpSub, entry: ClientEntry): void {
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

  private text(methodJson: string, c: ClientEntry, resultJson: string): string {
    return `{"jsonrpc":"2.0","method":${methodJson},"params":{"subscription":${c.idJson},"result":${resultJson}}}`;
  }

  /** Removes one client from a shared subscription; the last one out ends it upstream. */
  private detach(sub: UpSub, entry: ClientEntry): void {
    if (!this.removeClient(sub, entry)) return;
    entry.session.subs.delete(entry.id);
    if (sub.clients.size === 0) this.release(sub, true);
  }

  /** Every client joins and leaves through these two, so the tenants' shares stay exact. */
  private addClient(sub: UpSub, entry: ClientEntry): void {
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

  private removeClient(sub: UpSub, c: ClientEntry): boolean {
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
  private dropClients(sub: UpSub, each?: (c: ClientEntry) => void): void {
    for (const c of [...sub.clients]) {
      this.removeClient(sub, c);
      c.session.subs.delete(c.id);
      each?.(c);
    }
  }

  private release(sub: UpSub, unsubscribeUpstream: boolean): void {
    if (this.byKey.get(sub.key) === sub) this.byKey.delete(sub.key);
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
      const slot = await this.getSlot();
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
            for (const n of client.takeOrphans(upId)) this.fanout(sub, n);
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

  private fanout(sub: UpSub, n: UpstreamNotification): void {
    const started = performance.now();
    let resultJson = JSON.stringify(n.result) ?? "null";
    if (sub.heads && !headAdvances(sub, n.result, resultJson)) {
      this.headsDropped++;
      return;
    }
    const methodJson = JSON.stringify(n.method);
    if (sub.spec.replayLast) {
      sub.lastMethod = methodJson;
      if (sub.spec.family === "storage") {
        const r = n.result as { block?: unknown; changes?: unknown } | null;
        if (r !== null && typeof r === "object" && Array.isArray(r.changes)) {
          sub.storage ??= new Map();
          for (const ch of r.changes) if (Array.isArray(ch)) sub.storage.set(String(ch[0]), ch[1] ?? null);
          sub.lastResult = JSON.stringify({ block: r.block, changes: [...sub.storage] });
        } else {
          sub.lastResult = resultJson;
        }
      } else {
        sub.lastResult = resultJson;
      }
    }
    const head = `{"jsonrpc":"2.0","method":${methodJson},"params":{"subscription":"`;
    const tail = `","result":${resultJson}}}`;
    if (sub.direct.size > 0) this.fanoutDirect(sub, n.method, head, tail);
    if (sub.joined > 0) {
      // One message per key, for every client of that key on its topic; usage and served units counted
      // per key, in bulk.
      for (const set of sub.groups.values()) {
        const first = set.values().next().value as ClientEntry;
        this.sink.publish(`${sub.topic}:${first.id}`, `${head}${first.id}${tail}`);
        this.sink.delivered(first.session, n.method, set.size);
      }
      this.delivered += sub.joined;
    }
    resultJson = "";
    if (sub.joined > 0) {
      if (this.turn === undefined) {
        this.turn = { started, fanouts: 0, subs: new Set() };
        // Node's immediates run after uWS has written this turn's publishes (its check handle first).
        setImmediate(() => this.afterPublish());
      }
      this.turn.fanouts++;
      this.turn.subs.add(sub);
    } else {
      this.timed(1, (performance.now() - started) / 1000);
    }
    // An extrinsic watch ends with its final status (the node ends it too).
    if (sub.spec.family === "extrinsic" && extrinsicFinal(n.result)) {
      this.dropClients(sub);
      this.release(sub, false);
    }
  }

  /**
   * Clients framed one by one. They all get the same bytes except the subscription id, and the
   * gateway's ids all have the same length, so each id is written over the previous one in one buffer
   * (the socket copies the bytes on send).
   */
  private fanoutDirect(sub: UpSub, method: string, head: string, tail: string): void {
    const max = this.opts.maxQueued;
    let buf: Buffer | undefined;
    let idAt = 0;
    let idLen = -1;
    let sent = 0;
    for (const c of sub.direct) {
      if (c.queue !== undefined) {
        if (c.queue.length < max) c.queue.push([`${head}${c.id}${tail}`, method]);
        continue;
      }
      sent++;
      if (buf === undefined) {
        idLen = c.id.length;
        idAt = Buffer.byteLength(head);
        const tailBytes = Buffer.byteLength(tail);
        buf = Buffer.allocUnsafe(idAt + idLen + tailBytes);
        buf.write(head, 0, "utf8");
        buf.write(tail, idAt + idLen, "utf8");
      }
      if (c.id.length === idLen) {
        buf.write(c.id, idAt, "latin1");
        this.sink.deliver(c.session, buf, method);
      } else {
        this.sink.deliver(c.session, `${head}${c.id}${tail}`, method);
      }
    }
    this.delivered += sent;
  }

  /** After uWS wrote this turn's publishes: the turn is timed, and clients left behind are closed. */
  private afterPublish(): void {
    const t = this.turn;
    this.turn = undefined;
    if (t === undefined) return;
    for (const sub of t.subs) {
      for (const set of sub.groups.values()) for (const c of set) this.sink.police(c.session);
    }
    this.timed(t.fanouts, (performance.now() - t.started) / 1000);
  }

  private timed(fanouts: number, secs: number): void {
    this.fanouts += fanouts;
    this.fanoutSeconds += secs;
    if (secs > this.fanoutMaxSeconds) this.fanoutMaxSeconds = secs;
  }

  /** An open upstream socket with the fewest subscriptions; waits for one while all are (re)connecting. */
  private getSlot(): Promise<Slot | undefined> {
    while (this.slots.length < this.opts.connections) {
      const slot = new Slot();
      this.slots.push(slot);
      void this.runSlot(slot);
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
    for (const u of this.pool.record.upstreams) {
      if (u.wsUrl !== null && u.wsUrl !== "") out.push({ id: u.id, wsUrl: u.wsUrl, weight: u.weight });
    }
    return out;
  }

  /**
   * Picks an upstream for a slot: not recently failed, breaker closed, not used by another slot, at the
   * highest health-checked head among those with a closed breaker (in that order of weight: spreading the
   * sockets over nodes comes before a node a block behind, whose heads headAdvances holds back anyway).
   */
  private chooseUpstream(slot: Slot): { id: string; wsUrl: string; weight: number } | undefined {
    const candidates = this.wsUpstreams();
    if (candidates.length === 0) return undefined;
    const described = this.pool.describe();
    const health = new Map(described.map((d) => [d.id, d]));
    let top = -1;
    for (const d of described) if (!d.breakerOpen && (d.head ?? -1) > top) top = d.head ?? -1;
    const now = Date.now();
    let bestPenalty = Number.POSITIVE_INFINITY;
    let best: { id: string; wsUrl: string; weight: number }[] = [];
    for (const c of candidates) {
      let penalty = 0;
      const failed = this.failedAt.get(c.id);
      if (failed !== undefined && now - failed < 10_000) penalty += 8;
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
    let r = Math.random() * total;
    for (const c of best) {
      r -= c.weight;
      if (r < 0) return c;
    }
    return best[best.length - 1];
  }

  private async runSlot(slot: Slot): Promise<void> {
    while (!this.closed) {
      const up = this.chooseUpstream(slot);
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
        this.fanout(sub, n);
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
        this.failedAt.set(up.id, Date.now());
        slot.failures++;
        this.logger.warn({ network: this.pool.slug, upstream: up.id }, "upstream websocket connect failed");
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
      this.failedAt.set(up.id, Date.now());
      const orphaned = [...slot.byUpstreamId.values()];
      slot.byUpstreamId.clear();
      this.logger.warn(
        { network: this.pool.slug, upstream: up.id, subscriptions: orphaned.length },
        "upstream websocket dropped; re-subscribing elsewhere",
      );
      for (const sub of orphaned) this.resubscribe(sub);
      slot.failures++;
      await sleep(Math.min(50 * 2 ** slot.failures, this.opts.reconnectMaxMs));
    }
  }

  /** Re-establishes a subscription whose upstream socket dropped; clients keep their ids. */
  private resubscribe(sub: UpSub): void {
    sub.state = "pending";
    sub.slot = undefined;
    sub.upstreamId = undefined;
    if (sub.spec.family === "extrinsic") {
      // A watch cannot be re-attached on another node: tell the client it was dropped.
      this.dropClients(sub, (c) =>
        this.sink.deliver(
          c.session,
          this.text('"author_extrinsicUpdate"', c, '"dropped"'),
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
    for (const w of this.waiters) w(undefined);
    this.waiters = [];
    for (const s of this.slots) s.client?.close();
    this.byKey.clear();
    this.byTenant.clear();
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
