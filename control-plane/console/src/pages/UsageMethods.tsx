import { useMemo, useState } from "react";
import { fmtMs, fmtNum } from "../ui";

export interface MethodUsage {
  method: string;
  requests: number;
  /** The same requests weighed by their method's weight. */
  computeUnits: number;
  errors: number;
  p50: number | null;
  p95: number | null;
  avg: number | null;
}

type SortKey = keyof MethodUsage;
const COLUMNS: { key: SortKey; label: string; fmt: (m: MethodUsage) => string }[] = [
  { key: "method", label: "Method", fmt: (m) => m.method },
  { key: "requests", label: "Requests", fmt: (m) => fmtNum(m.requests) },
  { key: "computeUnits", label: "Compute units", fmt: (m) => fmtNum(m.computeUnits) },
  { key: "errors", label: "Errors", fmt: (m) => fmtNum(m.errors) },
  { key: "p50", label: "p50", fmt: (m) => fmtMs(m.p50) },
  { key: "p95", label: "p95", fmt: (m) => fmtMs(m.p95) },
  { key: "avg", label: "Avg", fmt: (m) => fmtMs(m.avg) },
];

export function sortMethods(rows: MethodUsage[], key: SortKey, asc: boolean): MethodUsage[] {
  return [...rows].sort((a, b) => {
    const x = a[key];
    const y = b[key];
    let c: number;
    if (x === null || y === null)
      c = x === y ? 0 : x === null ? 1 : -1; // nulls last either way
    else c = typeof x === "string" ? x.localeCompare(y as string) : (x as number) - (y as number);
    if (x === null || y === null) return c;
    return (asc ? c : -c) || a.method.localeCompare(b.method);
  });
}

/** The per-method table of the usage page, sortable on every column. */
export function MethodsTable({ rows }: { rows: MethodUsage[] }) {
  const [sort, setSort] = useState<{ key: SortKey; asc: boolean }>({ key: "requests", asc: false });
  const sorted = useMemo(() => sortMethods(rows, sort.key, sort.asc), [rows, sort]);
  const by = (key: SortKey) =>
    setSort((s) => (s.key === key ? { key, asc: !s.asc } : { key, asc: key === "method" }));
  return (
    <div className="card" data-card="Methods">
      <h2>Methods</h2>
      {rows.length === 0 ? (
        <p className="muted">No requests in this range.</p>
      ) : (
        <div className="table-wrap">
          <table className="methods">
            <thead>
              <tr>
                {COLUMNS.map((c) => (
                  <th
                    key={c.key}
                    className={c.key === "method" ? undefined : "num"}
                    aria-sort={sort.key === c.key ? (sort.asc ? "ascending" : "descending") : "none"}
                  >
                    <button type="button" className="sort" onClick={() => by(c.key)}>
                      {c.label}
                      {sort.key === c.key ? (sort.asc ? " ▲" : " ▼") : ""}
                    </button>
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {sorted.map((m) => (
                <tr key={m.method}>
                  {COLUMNS.map((c) => (
                    <td key={c.key} className={c.key === "method" ? "mono" : "num"}>
                      {c.fmt(m)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
