import type { FanoutSink } from "../../../../../data-plane/src/ws/hub/fanout";
import { type ClientEntry, UpSub } from "../../../../../data-plane/src/ws/hub/registry";
import type { SubscribeSpec } from "../../../../../data-plane/src/ws/methods";
import type { WsSession } from "../../../../../data-plane/src/ws/session";

/** Just what the hub's parts read of a session: its tenant, key, subscriptions and whether it closed. */
export function session(tenant: string, keyHash?: string): WsSession {
  return {
    tenant,
    key: keyHash === undefined ? undefined : { hash: keyHash },
    subs: new Map(),
    closed: false,
  } as unknown as WsSession;
}

export const NEW_HEADS: SubscribeSpec = { family: "eth", merged: true, replayLast: false, evm: true };

export function upSub(params: unknown = ["newHeads"], spec: SubscribeSpec = NEW_HEADS): UpSub {
  return new UpSub(`eth_subscribe\u0000${JSON.stringify(params)}`, "eth_subscribe", params, spec);
}

export function entry(s: WsSession, id: string, shared: boolean, answered = true): ClientEntry {
  return {
    id,
    idJson: JSON.stringify(id),
    session: s,
    queue: answered ? undefined : [],
    shared,
    joined: false,
  };
}

/** A sink that records what it was asked to do, as strings. */
export class RecordingSink implements FanoutSink {
  readonly log: string[] = [];
  deliver(s: WsSession, data: string | Buffer, method: string): void {
    this.log.push(`deliver:${s.tenant}:${method}:${data.toString()}`);
  }
  delivered(s: WsSession, method: string, count: number): void {
    this.log.push(`delivered:${s.tenant}:${method}:${count}`);
  }
  join(s: WsSession, topic: string): boolean {
    this.log.push(`join:${s.tenant}:${topic}`);
    return true;
  }
  leave(s: WsSession, topic: string): void {
    this.log.push(`leave:${s.tenant}:${topic}`);
  }
  publish(topic: string, text: string): void {
    this.log.push(`publish:${topic}:${text}`);
  }
  police(s: WsSession): void {
    this.log.push(`police:${s.tenant}`);
  }
  of(prefix: string): string[] {
    return this.log.filter((l) => l.startsWith(prefix));
  }
}
