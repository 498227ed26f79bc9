import { type FormEvent, useEffect, useState } from "react";
import { gql, type Network, roleCan } from "../api";
import { Link, useRoute } from "../router";
import {
  Async,
  ConfirmDialog,
  CopyButton,
  ErrorBox,
  Field,
  FieldError,
  FormError,
  fmtBytes,
  fmtDate,
  fmtNum,
  useQuery,
} from "../ui";
import { useWorkspace } from "../workspace";
import { mask } from "./AppPage";

type NodeStatus =
  | "PENDING"
  | "PROVISIONING"
  | "SYNCING"
  | "SYNCED"
  | "STOPPED"
  | "ERROR"
  | "DELETING"
  | "DELETED";
type NodeType = "FULL" | "ARCHIVE" | "VALIDATOR";
type RpcMethods = "SAFE" | "UNSAFE";

interface NodeRow {
  id: string;
  displayName: string;
  nodeType: NodeType;
  status: NodeStatus;
  statusReason: string | null;
  region: string;
  imageVersion: string;
  network: { slug: string; name: string };
  syncStatus: { currentBlock: number | null; highestBlock: number | null; peers: number | null };
  createdAt: string;
}

interface NodeDetail extends NodeRow {
  workspaceId: string;
  apiKey: string;
  apiKeyMasked: boolean;
  lightningRestore: boolean;
  launchArgs: { rpcMethods: RpcMethods; extra: string[] };
  endpoints: { httpUrl: string; wsUrl: string } | null;
  resources: { cpu: number; memory: number; storage: number } | null;
  logs: string[];
  events: { at: string; type: string; message: string }[];
  validator: { stash: string | null; status: string | null } | null;
  validatorSetup: { steps: { name: string; done: boolean }[] } | null;
}

const ROW_FIELDS = `id displayName nodeType status statusReason region imageVersion createdAt
  network { slug name } syncStatus { currentBlock highestBlock peers }`;

const TRANSITIONAL: NodeStatus[] = ["PENDING", "PROVISIONING", "SYNCING", "DELETING"];

export function StatusBadge({ status }: { status: NodeStatus }) {
  return (
    <span className={`badge status-${status.toLowerCase()}`} data-testid="node-status">
      {status}
    </span>
  );
}

function syncPct(s: NodeRow["syncStatus"]): number | null {
  if (s.currentBlock === null || !s.highestBlock) return null;
  return Math.min(100, (s.currentBlock / s.highestBlock) * 100);
}

