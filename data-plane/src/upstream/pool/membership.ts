import type { NetworkRecord } from "../../../../shared/src/redis/records";
import { Upstream, type UpstreamEvents, type UpstreamOptions } from "../upstream";

/**
 * A network's upstream nodes, as its record lists them. A record change keeps the nodes it does not
 * change (and so their health, breaker and latency), adds new ones and closes the removed ones.
 */
export class PoolMembership {
  /** The current nodes, in the record's order. Replaced (never changed in place) by update and close. */
  upstreams: Upstream[] = [];
  /** FAMILY_BIT mask of the families any upstream declares; 0 = none: families route nothing. */
  familiesDeclared = 0;

  constructor(
    private readonly opts: UpstreamOptions,
    private readonly events: UpstreamEvents,
    /** Builds a node (tests pass one that needs no sockets). */
    private readonly create: (
      r: NetworkRecord["upstreams"][number],
      opts: UpstreamOptions,
      events: UpstreamEvents,
    ) => Upstream = (r, o, e) => new Upstream(r, o, e),
  ) {}

  /**
   * Applies a new record's upstreams. True when a node was added (a new node may be on another chain:
   * what the pool learnt from the old ones, such as the finalized head, is learnt afresh).
   */
  update(record: NetworkRecord): boolean {
    const old = new Map(this.upstreams.map((u) => [u.id, u]));
    const next: Upstream[] = [];
    let added = false;
    for (const r of record.upstreams) {
      const existing = old.get(r.id);
      if (existing !== undefined && existing.httpUrl === r.httpUrl) {
        existing.weight = r.weight;
        existing.caps.apply(r);
        next.push(existing);
        old.delete(r.id);
      } else {
        next.push(this.create(r, this.opts, this.events));
        added = true;
      }
    }
    this.upstreams = next;
    let declared = 0;
    for (const u of next) declared |= u.caps.families;
    this.familiesDeclared = declared;
    for (const u of old.values()) void u.close();
    return added;
  }

  /** The upstream with id `id`, if it is still one. */
  byId(id: string): Upstream | undefined {
    for (const u of this.upstreams) if (u.id === id) return u;
    return undefined;
  }

  /** Whether `u` is still a member (a probe that ended after a record change must not write to a removed node). */
  has(u: Upstream): boolean {
    return this.upstreams.includes(u);
  }

  async close(): Promise<void> {
    const all = this.upstreams;
    this.upstreams = [];
    this.familiesDeclared = 0;
    await Promise.all(all.map((u) => u.close()));
  }
}
