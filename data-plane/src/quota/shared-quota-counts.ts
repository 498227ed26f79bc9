import { WindowCounts } from "../ratelimit/window-counts";
import type { QuotaDelta, QuotaStore, QuotaTotals } from "./quota-store";

/**
 * One quota's counts for the whole process, shared by its serving threads (DATA_PLANE_THREADS > 1), so that
 * a daily or monthly limit is exact for the process whatever thread a request lands on, as the per-second
 * limits are (ratelimit/window-counts.ts).
 *
 * Each thread's quota tracker still flushes its own units to the store (its own instance id and sequence,
 * so a retried flush counts once). What the threads share, per counted id and UTC day (and month):
 * - `unconfirmed`: units any thread recorded that no answered flush has confirmed yet;
 * - `known`: the highest store total any thread has read back (totals only grow within a period, so the
 *   highest is the newest; it includes every unit some thread saw confirmed);
 * - `local`: with QUOTA_MODE=local, the process's own total (the store is this memory, not Redis).
 *
 * A tracker decides on `known + unconfirmed`. A flush's answer raises `known` first and only then takes
 * its units out of `unconfirmed`, so every unit of this process is in one of the two at every moment (in
 * both for an instant: refused early, never admitted late). Units of other processes count from the last
 * flush that read them, as before.
 *
 * Days and months are WindowCounts windows (day = floor(ms / 86,400,000), month = year * 12 + month - 1):
 * yesterday's slots stay addressable today, so units recorded before midnight and confirmed after it are
 * still taken out of yesterday's count. An id that finds no shared slot (more ids active in a period than
 * the table holds, QUOTA_TABLE_SLOTS) is counted per thread, as without sharing.
 */
export class SharedQuotaCounts {
  private readonly days: WindowCounts;
  private readonly months: WindowCounts;

  /** Memory for one quota's day and month tables, given to every serving thread. */
  static allocate(slots = QUOTA_TABLE_SLOTS): SharedQuotaTables {
    return { day: WindowCounts.allocate(slots, VALUES), month: WindowCounts.allocate(slots, VALUES) };
  }

  /** A view of `shared` (from `allocate`); private tables when none is given (one thread, tests). */
  constructor(shared: SharedQuotaTables = SharedQuotaCounts.allocate(PRIVATE_TABLE_SLOTS)) {
    this.days = new WindowCounts(shared.day, VALUES);
    this.months = new WindowCounts(shared.month, VALUES);
  }

  /**
   * The handle of `id`'s count on day `dayIndex` (claiming a slot): stable for that day and the next, so a
   * tracker keeps it for the day and a decision costs two atomic loads.
   */
  daySlot(id: string, dayIndex: number): number {
    return this.days.slot(id, dayIndex);
  }

  monthSlot(id: string, monthIndex: number): number {
    return this.months.slot(id, monthIndex);
  }

  /** The newest store total read plus what is not confirmed yet, behind a `daySlot` handle. */
  dayAt(handle: number): number {
    return this.days.load(handle + KNOWN) + this.days.load(handle + UNCONFIRMED);
  }

  monthAt(handle: number): number {
    return this.months.load(handle + KNOWN) + this.months.load(handle + UNCONFIRMED);
  }

  /** Counts `units` served now, not yet confirmed, behind the day's and the month's handles. */
  recordAt(dayHandle: number, monthHandle: number, units: number): void {
    this.days.add(dayHandle + UNCONFIRMED, units);
    this.months.add(monthHandle + UNCONFIRMED, units);
  }

  /**
   * A flush answered: `totals` are the store's for day `dayIndex` and month `monthIndex` (the round's) and
   * include `deltas`, whose units are now confirmed.
   */
  confirm(
    id: string,
    totals: QuotaTotals,
    dayIndex: number,
    monthIndex: number,
    deltas: readonly IndexedQuotaDelta[],
  ): void {
    // Raised where the id has a slot (a tracker claims one when it first decides or counts in a period);
    // never claimed here, so a late answer cannot move a thread's spill to another period.
    raiseKnown(this.days, id, dayIndex, totals.dayCount);
    raiseKnown(this.months, id, monthIndex, totals.monthCount);
    for (const d of deltas) {
      takeBack(this.days, id, d.dayIndex, d.units);
      takeBack(this.months, id, d.monthIndex, d.units);
    }
  }

  /** Units of `id` on day `dayIndex`: the newest store total read plus what is not confirmed yet. */
  dayCount(id: string, dayIndex: number): number {
    return count(this.days, id, dayIndex);
  }

  monthCount(id: string, monthIndex: number): number {
    return count(this.months, id, monthIndex);
  }

