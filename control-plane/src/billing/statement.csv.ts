import type { StatementAmounts, UsageStatement } from "./statement.types";

/** Columns of a statement's CSV, in order (docs/billing.md describes them). */
export const STATEMENT_CSV_COLUMNS = [
  "section",
  "month",
  "workspace_id",
  "workspace",
  "date",
  "from",
  "to",
  "app_id",
  "app",
  "network",
  "method",
  "plan",
  "requests",
  "compute_units",
  "refused_requests",
  "refused_compute_units",
  "daily_request_limit",
  "daily_compute_unit_limit",
  "over_limit",
] as const;

type Column = (typeof STATEMENT_CSV_COLUMNS)[number];
type Cells = Partial<Record<Column, string | number | boolean | null>>;

/**
 * A text cell as a spreadsheet may read it safely: a leading `=`, `+`, `-`, `@`, tab or carriage return
 * would start a formula (CSV injection through an app or workspace name), so it gets a `'` in front.
 */
function textCell(v: string): string {
  return /^[=+\-@\t\r]/.test(v) ? `'${v}` : v;
}

/** RFC 4180: quoted when it holds a comma, a quote or a line break; quotes doubled. */
function quote(v: string): string {
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

const TEXT: ReadonlySet<Column> = new Set(["workspace", "app", "network", "method", "plan"]);

function line(cells: Cells): string {
  return STATEMENT_CSV_COLUMNS.map((c) => {
    const v = cells[c];
    if (v === null || v === undefined) return "";
    const s = String(v);
    return quote(TEXT.has(c) ? textCell(s) : s);
  }).join(",");
}

function amounts(a: StatementAmounts): Cells {
  return {
    requests: a.requests,
    compute_units: a.computeUnits,
    refused_requests: a.refusedRequests,
    refused_compute_units: a.refusedComputeUnits,
  };
}

/**
 * The statement as one CSV table (CRLF line ends, a header row): a `total` row, then `plan`, `day` and
 * `usage` (app x network x method) rows, told apart by the `section` column so a spreadsheet can filter
 * them. The `usage` rows add up to the `total` row, and so do the `day` rows.
 */
export function statementCsv(s: UsageStatement): string {
  const base: Cells = { month: s.month, workspace_id: s.workspaceId, workspace: s.workspaceName };
  const rows: string[] = [STATEMENT_CSV_COLUMNS.join(",")];
  rows.push(
    line({
      ...base,
      section: "total",
      from: s.from.toISOString(),
      to: s.to.toISOString(),
      ...amounts(s),
    }),
  );
  for (const p of s.plans) {
    rows.push(
      line({
        ...base,
        section: "plan",
        from: p.from.toISOString(),
        to: p.to.toISOString(),
        plan: p.name,
        daily_request_limit: p.dailyRequestLimit,
        daily_compute_unit_limit: p.dailyComputeUnitLimit,
      }),
    );
  }
  for (const d of s.days) {
    rows.push(
      line({
        ...base,
        section: "day",
        date: d.date,
        ...amounts(d),
        daily_request_limit: d.dailyRequestLimit,
        daily_compute_unit_limit: d.dailyComputeUnitLimit,
        over_limit: d.overLimit,
      }),
    );
  }
  for (const l of s.lines) {
    rows.push(
      line({
        ...base,
        section: "usage",
        app_id: l.appId,
        app: l.appName,
        network: l.network,
        method: l.method,
        ...amounts(l),
      }),
    );
  }
  return `${rows.join("\r\n")}\r\n`;
}
