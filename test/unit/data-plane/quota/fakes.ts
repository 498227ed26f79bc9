import type { QuotaDelta, QuotaStore, QuotaTotals } from "../../../../data-plane/src/quota/quota-store";
import type { PlanLimits } from "../../../../shared/src/redis/records";

/** A plan's limits with the given daily (and monthly) quota; the per-second limit plays no part here. */
export const plan = (daily: number, monthly: number | null = null): PlanLimits => ({
  name: "test",
  requestsPerSecond: 50,
  dailyRequestLimit: daily,
  monthlyRequestLimit: monthly,
});

/**
 * A store that can be taken down, made to apply a batch and then fail (an ambiguous timeout), or made to
 * hold its answers until `release` (a flush answered after its timeout).
 */
export class FlakyStore implements QuotaStore {
  readonly inner = new MemoryQuotaStore();
  down = false;
  failAfterApply = false;
  hold = false;
  private readonly held: Array<() => void> = [];
  async apply(
    ws: string,
    inst: string,
    seq: number,
    deltas: readonly QuotaDelta[],
    day: string,
    month: string,
  ): Promise<QuotaTotals> {
    if (this.down) throw new Error("Connection is closed.");
    const totals = await this.inner.apply(ws, inst, seq, deltas, day, month);
    if (this.failAfterApply) throw new Error("Command timed out");
    if (this.hold) await new Promise<void>((resolve) => this.held.push(resolve));
    return totals;
  }
  /** Answers every held flush. */
  release(): void {
    for (const r of this.held.splice(0)) r();
  }
  day(ws: string, dayKey: string): number {
    return this.inner.counters.get(`${ws}\u0000d\u0000${dayKey}`) ?? 0;
  }
  month(ws: string, monthKey: string): number {
    return this.inner.counters.get(`${ws}\u0000m\u0000${monthKey}`) ?? 0;
  }
}

/** In-process counters standing for Redis: the store every tracker of a test shares. */
export class MemoryQuotaStore implements QuotaStore {
  readonly counters = new Map<string, number>();
  private readonly lastSeq = new Map<string, number>();

  async apply(
    workspaceId: string,
    instanceId: string,
    seq: number,
    deltas: readonly QuotaDelta[],
    dayKey: string,
    monthKey: string,
  ): Promise<QuotaTotals> {
    const seqKey = `${workspaceId}\u0000${instanceId}`;
    if (seq > (this.lastSeq.get(seqKey) ?? 0)) {
      for (const d of deltas) {
        this.add(`${workspaceId}\u0000d\u0000${d.dayKey}`, d.units);
        this.add(`${workspaceId}\u0000m\u0000${d.monthKey}`, d.units);
      }
      this.lastSeq.set(seqKey, seq);
    }
    return {
      dayCount: this.counters.get(`${workspaceId}\u0000d\u0000${dayKey}`) ?? 0,
      monthCount: this.counters.get(`${workspaceId}\u0000m\u0000${monthKey}`) ?? 0,
    };
  }

  private add(key: string, units: number): void {
    this.counters.set(key, (this.counters.get(key) ?? 0) + units);
  }
}
