import { type FormEvent, useState } from "react";
import { gql, type Plan, type Today } from "../api";
import { Link } from "../router";
import {
  Async,
  ConfirmDialog,
  ErrorBox,
  FieldError,
  FormError,
  fmtDate,
  fmtMs,
  fmtNum,
  useQuery,
} from "../ui";

/**
 * Operator console (issue 17 §1): shown only to platform operator accounts (`me { isOperator }`); the server
 * refuses every query here to anyone else, so hiding the pages is convenience, not the rule.
 */

interface Health {
  instances: number;
  healthyInstances: number;
  healthy: boolean;
  head: number | null;
  lagBlocks: number | null;
  latencyMs: number | null;
  errorRate: number | null;
  breakerOpen: boolean;
}

interface OpUpstream {
  id: string;
  httpUrl: string;
  wsUrl: string | null;
  weight: number;
  health: Health;
}

interface OpNetwork {
  id: string;
  slug: string;
  name: string;
  protocol: "EVM" | "SUBSTRATE";
  chainId: number | null;
  upstreams: OpUpstream[];
}

export function OperatorNav() {
  return (
    <nav className="row wrap operator-nav" aria-label="Operator">
      <Link to="/operator/networks">Networks &amp; upstreams</Link>
      <Link to="/operator/plans">Plans</Link>
      <Link to="/operator/compute-units">Compute units</Link>
      <Link to="/operator/workspaces">Workspaces</Link>
      <Link to="/operator/usage">Platform usage</Link>
    </nav>
  );
}

function HealthCell({ h }: { h: Health }) {
  if (h.instances === 0) return <span className="muted">no live data</span>;
  const label = h.healthy ? "healthy" : h.healthyInstances > 0 ? "degraded" : "unhealthy";
  return (
    <span className={`badge ${h.healthy ? "" : "warn"}`} data-health={label}>
      {label}
      {h.breakerOpen ? " · breaker open" : ""} ({h.healthyInstances}/{h.instances})
    </span>
  );
}

const NETWORKS_Q = `{ networks { id slug name protocol chainId upstreams { id httpUrl wsUrl weight
  health { instances healthyInstances healthy head lagBlocks latencyMs errorRate breakerOpen } } } }`;

