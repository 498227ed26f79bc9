import { utcMonthKey } from "../../../shared/src/quota/day";
import { badInput } from "../common/errors";

const MONTH_RE = /^(\d{4})-(\d{2})$/;
/** No statement before the Unix epoch: no usage can be older. */
const FIRST_YEAR = 1970;

/** A calendar month (UTC): `key` `YYYY-MM`, and its bounds as epoch ms, `toMs` exclusive. */
export interface StatementMonth {
  key: string;
  fromMs: number;
  toMs: number;
  /** The month has ended (`toMs` <= now): its statement no longer changes, late usage batches aside. */
  complete: boolean;
}

const FORMAT_HINT = "month must be a calendar month written YYYY-MM, e.g. 2026-11";

/**
 * Parses a statement's `month` argument. Refused with BAD_USER_INPUT (`field: "month"`): anything not
 * `YYYY-MM` (`abc`, `2026-1`, `2026-11-01`), a month number outside 01..12 (`2026-13`), a year before
 * 1970, and a month after the current UTC month (no usage can exist yet).
 */
export function parseStatementMonth(raw: string, nowMs: number): StatementMonth {
  const m = MONTH_RE.exec(raw);
  if (!m) throw badInput("month", `${FORMAT_HINT}; got "${raw.slice(0, 32)}"`);
  const year = Number(m[1]);
  const month = Number(m[2]);
  if (month < 1 || month > 12) throw badInput("month", `${FORMAT_HINT}: the month number is 01..12`);
  if (year < FIRST_YEAR) throw badInput("month", `${FORMAT_HINT}: no month before ${FIRST_YEAR}-01`);
  const current = utcMonthKey(nowMs);
  if (raw > current) {
    throw badInput("month", `${raw} is in the future: the latest statement is the current month, ${current}`);
  }
  const fromMs = Date.UTC(year, month - 1, 1);
  const toMs = Date.UTC(year, month, 1);
  return { key: raw, fromMs, toMs, complete: toMs <= nowMs };
}

/** `YYYY-MM-DD` of every UTC day of the month up to `nowMs` (the whole month once it has ended). */
export function daysOfMonth(month: StatementMonth, nowMs: number): string[] {
  const out: string[] = [];
  const end = Math.min(month.toMs, nowMs + 1);
  for (let t = month.fromMs; t < end; t += 86_400_000) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}
