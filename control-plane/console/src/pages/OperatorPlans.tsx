import { type FormEvent, useState } from "react";
import { gql, type Plan } from "../api";
import { Async, FieldError, FormError, fmtNum, TextInput, useQuery } from "../ui";
import { OperatorNav } from "./Operator";

/** Operator console: plans, their limits and caps. */

const PLAN_FIELDS =
  "id name dailyRequestLimit requestsPerSecond monthlyRequestLimit maxDedicatedNodes maxApps maxInFlightPerKey maxHeavyInFlightPerKey selfService computeUnitsPerSecond dailyComputeUnitLimit monthlyComputeUnitLimit";

/** A cap field: empty = null (the data plane's default); text that is no number is sent as it is, for the API's error. */
const capValue = (v: string): number | string | null =>
  v.trim() === "" ? null : Number.isFinite(Number(v)) ? Number(v) : v;
const capText = (v: number | null): string => (v === null ? "default" : fmtNum(v));

export function OperatorPlansPage() {
  const q = useQuery(() => gql<{ plans: Plan[] }>(`{ plans { ${PLAN_FIELDS} } }`), []);
  const [editing, setEditing] = useState<Plan | null>(null);
  return (
    <section>
      <h1>Plans</h1>
      <OperatorNav />
      <Async q={q}>
        {({ plans }) => (
          <div className="card">
            <div className="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th>Plan</th>
                    <th>Requests / day</th>
                    <th>Requests / s</th>
                    <th>CU / s</th>
                    <th>CU / day</th>
                    <th>CU / month</th>
                    <th>Dedicated nodes</th>
                    <th>In flight / key (heavy)</th>
                    <th>Self-service</th>
                    <th />
                  </tr>
                </thead>
                <tbody>
                  {plans.map((p) => (
                    <tr key={p.id} data-plan={p.name}>
                      <td>{p.name}</td>
                      <td>{fmtNum(p.dailyRequestLimit)}</td>
                      <td>{fmtNum(p.requestsPerSecond)}</td>
                      <td data-testid="cu-per-second">{fmtNum(p.computeUnitsPerSecond)}</td>
                      <td>{fmtNum(p.dailyComputeUnitLimit)}</td>
                      <td>{fmtNum(p.monthlyComputeUnitLimit)}</td>
                      <td>{fmtNum(p.maxDedicatedNodes)}</td>
                      <td data-testid="in-flight">
                        {capText(p.maxInFlightPerKey)} ({capText(p.maxHeavyInFlightPerKey)})
                      </td>
                      <td data-testid="self-service">{p.selfService ? "yes" : "no"}</td>
                      <td className="actions">
                        <button type="button" className="secondary" onClick={() => setEditing(p)}>
                          Edit
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </div>
        )}
      </Async>
      <PlanForm
        key={editing?.id ?? "new"}
        plan={editing}
        onSaved={() => {
          setEditing(null);
          q.reload();
        }}
      />
    </section>
  );
}

function PlanForm({ plan, onSaved }: { plan: Plan | null; onSaved: () => void }) {
  const [name, setName] = useState(plan?.name ?? "");
  const [daily, setDaily] = useState(String(plan?.dailyRequestLimit ?? ""));
  const [rps, setRps] = useState(String(plan?.requestsPerSecond ?? ""));
  const [nodes, setNodes] = useState(String(plan?.maxDedicatedNodes ?? 0));
  const [inFlight, setInFlight] = useState(String(plan?.maxInFlightPerKey ?? ""));
  const [heavy, setHeavy] = useState(String(plan?.maxHeavyInFlightPerKey ?? ""));
  // Compute-unit limits: blank = none in that unit.
  const [cu, setCu] = useState({
    perSecond: String(plan?.computeUnitsPerSecond ?? ""),
    daily: String(plan?.dailyComputeUnitLimit ?? ""),
    monthly: String(plan?.monthlyComputeUnitLimit ?? ""),
  });
  const cuValue = (v: string) => (v.trim() === "" ? null : Number(v));
  const [selfService, setSelfService] = useState(plan?.selfService ?? false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      await gql("mutation($i: PlanInput!) { upsertPlan(input: $i) { id } }", {
        i: {
          name,
          dailyRequestLimit: Number(daily),
          requestsPerSecond: Number(rps),
          monthlyRequestLimit: plan?.monthlyRequestLimit ?? null,
          maxDedicatedNodes: Number(nodes),
          // Not edited here, but set on every upsert: kept as it is.
          maxApps: plan?.maxApps ?? null,
          maxInFlightPerKey: capValue(inFlight),
          maxHeavyInFlightPerKey: capValue(heavy),
          computeUnitsPerSecond: cuValue(cu.perSecond),
          dailyComputeUnitLimit: cuValue(cu.daily),
          monthlyComputeUnitLimit: cuValue(cu.monthly),
          selfService,
        },
      });
      onSaved();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form className="card" onSubmit={submit} aria-label="Plan">
      <h2>{plan ? `Edit ${plan.name}` : "Add a plan"}</h2>
      <div className="row wrap">
        <TextInput
          label="Plan name"
          placeholder="name"
          value={name}
          readOnly={plan !== null}
          onChange={setName}
        />
        <TextInput label="Requests per day" placeholder="requests / day" value={daily} onChange={setDaily} />
        <TextInput label="Requests per second" placeholder="requests / s" value={rps} onChange={setRps} />
        <TextInput label="Dedicated nodes" value={nodes} onChange={setNodes} />
        <TextInput
          label="Calls in flight per key"
          placeholder="in flight / key (default)"
          value={inFlight}
          onChange={setInFlight}
        />
        <TextInput
          label="Heavy calls in flight per key"
          placeholder="heavy in flight (default)"
          value={heavy}
          onChange={setHeavy}
        />
        {(["perSecond", "daily", "monthly"] as const).map((k) => (
          <input
            key={k}
            aria-label={`Compute units ${k === "perSecond" ? "per second" : k === "daily" ? "per day" : "per month"}`}
            placeholder={`CU / ${k === "perSecond" ? "s" : k === "daily" ? "day" : "month"} (blank: none)`}
            value={cu[k]}
            onChange={(e) => setCu({ ...cu, [k]: e.target.value })}
          />
        ))}
        <label>
          <input type="checkbox" checked={selfService} onChange={(e) => setSelfService(e.target.checked)} />{" "}
          Self-service
        </label>
        <button type="submit">Save plan</button>
      </div>
      <FieldError error={error} field="maxInFlightPerKey" />
      <FieldError error={error} field="maxHeavyInFlightPerKey" />
      <FormError error={error} fields={["maxInFlightPerKey", "maxHeavyInFlightPerKey"]} />
    </form>
  );
}
