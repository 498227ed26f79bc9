import type { UpstreamNotification } from "../../upstream/ws-client";
import type { WsSession } from "../session";
import type { ClientEntry, UpSub } from "./registry";

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

const FINAL_EXTRINSIC = new Set(["finalized", "usurped", "dropped", "invalid", "finalityTimeout"]);

export function extrinsicFinal(result: unknown): boolean {
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
export function headAdvances(
  sub: { headNumber: number; headId: string },
  result: unknown,
  resultJson: string,
): boolean {
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

/** A notification's text for one client (`methodJson`, `resultJson`: JSON texts). */
export function notificationText(methodJson: string, c: ClientEntry, resultJson: string): string {
  return `{"jsonrpc":"2.0","method":${methodJson},"params":{"subscription":${c.idJson},"result":${resultJson}}}`;
}

/**
 * Fan-out of upstream notifications to a hub's clients: one published message per key for the clients
 * on its topic, framed one by one for the others, queued for clients not answered yet; timed per
 * event-loop turn for the metrics.
 */
export class Fanout {
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
    private readonly sink: FanoutSink,
    /** Notifications queued for a client whose subscribe answer is not sent yet. */
    private readonly maxQueued: number,
    /** An extrinsic watch got its final status: the hub ends the subscription (the node ends it too). */
    private readonly ended: (sub: UpSub) => void,
  ) {}

  /** Sends notification `n` of `sub` to its clients. */
  fanout(sub: UpSub, n: UpstreamNotification): void {
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
    if (sub.spec.family === "extrinsic" && extrinsicFinal(n.result)) this.ended(sub);
  }

  /**
   * Clients framed one by one. They all get the same bytes except the subscription id, and the
   * gateway's ids all have the same length, so each id is written over the previous one in one buffer
   * (the socket copies the bytes on send).
   */
  private fanoutDirect(sub: UpSub, method: string, head: string, tail: string): void {
    const max = this.maxQueued;
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
}
