import { useState } from "react";
import { gql } from "../api";
import { Async, fmtDate, fmtNum, useQuery } from "../ui";
import { OperatorNav } from "./Operator";

/** Operator console: usage of the whole platform. */

interface PlatformUsage {
  requests: number;
  computeUnits: number;
  errors: number;
  series: { at: string; requests: number; errors: number }[];
  byWorkspace: {
    workspaceId: string | null;
    workspaceName: string | null;
    requests: number;
    errors: number;
  }[];
}

const RANGES: [string, number][] = [
  ["24 hours", 24],
  ["7 days", 7 * 24],
  ["30 days", 30 * 24],
];

export function OperatorUsagePage() {
  const [hours, setHours] = useState(24);
  const q = useQuery(
    () =>
      gql<{ platformUsage: PlatformUsage }>(
        `query($f: DateTimeISO) { platformUsage(from: $f) { requests computeUnits errors series { at requests errors }
          byWorkspace { workspaceId workspaceName requests errors } } }`,
        { f: new Date(Date.now() - hours * 3_600_000).toISOString() },
      ),
    [hours],
  );
  return (
    <section>
      <h1>Platform usage</h1>
      <OperatorNav />
      <div className="row">
        {RANGES.map(([label, h]) => (
          <button
            key={h}
            type="button"
            className={h === hours ? undefined : "secondary"}
            onClick={() => setHours(h)}
          >
            {label}
          </button>
        ))}
      </div>
      <Async q={q}>
        {({ platformUsage: u }) => {
          const peak = Math.max(1, ...u.series.map((p) => p.requests));
          return (
            <>
              <div className="card">
                <p>
                  <strong data-testid="platform-requests">{fmtNum(u.requests)}</strong> requests,{" "}
                  <strong data-testid="platform-compute-units">{fmtNum(u.computeUnits)}</strong> compute
                  units, <strong data-testid="platform-errors">{fmtNum(u.errors)}</strong> errors
                </p>
                <div className="bars" role="img" aria-label="Requests over time">
                  {u.series.map((p) => (
                    <div
                      key={p.at}
                      className="bar"
                      title={`${fmtDate(p.at)}: ${fmtNum(p.requests)} requests, ${fmtNum(p.errors)} errors`}
                      style={{ height: `${(p.requests / peak) * 100}%` }}
                    />
                  ))}
                </div>
              </div>
              <div className="card">
                <h2>Busiest workspaces</h2>
                <div className="table-wrap">
                  <table>
                    <thead>
                      <tr>
                        <th>Workspace</th>
                        <th>Requests</th>
                        <th>Errors</th>
                      </tr>
                    </thead>
                    <tbody>
                      {u.byWorkspace.map((w) => (
                        <tr key={w.workspaceId ?? "none"}>
                          <td>{w.workspaceName ?? <span className="muted">public / unknown key</span>}</td>
                          <td>{fmtNum(w.requests)}</td>
                          <td>{fmtNum(w.errors)}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              </div>
            </>
          );
        }}
      </Async>
    </section>
  );
}
