import { randomBytes } from "node:crypto";
import type { Logger } from "../../../shared/src/log/logger";
import {
  nextUtcMidnightMs,
  nextUtcMonthStartMs,
  utcDayKey,
  utcDayStartMs,
  utcMonthKey,
} from "../../../shared/src/quota/day";
import type { PlanLimits } from "../../../shared/src/redis/records";
import { type Clock, systemClock } from "../ratelimit/clock";
import type { QuotaStore } from "./quota-store";
import { dayIndexOf, type IndexedQuotaDelta, monthIndexOf, SharedQuotaCounts } from "./shared-quota-counts";

/**
 * Daily (and monthly) quota per workspace, across all its apps and networks, in response units (each
 * response object is one). The day is the UTC day and resets at 00:00 UTC; the month is the UTC month.
 */
export interface QuotaTracker {
  /**
   * May the workspace be served `cost` more units (default 1; a batch of 30 passes 30)? Refused when
   * `count + cost` would exceed the daily (or monthly) limit. Synchronous, never throws.
   */
  check(workspaceId: string, limits: PlanLimits, cost?: number): QuotaResult;
  /** Counts `units` response units served to the workspace now. Synchronous, never throws. */
  record(workspaceId: string, units: number): void;
}

export type QuotaRefusal = "daily_limit" | "monthly_limit";

export interface QuotaResult {
  readonly allowed: boolean;
  /** Set on a refusal; also the error's `data.reason`. */
  readonly reason?: QuotaRefusal;
  /** Units used today (UTC), as known to this instance. */
  readonly count: number;
  /** The daily limit applied. */
  readonly limit: number;
  /** Epoch ms of the next 00:00 UTC, when `count` resets. */
  readonly resetsAtMs: number;
  /** 0 when allowed; otherwise ms until the limit that refused resets (the day's or the month's). */
  readonly retryAfterMs: number;
  readonly monthCount: number;
  readonly monthLimit: number | null;
}

/** Limits off. */
export class NoopQuotaTracker implements QuotaTracker {
  check(_workspaceId: string, limits: PlanLimits): QuotaResult {
    return {
      allowed: true,
      count: 0,
      limit: limits.dailyRequestLimit,
      resetsAtMs: 0,
      retryAfterMs: 0,
      monthCount: 0,
      monthLimit: limits.monthlyRequestLimit,
    };
  }
  record(): void {}
}

export interface ReconciledQuotaTrackerOptions {
  store: QuotaStore;
  clock?: Clock;
  /** Identifies this instance's flushes (for exactly-once retries); random per process by default. */
  instanceId?: string;
  /** How often counts are pushed to the store and the global totals read back. */
  flushIntervalMs?: number;
  /** A flush round not answered within this long counts as a store failure (its batches are re-sent). */
  flushTimeoutMs?: number;
  /** A workspace with nothing unflushed and no traffic for this long is forgotten. */
  idleEvictMs?: number;
  /**
   * The counts decisions are made on, shared with the process's other serving threads (a view of one
   * SharedQuotaCounts.allocate()); this tracker's own by default.
   */
  shared?: SharedQuotaCounts;
  logger?: Logger;
}

/** A delta still being counted (only `record` writes `units`, until a flush sends it). */
interface PendingDelta extends IndexedQuotaDelta {
  units: number;
}

interface Sent {
  readonly seq: number;
  readonly deltas: readonly PendingDelta[];
}

interface Workspace {
  /** Units recorded, not yet sent. Usually one delta (today); a day change while unflushed adds one. */
  pending: PendingDelta[];
  /** Sent, not yet confirmed; re-sent unchanged (same seq) until the store answers. */
  inflight: Sent | undefined;
  /** Checked or recorded since the last flush: refresh its totals. */
  dirty: boolean;
  lastUsedMs: number;
  /** SharedQuotaCounts handles of the day and month they were taken for (-1: none yet). */
  dayIndex: number;
  dayHandle: number;
  monthIndex: number;
  monthHandle: number;
}

/**
 * Counts locally and reconciles with a shared `QuotaStore` (Redis) every `flushIntervalMs`: decisions use
 * `global total at the last flush + the process's unconfirmed units` (SharedQuotaCounts: every serving
 * thread's), so no request waits on Redis.
 *
 * Nothing answered goes uncounted: a batch that fails is kept and re-sent with the same sequence number
 * (the store applies each (instance, workspace, seq) once), new units accumulate in a per-workspace
 * delta (memory is bounded by workspaces x days of outage, not by requests), and `close()` flushes.
 * While the store is unreachable, decisions continue on the last known totals plus local counts
 * (fail-open: a quota never blocks traffic because Redis is down).
 */
