import { useState } from "react";
import { gql, roleCan } from "../api";
import { Async, fmtDate, fmtNum, useQuery } from "../ui";
import { useWorkspace } from "../workspace";

interface Amounts {
  requests: number;
  computeUnits: number;
  refusedRequests: number;
  servedRequests: number;
  servedComputeUnits: number;
}

interface Statement extends Amounts {
  workspaceName: string;
  month: string;
  complete: boolean;
  daysOverLimit: string[];
  plans: { name: string; from: string; to: string; dailyRequestLimit: number }[];
  lines: (Amounts & { appId: string | null; appName: string | null; network: string; method: string })[];
  csv: string;
}

/** One literal (no nested constants): test/unit/control-plane/graphql/limits.test.ts reads it from here. */
const STATEMENT = `workspaceName month complete requests computeUnits refusedRequests servedRequests servedComputeUnits
  daysOverLimit plans { name from to dailyRequestLimit }
  lines { appId appName network method requests computeUnits refusedRequests servedRequests servedComputeUnits } csv`;

/** The current UTC month, `YYYY-MM`: statements are per UTC month. */
function currentMonth(): string {
  return new Date().toISOString().slice(0, 7);
}

/** A file name from the workspace's name (anything but letters, digits, `-` and `_` becomes `-`). */
function fileName(s: Statement): string {
  const ws = s.workspaceName.replace(/[^A-Za-z0-9_-]+/g, "-").replace(/^-+|-+$/g, "") || "workspace";
  return `usage-statement-${ws}-${s.month}.csv`;
}

/** Saves the server's CSV (UsageStatement.csv) as a file, without a second request. */
function download(s: Statement): void {
  const url = URL.createObjectURL(new Blob([s.csv], { type: "text/csv;charset=utf-8" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = fileName(s);
  document.body.appendChild(a);
  a.click();
  a.remove();
  // After the click has handed the blob to the download.
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function BillingPage() {
  const ws = useWorkspace().current!;
  const [month, setMonth] = useState(currentMonth());
  const allowed = roleCan(ws.myRole, "readBilling");
  const q = useQuery(
    () =>
      allowed
        ? gql<{ usageStatement: Statement }>(
            `query($w: ID, $m: String!) { usageStatement(workspaceId: $w, month: $m) { ${STATEMENT} } }`,
            { w: ws.id, m: month },
          )
        : Promise.resolve(null),
    [ws.id, month, allowed],
  );
  return (
    <section>
      <div className="row between wrap">
        <h1>Billing</h1>
        {allowed && (
          <label className="inline">
            Month (UTC)
            <input
              type="month"
              name="month"
              value={month}
              max={currentMonth()}
              onChange={(e) => e.target.value && setMonth(e.target.value)}
            />
          </label>
        )}
      </div>
      {!allowed ? (
        <p className="muted">Only the workspace's owner and admins see its usage statements.</p>
      ) : (
        <Async q={q}>{(d) => d && <StatementView s={d.usageStatement} />}</Async>
      )}
    </section>
  );
}

function StatementView({ s }: { s: Statement }) {
  return (
    <>
      <div className="card" data-card="Statement">
        <div className="row between wrap">
          <h2>
            Statement {s.month} {!s.complete && <span className="badge">month in progress</span>}
          </h2>
          <button type="button" onClick={() => download(s)}>
            Download CSV
          </button>
        </div>
        <div className="row wrap">
          <div>
            <div className="big" data-testid="statement-requests">
              {fmtNum(s.requests)}
            </div>
            <span className="muted">requests ({fmtNum(s.refusedRequests)} refused)</span>
          </div>
          <div>
            <div className="big" data-testid="statement-compute-units">
              {fmtNum(s.computeUnits)}
            </div>
            <span className="muted">compute units</span>
          </div>
          <div>
            <div className="big" data-testid="statement-days-over">
              {s.daysOverLimit.length}
            </div>
            <span className="muted">days over the daily limit</span>
          </div>
        </div>
        {s.daysOverLimit.length > 0 && (
          <p className="muted">Over the limit on {s.daysOverLimit.join(", ")}.</p>
        )}
        <h3>Plans in force</h3>
        <ul data-testid="statement-plans">
          {s.plans.map((p) => (
            <li key={`${p.name}-${p.from}`}>
              <strong>{p.name}</strong> ({fmtNum(p.dailyRequestLimit)} requests / day) from {fmtDate(p.from)}{" "}
              to {fmtDate(p.to)}
            </li>
          ))}
        </ul>
      </div>
      <div className="card" data-card="Statement lines">
        <h2>By app, network and method</h2>
        {s.lines.length === 0 ? (
          <p className="muted">No usage this month.</p>
        ) : (
          <table className="methods">
            <thead>
              <tr>
                <th>App</th>
                <th>Network</th>
                <th>Method</th>
                <th className="num">Requests</th>
                <th className="num">Refused</th>
                <th className="num">Compute units</th>
              </tr>
            </thead>
            <tbody>
              {s.lines.map((l) => (
                <tr key={`${l.appId}|${l.network}|${l.method}`}>
                  <td>{l.appName ?? <span className="muted">dedicated node</span>}</td>
                  <td>{l.network}</td>
                  <td>
                    <code>{l.method}</code>
                  </td>
                  <td className="num">{fmtNum(l.requests)}</td>
                  <td className="num">{fmtNum(l.refusedRequests)}</td>
                  <td className="num">{fmtNum(l.computeUnits)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </>
  );
}
