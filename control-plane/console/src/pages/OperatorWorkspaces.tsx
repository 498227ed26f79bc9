import { useState } from "react";
import { gql, type Plan, type Today } from "../api";
import { Async, ErrorBox, fmtNum, useQuery } from "../ui";
import { OperatorNav } from "./Operator";

/** Operator console: every workspace, its plan and usage. */

interface OpWorkspace {
  id: string;
  name: string;
  plan: { name: string };
  today: Pick<Today, "count" | "limit" | "resetsAt">;
  operatorMembers: { accountId: string; email: string; role: string }[];
}

export function OperatorWorkspacesPage() {
  const q = useQuery(
    () =>
      gql<{ operatorWorkspaces: OpWorkspace[]; plans: Plan[] }>(
        `{ operatorWorkspaces { id name plan { name } today { count limit resetsAt }
            operatorMembers { accountId email role } }
          plans { name } }`,
      ),
    [],
  );
  const [error, setError] = useState<unknown>(null);
  const setPlan = async (workspaceId: string, plan: string) => {
    setError(null);
    try {
      await gql("mutation($w: ID!, $p: String!) { setWorkspacePlan(workspaceId: $w, plan: $p) { id } }", {
        w: workspaceId,
        p: plan,
      });
      q.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section>
      <h1>Workspaces</h1>
      <OperatorNav />
      <ErrorBox error={error} />
      <Async q={q}>
        {({ operatorWorkspaces, plans }) => (
          <div className="card">
            <div className="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th>Workspace</th>
                    <th>Members</th>
                    <th>Today</th>
                    <th>Plan</th>
                  </tr>
                </thead>
                <tbody>
                  {operatorWorkspaces.map((w) => (
                    <tr key={w.id} data-workspace={w.name}>
                      <td>{w.name}</td>
                      <td>
                        {w.operatorMembers.map((m) => (
                          <div key={m.accountId}>
                            {m.email} <span className="muted">({m.role.toLowerCase()})</span>
                          </div>
                        ))}
                      </td>
                      <td data-testid="today">
                        {fmtNum(w.today.count)} / {fmtNum(w.today.limit)}
                      </td>
                      <td>
                        <select
                          aria-label={`Plan of ${w.name}`}
                          value={w.plan.name}
                          onChange={(e) => void setPlan(w.id, e.target.value)}
                        >
                          {plans.map((p) => (
                            <option key={p.name} value={p.name}>
                              {p.name}
                            </option>
                          ))}
                        </select>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </div>
        )}
      </Async>
    </section>
  );
}
