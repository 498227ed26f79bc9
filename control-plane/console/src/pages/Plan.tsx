import { useState } from "react";
import { gql, type Plan, roleCan, TODAY_FIELDS, type Today } from "../api";
import { Async, ConfirmDialog, ErrorBox, fmtDate, fmtNum, useQuery } from "../ui";
import { useWorkspace } from "../workspace";

const PLAN_FIELDS =
  "id name dailyRequestLimit requestsPerSecond monthlyRequestLimit maxDedicatedNodes selfService";

const EMAIL_RE = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;

/**
 * PLAN_CONTACT as the operator wrote it: an email becomes a mailto link, an http(s) URL a link, anything
 * else plain text (never an href of another scheme).
 */
function Contact({ value }: { value: string }) {
  if (EMAIL_RE.test(value)) return <a href={`mailto:${value}`}>{value}</a>;
  if (/^https?:\/\//i.test(value)) {
    return (
      <a href={value} target="_blank" rel="noreferrer noopener">
        {value}
      </a>
    );
  }
  return <>{value}</>;
}

export function PlanPage() {
  const ws = useWorkspace().current!;
  const owner = roleCan(ws.myRole, "managePlan");
  const q = useQuery(
    () =>
      gql<{
        workspace: { id: string; name: string; plan: Plan; today: Today };
        plans: Plan[];
        planContact: string | null;
      }>(
        `query($w: ID) { workspace(id: $w) { id name plan { ${PLAN_FIELDS} } ${TODAY_FIELDS} }
          plans { ${PLAN_FIELDS} } planContact }`,
        { w: ws.id },
      ),
    [ws.id],
  );
  const [target, setTarget] = useState<Plan | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const change = async () => {
    if (!target) return;
    setBusy(true);
    setError(null);
    try {
      await gql(
        "mutation($p: String!, $w: ID) { changePlan(plan: $p, workspaceId: $w) { id plan { name } } }",
        {
          p: target.name,
          w: ws.id,
        },
      );
      setTarget(null);
      q.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section>
      <h1>Plan</h1>
      <Async q={q}>
        {({ workspace, plans, planContact }) => (
          <>
            <div className="card">
              <h2>
                {workspace.name}: <span data-testid="current-plan">{workspace.plan.name}</span>
              </h2>
              <p>
                {fmtNum(workspace.today.count)} of {fmtNum(workspace.today.limit)} requests today ·{" "}
                <span data-testid="plan-today-compute-units">
                  {fmtNum(workspace.today.computeUnits)}
                  {workspace.today.computeUnitLimit === null
                    ? ""
                    : ` of ${fmtNum(workspace.today.computeUnitLimit)}`}{" "}
                  compute units
                </span>{" "}
                · resets {fmtDate(workspace.today.resetsAt)}
              </p>
            </div>
            <ErrorBox error={error} />
            {!owner && <p className="muted">Only the workspace's owner changes the plan.</p>}
            <div className="plans">
              {[...plans]
                // The server lists the self-service plans plus the workspace's own: show the ones this
                // workspace may pick, and its current plan.
                .filter((p) => p.selfService || p.id === workspace.plan.id)
                .sort((a, b) => a.dailyRequestLimit - b.dailyRequestLimit)
                .map((p) => {
                  const current = p.id === workspace.plan.id;
                  const upgrade = p.dailyRequestLimit > workspace.plan.dailyRequestLimit;
                  return (
                    <div className={`card plan ${current ? "current" : ""}`} key={p.id} data-plan={p.name}>
                      <h3>{p.name}</h3>
                      <ul>
                        <li>{fmtNum(p.dailyRequestLimit)} requests / day</li>
                        <li>{fmtNum(p.requestsPerSecond)} requests / second</li>
                        <li>
                          {p.monthlyRequestLimit === null
                            ? "No monthly limit"
                            : `${fmtNum(p.monthlyRequestLimit)} requests / month`}
                        </li>
                        <li>{fmtNum(p.maxDedicatedNodes)} dedicated nodes</li>
                      </ul>
                      {current ? (
                        <>
                          <span className="badge">Current plan</span>
                          {!p.selfService && <p className="muted">Assigned by your operator.</p>}
                        </>
                      ) : owner ? (
                        <button
                          type="button"
                          className={upgrade ? undefined : "secondary"}
                          onClick={() => setTarget(p)}
                        >
                          {upgrade ? "Upgrade" : "Switch"} to {p.name}
                        </button>
                      ) : null}
                    </div>
                  );
                })}
            </div>
            <p className="muted" data-testid="plan-contact">
              Higher limits, more dedicated nodes or a custom plan are arranged by the platform operator:{" "}
              {planContact ? (
                <>
                  contact <Contact value={planContact} />.
                </>
              ) : (
                "contact your operator."
              )}
            </p>
            {target && (
              <ConfirmDialog
                title={`Change to the ${target.name} plan?`}
                confirmLabel="Change plan"
                busy={busy}
                onCancel={() => setTarget(null)}
                onConfirm={change}
              >
                <p>
                  The new limits ({fmtNum(target.dailyRequestLimit)}/day, {fmtNum(target.requestsPerSecond)}
                  /s) apply to every app of the workspace within a second.
                </p>
              </ConfirmDialog>
            )}
          </>
        )}
      </Async>
    </section>
  );
}
