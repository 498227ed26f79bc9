/**
 * Upstream calls in flight per tenant (app key: its limit id `app:{appId}`; public endpoint: `ip:{address}`),
 * across HTTP and WebSocket, in this process. A tenant flooding slow calls holds at most `max` of the
 * upstream connections, so the others keep theirs (issue 13 §4).
 *
 * Counted in request objects that go upstream (a batch of 30 forwarded elements holds 30); cache hits,
 * refusals and subscriptions hold none. A slot is released when the upstream call settles, not when the
 * client goes away: an aborted client's call still occupies the node until it ends.
 *
 * When nothing is in flight for the id, any size is admitted, so a batch larger than `max` is not refused
 * forever; `max` = 0 turns the cap off.
 */
export class ConcurrencyLimiter {
  private readonly counts = new Map<string, number>();

  constructor(readonly max: number) {}

  /** Takes `n` slots for `id`; false (nothing taken) when that would pass the cap. */
  tryAcquire(id: string, n: number): boolean {
    if (this.max <= 0) return true;
    const cur = this.counts.get(id) ?? 0;
    if (cur > 0 && cur + n > this.max) return false;
    this.counts.set(id, cur + n);
    return true;
  }

  /** Gives back `n` slots taken by tryAcquire (exactly once per successful acquire). */
  release(id: string, n: number): void {
    if (this.max <= 0) return;
    const cur = this.counts.get(id);
    if (cur === undefined) return;
    if (cur <= n) this.counts.delete(id);
    else this.counts.set(id, cur - n);
  }

  /** Slots held by `id` now. */
  inFlight(id: string): number {
    return this.counts.get(id) ?? 0;
  }

  /** Ids holding slots (a leak would show as a growing number). */
  get size(): number {
    return this.counts.size;
  }
}