export class ReconciledQuotaTracker implements QuotaTracker {
  readonly instanceId: string;
  private readonly store: QuotaStore;
  private readonly clock: Clock;
  private readonly flushIntervalMs: number;
  private readonly flushTimeoutMs: number;
  private readonly idleEvictMs: number;
  private readonly logger?: Logger;
  private readonly shared: SharedQuotaCounts;
  private readonly workspaces = new Map<string, Workspace>();
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<boolean> | undefined;
  private healthy = true;

  // The current UTC day and month, recomputed only when the clock leaves them (formatting a date per
  // request would cost more than the rest of a check).
  private dayStartMs = 0;
  private dayEndMs = 0;
  private dayKey = "";
  private monthKey = "";
  private monthEndMs = 0;
  /** The current day and month as SharedQuotaCounts windows. */
  private dayIndex = 0;
  private monthIndex = 0;

  constructor(opts: ReconciledQuotaTrackerOptions) {
    this.store = opts.store;
    this.clock = opts.clock ?? systemClock;
    this.instanceId = opts.instanceId ?? randomBytes(6).toString("hex");
    this.flushIntervalMs = opts.flushIntervalMs ?? 200;
    this.flushTimeoutMs = opts.flushTimeoutMs ?? 1_000;
    this.idleEvictMs = opts.idleEvictMs ?? 10 * 60_000;
    this.shared = opts.shared ?? new SharedQuotaCounts();
    this.logger = opts.logger;
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => {
      if (this.round === undefined) void this.flushNow();
    }, this.flushIntervalMs);
    this.timer.unref();
  }

  /**
   * Stops the loop and flushes everything recorded, retrying until `timeoutMs`. Resolves true when
   * nothing is left unflushed (false: the units still held are logged, and lost with the process).
   */
  async close(timeoutMs = 5_000): Promise<boolean> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.round;
      if (await this.flushNow()) {
        if (this.unflushedUnits() === 0) return true;
      }
      if (Date.now() >= deadline) break;
      await new Promise((r) => setTimeout(r, Math.min(100, this.flushIntervalMs)));
    }
    const left = this.unflushedUnits();
    if (left > 0) this.logger?.error({ units: left }, "quota: closing with unflushed units");
    return left === 0;
  }

  /** True while the last flush reached the store. */
  get storeHealthy(): boolean {
    return this.healthy;
  }

  /** Units recorded here and not yet confirmed by the store (all workspaces, all days). */
  unflushedUnits(): number {
    let n = 0;
    for (const w of this.workspaces.values()) {
      for (const d of w.pending) n += d.units;
      if (w.inflight !== undefined) for (const d of w.inflight.deltas) n += d.units;
    }
    return n;
  }

  check(workspaceId: string, limits: PlanLimits, cost = 1): QuotaResult {
    const nowMs = this.clock.now();
    this.period(nowMs);
    const w = this.entry(workspaceId, nowMs);
    w.dirty = true;
    const count = this.shared.dayAt(w.dayHandle);
    const monthCount = this.shared.monthAt(w.monthHandle);
    const limit = limits.dailyRequestLimit;
    const monthLimit = limits.monthlyRequestLimit;
    const resetsAtMs = this.dayEndMs;
    // Monthly first: when both are exhausted, the day's reset would not help.
    if (monthLimit !== null && monthCount + cost > monthLimit) {
      const retryAfterMs = Math.max(1, this.monthEndMs - nowMs);
      const reason = "monthly_limit";
      return { allowed: false, reason, count, limit, resetsAtMs, retryAfterMs, monthCount, monthLimit };
    }
    if (count + cost > limit) {
      const retryAfterMs = Math.max(1, resetsAtMs - nowMs);
      const reason = "daily_limit";
      return { allowed: false, reason, count, limit, resetsAtMs, retryAfterMs, monthCount, monthLimit };
    }
    // Same shape as a refusal (reason undefined): one hidden class for every result.
    const reason = undefined;
    return { allowed: true, reason, count, limit, resetsAtMs, retryAfterMs: 0, monthCount, monthLimit };
  }

  record(workspaceId: string, units: number): void {
    if (!(units > 0)) return;
    const nowMs = this.clock.now();
    this.period(nowMs);
    const w = this.entry(workspaceId, nowMs);
    w.dirty = true;
    this.shared.recordAt(w.dayHandle, w.monthHandle, units);
    // Pending deltas belong to `pending` alone until a flush moves the whole array to `inflight` (and
    // starts a new one), so the last one is counted up in place: no object per request.
    const last = w.pending[w.pending.length - 1];
    if (last !== undefined && last.dayKey === this.dayKey) {
      last.units += units;
    } else {
      const { dayKey, monthKey, dayIndex, monthIndex } = this;
      w.pending.push({ dayKey, monthKey, dayIndex, monthIndex, units });
    }
  }

  /**
   * One flush round now (the loop calls this; tests call it to step). Resolves true when every
   * workspace's flush was answered.
   */
  flushNow(): Promise<boolean> {
    if (this.round !== undefined) return this.round;
    this.round = this.doRound().finally(() => {
      this.round = undefined;
    });
    return this.round;
  }

  private async doRound(): Promise<boolean> {
    const nowMs = this.clock.now();
    this.period(nowMs);
    const { dayKey, monthKey, dayIndex, monthIndex } = this;
    const sends: Promise<boolean>[] = [];
    for (const [id, w] of this.workspaces) {
      if (w.inflight === undefined && w.pending.length > 0) {
        w.inflight = { seq: ++this.seq, deltas: w.pending };
        w.pending = [];
      }
      if (w.inflight === undefined && !w.dirty) {
        if (nowMs - w.lastUsedMs > this.idleEvictMs) this.workspaces.delete(id);
        continue;
      }
      w.dirty = false;
      const sent = w.inflight;
      sends.push(
        this.store.apply(id, this.instanceId, sent?.seq ?? 0, sent?.deltas ?? [], dayKey, monthKey).then(
          (totals) => {
            // Confirmed now (not by an earlier answer to the same batch, re-sent after a timeout).
            const confirmed = sent !== undefined && w.inflight === sent;
            if (confirmed) w.inflight = undefined;
            // The totals are the round's day and month (a period over by now is no longer decided on).
            this.shared.confirm(id, totals, dayIndex, monthIndex, confirmed ? sent.deltas : []);
            return true;
          },
          (err: unknown) => {
            w.dirty = true;
            this.markUnhealthy(err);
            return false;
          },
        ),
      );
    }
    if (sends.length === 0) return true;
    let timeout: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timeout = setTimeout(() => resolve("timeout"), this.flushTimeoutMs);
    });
    const results = await Promise.race([Promise.all(sends), timedOut]);
    clearTimeout(timeout);
    // On a timeout the unanswered batches stay in flight and are re-sent (same seq) next round.
    if (results === "timeout") {
      this.markUnhealthy(new Error("flush timed out"));
      return false;
    }
    const ok = results.every(Boolean);
    if (ok) {
      if (!this.healthy) this.logger?.info("quota: store reachable again, counts flushed");
      this.healthy = true;
    }
    return ok;
  }

  private markUnhealthy(err: unknown): void {
    if (this.healthy) {
      this.logger?.warn(
        { err: err instanceof Error ? err.message : String(err) },
        "quota: store unreachable, keeping counts locally",
      );
    }
    this.healthy = false;
  }

  private period(nowMs: number): void {
    if (nowMs >= this.dayStartMs && nowMs < this.dayEndMs) return;
    this.dayStartMs = utcDayStartMs(nowMs);
    this.dayEndMs = nextUtcMidnightMs(nowMs);
    this.dayKey = utcDayKey(nowMs);
    this.monthKey = utcMonthKey(nowMs);
    this.monthEndMs = nextUtcMonthStartMs(nowMs);
    this.dayIndex = dayIndexOf(nowMs);
    this.monthIndex = monthIndexOf(nowMs);
  }

  private entry(workspaceId: string, nowMs: number): Workspace {
    let w = this.workspaces.get(workspaceId);
    if (w === undefined) {
      w = {
        pending: [],
        inflight: undefined,
        dirty: true,
        lastUsedMs: nowMs,
        dayIndex: -1,
        dayHandle: -1,
        monthIndex: -1,
        monthHandle: -1,
      };
      this.workspaces.set(workspaceId, w);
    }
    w.lastUsedMs = nowMs;
    // A new day starts from zero (its own window of the shared counts); the old day's unflushed units stay
    // in `pending`/`inflight` under their own day key and are still flushed.
    if (w.dayIndex !== this.dayIndex) {
      w.dayHandle = this.shared.daySlot(workspaceId, this.dayIndex);
      w.dayIndex = this.dayIndex;
    }
    if (w.monthIndex !== this.monthIndex) {
      w.monthHandle = this.shared.monthSlot(workspaceId, this.monthIndex);
      w.monthIndex = this.monthIndex;
    }
    return w;
  }
}