export function OperatorNetworksPage() {
  // Health records refresh every HEALTH_PUBLISH_INTERVAL_MS (5 s by default): poll at that pace.
  const q = useQuery(() => gql<{ networks: OpNetwork[] }>(NETWORKS_Q), [], 5_000);
  const [error, setError] = useState<unknown>(null);
  const [removing, setRemoving] = useState<OpUpstream | null>(null);
  const run = async (query: string, vars: Record<string, unknown>) => {
    setError(null);
    try {
      await gql(query, vars);
      q.reload();
      return true;
    } catch (err) {
      setError(err);
      return false;
    }
  };
  return (
    <section>
      <h1>Networks &amp; upstreams</h1>
      <OperatorNav />
      <ErrorBox error={error} />
      <Async q={q}>
        {({ networks }) => (
          <>
            {networks.map((n) => (
              <div className="card" key={n.id} data-network={n.slug}>
                <NetworkHeader n={n} run={run} />
                <div className="table-wrap">
                  <table>
                    <thead>
                      <tr>
                        <th>Upstream</th>
                        <th>Weight</th>
                        <th>Health</th>
                        <th>Head</th>
                        <th>Lag</th>
                        <th>Latency</th>
                        <th>Error rate</th>
                        <th />
                      </tr>
                    </thead>
                    <tbody>
                      {n.upstreams.map((u) => (
                        <tr key={u.id} data-upstream={u.httpUrl}>
                          <td>
                            <code>{u.httpUrl}</code>
                          </td>
                          <td>
                            <WeightEditor u={u} slug={n.slug} run={run} />
                          </td>
                          <td>
                            <HealthCell h={u.health} />
                          </td>
                          <td data-testid="head">{fmtNum(u.health.head)}</td>
                          <td data-testid="lag">
                            {u.health.lagBlocks === null ? "–" : `${u.health.lagBlocks} blocks`}
                          </td>
                          <td>{fmtMs(u.health.latencyMs)}</td>
                          <td>
                            {u.health.errorRate === null ? "–" : `${(u.health.errorRate * 100).toFixed(1)}%`}
                          </td>
                          <td className="actions">
                            <button type="button" className="danger" onClick={() => setRemoving(u)}>
                              Remove
                            </button>
                          </td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
                <AddUpstream slug={n.slug} onAdded={q.reload} />
              </div>
            ))}
            <CreateNetwork onCreated={q.reload} />
            {removing && (
              <ConfirmDialog
                title="Remove this upstream?"
                confirmLabel="Remove"
                onCancel={() => setRemoving(null)}
                onConfirm={() =>
                  void run("mutation($id: ID!) { removeUpstream(id: $id) { id } }", { id: removing.id }).then(
                    () => setRemoving(null),
                  )
                }
              >
                <p>
                  <code>{removing.httpUrl}</code> stops getting traffic on every data plane within a second.
                </p>
              </ConfirmDialog>
            )}
          </>
        )}
      </Async>
    </section>
  );
}

function NetworkHeader({
  n,
  run,
}: {
  n: OpNetwork;
  run: (q: string, v: Record<string, unknown>) => Promise<boolean>;
}) {
  const [editing, setEditing] = useState(false);
  const [removing, setRemoving] = useState(false);
  const [name, setName] = useState(n.name);
  if (!editing) {
    return (
      <div className="row between">
        <h2>
          {n.name} <span className="muted">({n.slug})</span>
        </h2>
        <div className="row">
          <button type="button" className="secondary" onClick={() => setEditing(true)}>
            Rename
          </button>
          <button type="button" className="danger" onClick={() => setRemoving(true)}>
            Remove network
          </button>
        </div>
        {removing && (
          <ConfirmDialog
            title={`Remove ${n.slug}?`}
            confirmLabel="Remove network"
            onCancel={() => setRemoving(false)}
            onConfirm={() =>
              void run("mutation($s: String!) { removeNetwork(slug: $s) { id } }", { s: n.slug }).then(() =>
                setRemoving(false),
              )
            }
          >
            <p>Its upstreams go with it, and every app's requests to it are refused from then on.</p>
          </ConfirmDialog>
        )}
      </div>
    );
  }
  return (
    <form
      className="row"
      aria-label={`Rename ${n.slug}`}
      onSubmit={(e) => {
        e.preventDefault();
        void run(
          "mutation($s: String!, $n: String!) { updateNetwork(slug: $s, input: { name: $n }) { id } }",
          {
            s: n.slug,
            n: name,
          },
        ).then((ok) => ok && setEditing(false));
      }}
    >
      <input aria-label="Network name" value={name} onChange={(e) => setName(e.target.value)} />
      <button type="submit">Save</button>
    </form>
  );
}

function WeightEditor({
  u,
  slug,
  run,
}: {
  u: OpUpstream;
  slug: string;
  run: (q: string, v: Record<string, unknown>) => Promise<boolean>;
}) {
  const [w, setW] = useState(String(u.weight));
  return (
    <form
      className="row"
      aria-label="Edit weight"
      onSubmit={(e) => {
        e.preventDefault();
        void run(
          "mutation($s: String!, $id: ID!, $w: Int!) { updateUpstream(networkSlug: $s, upstreamId: $id, input: { weight: $w }) { id } }",
          { s: slug, id: u.id, w: Number(w) },
        );
      }}
    >
      <input
        aria-label="Weight"
        type="number"
        min={1}
        max={1000}
        value={w}
        onChange={(e) => setW(e.target.value)}
      />
      {w !== String(u.weight) && <button type="submit">Save</button>}
    </form>
  );
}

function AddUpstream({ slug, onAdded }: { slug: string; onAdded: () => void }) {
  const [httpUrl, setHttpUrl] = useState("");
  const [wsUrl, setWsUrl] = useState("");
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      await gql(
        "mutation($s: String!, $i: AddUpstreamInput!) { addUpstream(networkSlug: $s, input: $i) { id } }",
        {
          s: slug,
          i: { httpUrl, wsUrl: wsUrl.trim() === "" ? null : wsUrl },
        },
      );
      setHttpUrl("");
      setWsUrl("");
      onAdded();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form className="row wrap" onSubmit={submit} aria-label={`Add upstream to ${slug}`}>
      <input
        className="grow"
        aria-label="HTTP URL"
        placeholder="https://node.example:8545"
        value={httpUrl}
        onChange={(e) => setHttpUrl(e.target.value)}
      />
      <input
        className="grow"
        aria-label="WebSocket URL"
        placeholder="wss://… (optional)"
        value={wsUrl}
        onChange={(e) => setWsUrl(e.target.value)}
      />
      <button type="submit" disabled={httpUrl.trim() === ""}>
        Add upstream
      </button>
      <FieldError error={error} field="httpUrl" />
      <FieldError error={error} field="wsUrl" />
      <FormError error={error} fields={["httpUrl", "wsUrl"]} />
    </form>
  );
}

function CreateNetwork({ onCreated }: { onCreated: () => void }) {
  const [slug, setSlug] = useState("");
  const [name, setName] = useState("");
  const [protocol, setProtocol] = useState<"EVM" | "SUBSTRATE">("EVM");
  const [chainId, setChainId] = useState("");
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      await gql("mutation($i: CreateNetworkInput!) { createNetwork(input: $i) { id } }", {
        i: { slug, name, protocol, chainId: chainId.trim() === "" ? null : Number(chainId) },
      });
      setSlug("");
      setName("");
      setChainId("");
      onCreated();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form className="card" onSubmit={submit} aria-label="Add network">
      <h2>Add a network</h2>
      <div className="row wrap">
        <input
          aria-label="Slug"
          placeholder="eth-mainnet"
          value={slug}
          onChange={(e) => setSlug(e.target.value)}
        />
        <input
          aria-label="Name"
          placeholder="Ethereum"
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <select
          aria-label="Protocol"
          value={protocol}
          onChange={(e) => setProtocol(e.target.value as "EVM" | "SUBSTRATE")}
        >
          <option value="EVM">EVM</option>
          <option value="SUBSTRATE">Substrate</option>
        </select>
        <input
          aria-label="Chain id"
          placeholder="chain id"
          value={chainId}
          onChange={(e) => setChainId(e.target.value)}
        />
        <button type="submit" disabled={slug.trim() === "" || name.trim() === ""}>
          Add network
        </button>
      </div>
      <FieldError error={error} field="slug" />
      <FormError error={error} fields={["slug"]} />
    </form>
  );
}

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
        <input
          aria-label="Plan name"
          placeholder="name"
          value={name}
          readOnly={plan !== null}
          onChange={(e) => setName(e.target.value)}
        />
        <input
          aria-label="Requests per day"
          placeholder="requests / day"
          value={daily}
          onChange={(e) => setDaily(e.target.value)}
        />
        <input
          aria-label="Requests per second"
          placeholder="requests / s"
          value={rps}
          onChange={(e) => setRps(e.target.value)}
        />
        <input aria-label="Dedicated nodes" value={nodes} onChange={(e) => setNodes(e.target.value)} />
        <input
          aria-label="Calls in flight per key"
          placeholder="in flight / key (default)"
          value={inFlight}
          onChange={(e) => setInFlight(e.target.value)}
        />
        <input
          aria-label="Heavy calls in flight per key"
          placeholder="heavy in flight (default)"
          value={heavy}
          onChange={(e) => setHeavy(e.target.value)}
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
