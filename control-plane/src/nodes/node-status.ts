import { EventEmitter } from "node:events";
import type { Logger } from "../../../shared/src/log/logger";
import { duplicateRedis, type RedisClient } from "../../../shared/src/redis/connect";
import type { RedisNames } from "../../../shared/src/redis/keys";
import { PlaneEventSchema } from "../../../shared/src/redis/records";

/**
 * Node status changes for GraphQL subscriptions. Every change a worker or mutation makes is announced as
 * a `node.update` PlaneEvent on the events channel (the data plane's channel); this hub listens there with
 * one subscriber connection per control-plane process, opened on first use.
 */
export class NodeStatusHub {
  private readonly emitter = new EventEmitter();
  private sub: RedisClient | undefined;
  private starting: Promise<void> | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly names: RedisNames,
    private readonly log: Logger,
  ) {
    this.emitter.setMaxListeners(0);
  }

  private ensure(): Promise<void> {
    this.starting ??= (async () => {
      const sub = duplicateRedis(this.redis, { lazyConnect: true, maxRetriesPerRequest: null });
      this.sub = sub;
      sub.on("error", (err) => this.log.warn({ err: err.message }, "node status subscriber error"));
      sub.on("message", (channel: string, message: string) => {
        if (channel !== this.names.eventsChannel()) return;
        try {
          const ev = PlaneEventSchema.safeParse(JSON.parse(message));
          if (ev.success && ev.data.type === "node.update") this.emitter.emit(ev.data.nodeId);
        } catch {
          // not ours to judge
        }
      });
      await sub.connect();
      await sub.subscribe(this.names.eventsChannel());
    })();
    return this.starting;
  }

  /**
   * Signals (one per announced change) for one node. The iterator ends on `return()` (the client
   * unsubscribed) and then drops its listener at once.
   */
  async updates(nodeId: string): Promise<AsyncIterableIterator<void>> {
    await this.ensure();
    let pending = 0;
    let wake: (() => void) | undefined;
    let done = false;
    const listener = () => {
      pending++;
      wake?.();
    };
    this.emitter.on(nodeId, listener);
    const finish = () => {
      done = true;
      this.emitter.off(nodeId, listener);
      wake?.();
    };
    const it: AsyncIterableIterator<void> = {
      [Symbol.asyncIterator]: () => it,
      next: async () => {
        while (!done && pending === 0) await new Promise<void>((r) => (wake = r));
        wake = undefined;
        if (done) return { done: true, value: undefined };
        pending = 0; // changes that arrived meanwhile collapse into one re-read
        return { done: false, value: undefined };
      },
      return: async () => {
        finish();
        return { done: true, value: undefined };
      },
    };
    return it;
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
    if (this.sub) {
      await this.sub.quit().catch(() => undefined);
      this.sub.disconnect();
    }
  }
}
