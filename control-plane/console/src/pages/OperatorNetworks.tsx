import { type FormEvent, useState } from "react";
import { gql } from "../api";
import {
  Async,
  ConfirmDialog,
  ErrorBox,
  FieldError,
  FormError,
  fmtMs,
  fmtNum,
  TextInput,
  useQuery,
} from "../ui";
import { OperatorNav } from "./Operator";

/** Operator console: networks, their upstreams (health, weights) and new ones. */

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
      <TextInput label="Network name" value={name} onChange={setName} />
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
        <TextInput label="Slug" placeholder="eth-mainnet" value={slug} onChange={setSlug} />
        <TextInput label="Name" placeholder="Ethereum" value={name} onChange={setName} />
        <select
          aria-label="Protocol"
          value={protocol}
          onChange={(e) => setProtocol(e.target.value as "EVM" | "SUBSTRATE")}
        >
          <option value="EVM">EVM</option>
          <option value="SUBSTRATE">Substrate</option>
        </select>
        <TextInput label="Chain id" placeholder="chain id" value={chainId} onChange={setChainId} />
        <button type="submit" disabled={slug.trim() === "" || name.trim() === ""}>
          Add network
        </button>
      </div>
      <FieldError error={error} field="slug" />
      <FormError error={error} fields={["slug"]} />
    </form>
  );
}