export function NodesPage() {
  const ws = useWorkspace().current!;
  const q = useQuery(
    () =>
      gql<{ dedicatedNodes: NodeRow[] }>(
        `query($w: ID) { dedicatedNodes(workspaceId: $w) { ${ROW_FIELDS} } }`,
        {
          w: ws.id,
        },
      ),
    [ws.id],
    5000,
  );
  return (
    <section>
      <div className="row between">
        <h1>Dedicated nodes</h1>
        {roleCan(ws.myRole, "manageNodes") && (
          <Link to="/nodes/new" className="button">
            Deploy node
          </Link>
        )}
      </div>
      <Async q={q}>
        {({ dedicatedNodes }) =>
          dedicatedNodes.length === 0 ? (
            <div className="card empty">No dedicated nodes yet.</div>
          ) : (
            <div className="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th>Name</th>
                    <th>Network</th>
                    <th>Type</th>
                    <th>Region</th>
                    <th>Status</th>
                    <th className="num">Sync</th>
                  </tr>
                </thead>
                <tbody>
                  {dedicatedNodes.map((n) => {
                    const pct = syncPct(n.syncStatus);
                    return (
                      <tr key={n.id}>
                        <td>
                          <Link to={`/nodes/${n.id}`}>{n.displayName}</Link>
                        </td>
                        <td>{n.network.name}</td>
                        <td>{n.nodeType}</td>
                        <td>{n.region}</td>
                        <td>
                          <StatusBadge status={n.status} />
                        </td>
                        <td className="num">{pct === null ? "–" : `${pct.toFixed(1)}%`}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </div>
          )
        }
      </Async>
    </section>
  );
}

const DEPLOY_FIELDS = ["displayName", "network", "nodeType", "imageVersion", "region", "launchArgs"];

export function NodeDeployPage() {
  const { navigate } = useRoute();
  const workspaceId = useWorkspace().current!.id;
  const opts = useQuery(
    () =>
      gql<{ networks: Network[]; regions: string[] }>(
        "{ networks { id slug name protocol chainId } regions }",
      ),
    [],
  );
  const [displayName, setDisplayName] = useState("");
  const [network, setNetwork] = useState("");
  const [nodeType, setNodeType] = useState<NodeType>("FULL");
  const [imageVersion, setImageVersion] = useState("");
  const [region, setRegion] = useState("");
  const [lightningRestore, setLightningRestore] = useState(false);
  const [rpcMethods, setRpcMethods] = useState<RpcMethods>("SAFE");
  const [extra, setExtra] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (!opts.data) return;
    setNetwork((n) => n || opts.data!.networks[0]?.slug || "");
    setRegion((r) => r || opts.data!.regions[0] || "");
  }, [opts.data]);
  const versions = useQuery(
    async () =>
      network
        ? (
            await gql<{ imageVersions: { version: string; image: string; latest: boolean }[] }>(
              "query($n: String!) { imageVersions(network: $n) { version image latest } }",
              { n: network },
            )
          ).imageVersions
        : [],
    [network],
  );
  const protocol = opts.data?.networks.find((n) => n.slug === network)?.protocol;
  useEffect(() => {
    if (nodeType === "VALIDATOR") setRpcMethods("UNSAFE");
  }, [nodeType]);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const d = await gql<{ deployDedicatedNode: { id: string } }>(
        "mutation($i: DeployDedicatedNodeInput!, $w: ID) { deployDedicatedNode(input: $i, workspaceId: $w) { id } }",
        {
          w: workspaceId,
          i: {
            displayName,
            network,
            nodeType,
            region,
            lightningRestore,
            imageVersion: imageVersion || null,
            launchArgs: {
              rpcMethods,
              extra: extra
                .split("\n")
                .map((s) => s.trim())
                .filter(Boolean),
            },
          },
        },
      );
      navigate(`/nodes/${d.deployDedicatedNode.id}`);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  return (
    <section>
      <p className="crumbs">
        <Link to="/nodes">Dedicated nodes</Link> /
      </p>
      <h1>Deploy a node</h1>
      <Async q={opts}>
        {({ networks, regions }) => (
          <form className="card" onSubmit={submit} aria-label="Deploy node">
            <Field label="Name" error={error} field="displayName">
              <input
                name="displayName"
                value={displayName}
                onChange={(e) => setDisplayName(e.target.value)}
              />
            </Field>
            <Field label="Network" error={error} field="network">
              <select name="network" value={network} onChange={(e) => setNetwork(e.target.value)}>
                {networks.map((n) => (
                  <option key={n.id} value={n.slug}>
                    {n.name}
                  </option>
                ))}
              </select>
            </Field>
            <Field label="Node type" error={error} field="nodeType">
              <select
                name="nodeType"
                value={nodeType}
                onChange={(e) => setNodeType(e.target.value as NodeType)}
              >
                <option value="FULL">Full</option>
                <option value="ARCHIVE">Archive</option>
                <option value="VALIDATOR" disabled={protocol === "EVM"}>
                  Validator (Substrate)
                </option>
              </select>
            </Field>
            <Field label="Image version" error={error} field="imageVersion">
              <select
                name="imageVersion"
                value={imageVersion}
                onChange={(e) => setImageVersion(e.target.value)}
              >
                <option value="">
                  Latest
                  {versions.data?.find((v) => v.latest)
                    ? ` (${versions.data.find((v) => v.latest)!.version})`
                    : ""}
                </option>
                {versions.data?.map((v) => (
                  <option key={v.version} value={v.version}>
                    {v.version}
                  </option>
                ))}
              </select>
            </Field>
            <Field label="Region" error={error} field="region">
              <select name="region" value={region} onChange={(e) => setRegion(e.target.value)}>
                {regions.map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
            </Field>
            <label className="check">
              <input
                type="checkbox"
                name="lightningRestore"
                checked={lightningRestore}
                onChange={(e) => setLightningRestore(e.target.checked)}
              />
              Lightning restore (start from a snapshot instead of syncing from genesis)
            </label>
            <fieldset>
              <legend>Launch arguments</legend>
              <Field label="RPC methods (--rpc-methods)">
                <select
                  name="rpcMethods"
                  value={rpcMethods}
                  onChange={(e) => setRpcMethods(e.target.value as RpcMethods)}
                >
                  <option value="SAFE">Safe</option>
                  <option value="UNSAFE">Unsafe (needed while setting validator session keys)</option>
                </select>
              </Field>
              <Field label="Extra arguments, one per line" error={error} field="launchArgs">
                <textarea name="extra" rows={3} value={extra} onChange={(e) => setExtra(e.target.value)} />
              </Field>
            </fieldset>
            <FormError error={error} fields={DEPLOY_FIELDS} />
            <button type="submit" disabled={busy || !network || !region}>
              {busy ? "Deploying…" : "Deploy"}
            </button>
          </form>
        )}
      </Async>
    </section>
  );
}

export function NodePage({ id }: { id: string }) {
  const { navigate } = useRoute();
  const { roleIn } = useWorkspace();
  const q = useQuery(
    () =>
      gql<{ dedicatedNode: NodeDetail }>(
        `query($id: ID!) { dedicatedNode(id: $id) { ${ROW_FIELDS} workspaceId apiKey apiKeyMasked lightningRestore
          launchArgs { rpcMethods extra } endpoints { httpUrl wsUrl } resources { cpu memory storage }
          logs(tail: 200) events(limit: 50) { at type message }
          validator { stash status } validatorSetup { steps { name done } } } }`,
        { id },
      ),
    [id],
    3000,
  );
  const [action, setAction] = useState<"stop" | "restart" | "delete" | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const run = async () => {
    if (!action) return;
    setBusy(true);
    setError(null);
    const m = { stop: "stopDedicatedNode", restart: "restartDedicatedNode", delete: "deleteDedicatedNode" }[
      action
    ];
    try {
      await gql(`mutation($id: ID!) { ${m}(id: $id) { id status } }`, { id });
      setAction(null);
      if (action === "delete") navigate("/nodes");
      else q.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section>
      <p className="crumbs">
        <Link to="/nodes">Dedicated nodes</Link> /
      </p>
      <Async q={q}>
        {({ dedicatedNode: n }) => {
          const pct = syncPct(n.syncStatus);
          const manages = roleCan(roleIn(n.workspaceId), "manageNodes");
          return (
            <>
              <div className="row between wrap">
                <h1>{n.displayName}</h1>
                <StatusBadge status={n.status} />
              </div>
              {n.statusReason && <p className="muted">{n.statusReason}</p>}
              {TRANSITIONAL.includes(n.status) && <p className="muted">Updating every few seconds…</p>}
              <ErrorBox error={error} />
              {manages && (
                <div className="row wrap">
                  <button type="button" className="secondary small" onClick={() => setAction("restart")}>
                    Restart
                  </button>
                  <button type="button" className="secondary small" onClick={() => setAction("stop")}>
                    Stop
                  </button>
                  <button type="button" className="danger small" onClick={() => setAction("delete")}>
                    Delete
                  </button>
                </div>
              )}
              <div className="card">
                <h2>Endpoints</h2>
                {n.endpoints ? (
                  <>
                    <div className="label">HTTPS</div>
                    <div className="row">
                      <code className="url">{n.endpoints.httpUrl.replace(n.apiKey, mask(n.apiKey))}</code>
                      {!n.apiKeyMasked && <CopyButton text={n.endpoints.httpUrl} />}
                    </div>
                    <div className="label">WSS</div>
                    <div className="row">
                      <code className="url">{n.endpoints.wsUrl.replace(n.apiKey, mask(n.apiKey))}</code>
                      {!n.apiKeyMasked && <CopyButton text={n.endpoints.wsUrl} />}
                    </div>
                  </>
                ) : (
                  <p className="muted">Available once the node runs.</p>
                )}
              </div>
              <div className="card">
                <h2>Details</h2>
                <dl className="grid">
                  <dt>Network</dt>
                  <dd>{n.network.name}</dd>
                  <dt>Type</dt>
                  <dd>{n.nodeType}</dd>
                  <dt>Image</dt>
                  <dd>{n.imageVersion}</dd>
                  <dt>Region</dt>
                  <dd>{n.region}</dd>
                  <dt>Lightning restore</dt>
                  <dd>{n.lightningRestore ? "yes" : "no"}</dd>
                  <dt>RPC methods</dt>
                  <dd>{n.launchArgs.rpcMethods}</dd>
                  <dt>Extra arguments</dt>
                  <dd className="mono">{n.launchArgs.extra.join(" ") || "–"}</dd>
                  {n.resources && (
                    <>
                      <dt>Resources</dt>
                      <dd>
                        {n.resources.cpu.toFixed(2)} CPU · {fmtBytes(n.resources.memory)} memory ·{" "}
                        {fmtBytes(n.resources.storage)} storage
                      </dd>
                    </>
                  )}
                </dl>
              </div>
              <div className="card" data-card="Sync">
                <h2>Sync</h2>
                <p>
                  Block {fmtNum(n.syncStatus.currentBlock)} of {fmtNum(n.syncStatus.highestBlock)} ·{" "}
                  {fmtNum(n.syncStatus.peers)} peers
                </p>
                <div className="meter" role="progressbar" aria-valuenow={Math.round(pct ?? 0)}>
                  <div style={{ width: `${pct ?? 0}%` }} />
                </div>
              </div>
              {n.validatorSetup && (
                <div className="card" data-card="Validator checklist">
                  <h2>Validator checklist</h2>
                  <ul className="checklist">
                    {n.validatorSetup.steps.map((s) => (
                      <li key={s.name} className={s.done ? "done" : undefined}>
                        {s.done ? "✔" : "○"} {s.name}
                      </li>
                    ))}
                  </ul>
                  <p>
                    Status: <strong>{n.validator?.status ?? "unknown"}</strong>
                    {n.validator?.stash ? ` · stash ${n.validator.stash}` : ""}
                  </p>
                  {manages && <StashForm id={n.id} current={n.validator?.stash ?? ""} onSaved={q.reload} />}
                </div>
              )}
              <div className="card">
                <h2>Logs</h2>
                <pre className="logs">{n.logs.length ? n.logs.join("\n") : "No log lines yet."}</pre>
              </div>
              <div className="card">
                <h2>Events</h2>
                <ul className="events">
                  {[...n.events].reverse().map((e) => (
                    <li key={`${e.at}-${e.type}-${e.message}`}>
                      <span className="muted">{fmtDate(e.at)}</span> <strong>{e.type}</strong> {e.message}
                    </li>
                  ))}
                </ul>
              </div>
              {action && (
                <ConfirmDialog
                  title={`${action[0]!.toUpperCase()}${action.slice(1)} ${n.displayName}?`}
                  confirmLabel={action === "delete" ? "Delete node" : action === "stop" ? "Stop" : "Restart"}
                  busy={busy}
                  onCancel={() => setAction(null)}
                  onConfirm={run}
                >
                  <p>
                    {action === "delete"
                      ? "The node's key stops working at once and its data is removed."
                      : "The endpoint is unavailable while the node restarts."}
                  </p>
                </ConfirmDialog>
              )}
            </>
          );
        }}
      </Async>
    </section>
  );
}

function StashForm({ id, current, onSaved }: { id: string; current: string; onSaved: () => void }) {
  const [stash, setStash] = useState(current);
  const [error, setError] = useState<unknown>(null);
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      await gql("mutation($id: ID!, $s: String!) { setValidatorStash(nodeId: $id, stash: $s) { id } }", {
        id,
        s: stash.trim(),
      });
      onSaved();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form className="row wrap" onSubmit={save}>
      <input
        name="stash"
        className="grow"
        placeholder="Stash account (SS58 or 0x…)"
        value={stash}
        onChange={(e) => setStash(e.target.value)}
      />
      <button type="submit" className="small">
        Save stash
      </button>
      <FieldError error={error} field="stash" />
      <FormError error={error} fields={["stash"]} />
    </form>
  );
}
