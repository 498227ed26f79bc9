import type { RequestLogRecord } from "../../../shared/src/requestlog/contract";

/**
 * Distinct (reason, client prefix) fields one instance keeps per minute; past it a reason's further prefixes
 * count under `<reason>|other`. Bounds the Redis hash of a minute however many addresses an attacker uses.
 */
export const KEYLESS_MAX_FIELDS_PER_MINUTE = 100;
/** Minutes kept while Redis cannot be written (older ones are dropped, counted in `droppedMinutes`). */
const MAX_PENDING_MINUTES = 60;

/** One minute's counts, field `<reason>|<client prefix>`. */
export interface KeylessMinute {
  readonly minuteMs: number;
  readonly counts: Map<string, number>;
}

/**
 * Errors that belong to no workspace (unknown or missing key, the public endpoint's refusals) counted per
 * UTC minute x reason x client /24 (IPv4) or /48 (IPv6), instead of one request-log row each: nobody can
 * list such rows (they have no workspace), and one host sending random keys would otherwise grow the
 * request-log stream and table by one row per request. Memory: at most KEYLESS_MAX_FIELDS_PER_MINUTE
 * fields (plus one overflow field per reason) per minute not yet flushed.
 */
export class KeylessCounts {
  private minutes: KeylessMinute[] = [];
  /** Errors counted since start. */
  total = 0;
  /** Minutes never written (Redis away for longer than MAX_PENDING_MINUTES). */
  droppedMinutes = 0;

  add(r: RequestLogRecord): string {
    const minuteMs = r.time - (r.time % 60_000);
    let m: KeylessMinute | undefined = this.minutes[this.minutes.length - 1];
    if (m === undefined || m.minuteMs !== minuteMs) {
      m = this.minutes.find((x) => x.minuteMs === minuteMs);
      if (m === undefined) {
        m = { minuteMs, counts: new Map() };
        this.minutes.push(m);
      }
    }
    const reason = keylessReason(r);
    let field = `${reason}|${r.clientIp ?? "unknown"}`;
    if (!m.counts.has(field) && m.counts.size >= KEYLESS_MAX_FIELDS_PER_MINUTE) field = `${reason}|other`;
    m.counts.set(field, (m.counts.get(field) ?? 0) + 1);
    this.total++;
    return reason;
  }

  /** Everything counted so far, oldest minute first; the counts start again from zero. */
  take(): KeylessMinute[] {
    const out = this.minutes;
    this.minutes = [];
    return out;
  }

  /** Gives back minutes whose write failed (counted again into what arrived meanwhile). */
  restore(failed: KeylessMinute[]): void {
    for (const f of failed) {
      let m = this.minutes.find((x) => x.minuteMs === f.minuteMs);
      if (m === undefined) {
        m = { minuteMs: f.minuteMs, counts: new Map() };
        this.minutes.push(m);
      }
      for (const [k, v] of f.counts) m.counts.set(k, (m.counts.get(k) ?? 0) + v);
    }
    this.minutes.sort((a, b) => a.minuteMs - b.minuteMs);
    while (this.minutes.length > MAX_PENDING_MINUTES) {
      this.minutes.shift();
      this.droppedMinutes++;
    }
  }

  get pendingMinutes(): number {
    return this.minutes.length;
  }
}

/** The gateway row's reason; a node's error on the public endpoint (no row) by its category. */
export function keylessReason(r: RequestLogRecord): string {
  if (r.reason !== "") return r.reason;
  return r.category.toLowerCase().replace(/[^a-z]+/g, "_");
}
