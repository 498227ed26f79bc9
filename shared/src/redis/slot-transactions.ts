import type { ChainableCommander } from "ioredis";
import { isCluster, type RedisClient } from "./connect";
import { keySlot } from "./slots";

type Queue = (m: ChainableCommander) => void;

interface Step {
  slot: number;
  queue: Queue;
}

/**
 * Writes that must be seen before an announcement, on a single Redis or a Redis Cluster.
 *
 * Single Redis: everything goes in one MULTI, in the order given: the `write` steps, then the `last`
 * steps, then the PUBLISHes, so a reader never sees part of it.
 *
 * Redis Cluster: a MULTI may touch one slot only (CROSSSLOT otherwise). The `write` steps are grouped by
 * slot, one MULTI per slot, all sent at once; then the `last` steps likewise; then the PUBLISHes (Redis
 * Cluster delivers a PUBLISH to the subscribers of every node). Each step stays atomic (all its commands
 * touch its slot), and a subscriber that reacts to an event reads every write made before it; a reader
 * that does not wait for the event may see some slots written and others not yet.
 *
 * Any command's error rejects `exec()` (a failed step must not go unnoticed: the publication retries).
 */
export class SlotTransactions {
  private readonly writes: Step[] = [];
  private readonly lasts: Step[] = [];
  private readonly messages: [channel: string, message: string][] = [];

  constructor(private readonly client: RedisClient) {}

  /** Commands touching `key` only (or keys of its slot: sharing its `{tag}`), applied together. */
  write(key: string, queue: Queue): this {
    this.writes.push({ slot: keySlot(key), queue });
    return this;
  }

  /** Like `write`, applied after every `write` step (a marker that says the rest is there). */
  last(key: string, queue: Queue): this {
    this.lasts.push({ slot: keySlot(key), queue });
    return this;
  }

  /** Published once every write has been applied. */
  publish(channel: string, message: string): this {
    this.messages.push([channel, message]);
    return this;
  }

  get empty(): boolean {
    return this.writes.length === 0 && this.lasts.length === 0 && this.messages.length === 0;
  }

  async exec(): Promise<void> {
    if (this.empty) return;
    if (!isCluster(this.client)) {
      const m = this.client.multi();
      for (const s of this.writes) s.queue(m);
      for (const s of this.lasts) s.queue(m);
      for (const [channel, message] of this.messages) m.publish(channel, message);
      checked(await m.exec());
      return;
    }
    await this.perSlot(this.writes);
    await this.perSlot(this.lasts);
    if (this.messages.length > 0) {
      const m = this.client.multi();
      for (const [channel, message] of this.messages) m.publish(channel, message);
      checked(await m.exec());
    }
  }

  private async perSlot(steps: Step[]): Promise<void> {
    const bySlot = new Map<number, Queue[]>();
    for (const s of steps) {
      const list = bySlot.get(s.slot);
      if (list === undefined) bySlot.set(s.slot, [s.queue]);
      else list.push(s.queue);
    }
    await Promise.all(
      [...bySlot.values()].map(async (queues) => {
        const m = this.client.multi();
        for (const q of queues) q(m);
        checked(await m.exec());
      }),
    );
  }
}

/** Throws the first command error of a MULTI's replies (or when the transaction was discarded). */
function checked(replies: [error: Error | null, result: unknown][] | null): void {
  if (replies === null) throw new Error("redis transaction discarded");
  for (const [err] of replies) if (err) throw err;
}