  /**
   * QUOTA_MODE=local: the process is the store. Adds `deltas` to the process's totals and returns those of
   * the period asked about.
   */
  applyLocal(
    id: string,
    deltas: readonly IndexedQuotaDelta[],
    dayIndex: number,
    monthIndex: number,
  ): QuotaTotals {
    for (const d of deltas) {
      this.days.add(this.days.slot(id, d.dayIndex) + LOCAL, d.units);
      this.months.add(this.months.slot(id, d.monthIndex) + LOCAL, d.units);
    }
    const day = this.days.peek(id, dayIndex);
    const month = this.months.peek(id, monthIndex);
    return {
      dayCount: day < 0 ? 0 : this.days.load(day + LOCAL),
      monthCount: month < 0 ? 0 : this.months.load(month + LOCAL),
    };
  }
}

/** A day and a month table. */
export interface SharedQuotaTables {
  readonly day: SharedArrayBuffer;
  readonly month: SharedArrayBuffer;
}

/** A delta with its day and month as window indices. */
export interface IndexedQuotaDelta extends QuotaDelta {
  readonly dayIndex: number;
  readonly monthIndex: number;
}

/**
 * Ids per quota table (each slot 24 bytes: 384 KiB per table). Half full, about 8,000 workspaces (or apps)
 * served by the process in a day share exact counts; past that they are counted per thread.
 */
export const QUOTA_TABLE_SLOTS = 1 << 14;
/** A tracker's own tables when no threads share them. */
const PRIVATE_TABLE_SLOTS = 1 << 10;

const VALUES = 3;
const UNCONFIRMED = 0;
const KNOWN = 1;
const LOCAL = 2;

const DAY_MS = 86_400_000;

/** The day window of an instant (epoch ms). */
export function dayIndexOf(ms: number): number {
  return Math.floor(ms / DAY_MS);
}

/** The month window of an instant: months since year 0 (UTC). */
export function monthIndexOf(ms: number): number {
  const d = new Date(ms);
  return d.getUTCFullYear() * 12 + d.getUTCMonth();
}

function count(table: WindowCounts, id: string, windowIndex: number): number {
  const h = table.peek(id, windowIndex);
  return h < 0 ? 0 : table.load(h + KNOWN) + table.load(h + UNCONFIRMED);
}

function raiseKnown(table: WindowCounts, id: string, windowIndex: number, total: number): void {
  const h = table.peek(id, windowIndex);
  if (h >= 0) table.raise(h + KNOWN, total);
}

function takeBack(table: WindowCounts, id: string, windowIndex: number, units: number): void {
  const h = table.peek(id, windowIndex);
  // Gone: the period is two windows old, nothing decides on it any more.
  if (h >= 0) table.add(h + UNCONFIRMED, -units);
}

/**
 * QUOTA_MODE=local with serving threads: the process's memory is the store, shared by the threads' trackers
 * (each a view of one SharedQuotaCounts). A flush cannot fail, so a sequence is never re-sent; a repeated
 * one is still applied once.
 */
export class SharedMemoryQuotaStore implements QuotaStore {
  private readonly lastSeq = new Map<string, number>();

  constructor(private readonly counts: SharedQuotaCounts) {}

  async apply(
    workspaceId: string,
    _instanceId: string,
    seq: number,
    deltas: readonly QuotaDelta[],
    dayKey: string,
    monthKey: string,
  ): Promise<QuotaTotals> {
    const applied = seq > (this.lastSeq.get(workspaceId) ?? 0) ? deltas : [];
    if (seq > 0) this.lastSeq.set(workspaceId, Math.max(seq, this.lastSeq.get(workspaceId) ?? 0));
    return this.counts.applyLocal(
      workspaceId,
      applied.map(indexed),
      dayIndexOfKey(dayKey),
      monthIndexOfKey(monthKey),
    );
  }
}

/** `YYYY-MM-DD` (utcDayKey) to its day window. */
export function dayIndexOfKey(dayKey: string): number {
  return dayIndexOf(Date.parse(`${dayKey}T00:00:00Z`));
}

/** `YYYY-MM` (utcMonthKey) to its month window. */
export function monthIndexOfKey(monthKey: string): number {
  return Number(monthKey.slice(0, 4)) * 12 + Number(monthKey.slice(5, 7)) - 1;
}

function indexed(d: QuotaDelta): IndexedQuotaDelta {
  const i = d as Partial<IndexedQuotaDelta>;
  if (i.dayIndex !== undefined && i.monthIndex !== undefined) return d as IndexedQuotaDelta;
  return { ...d, dayIndex: dayIndexOfKey(d.dayKey), monthIndex: monthIndexOfKey(d.monthKey) };
}
