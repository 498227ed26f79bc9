import { type FormEvent, useState } from "react";
import { gql } from "../api";
import { Async, ErrorBox, fmtDate, fmtNum, useQuery } from "../ui";
import { useWorkspace } from "../workspace";

interface Entry {
  time: string;
  requestId: string;
  item: number;
  appId: string | null;
  network: string;
  transport: string;
  method: string;
  httpStatus: number;
  category: string;
  reason: string;
  latencyMs: number;
  clientIp: string | null;
  /** Null: logged by a data plane older than compute units (which charged 1). */
  computeUnits: number | null;
}

interface Page {
  edges: { node: Entry }[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

const CATEGORIES = [
  "Success",
  "Client Error",
  "Too Many Requests",
  "Node Error",
  "Service Error",
  "Unknown Error",
];
const PAGE = 50;
const QUERY = `query($f: RequestLogFilter!, $first: Int, $after: String) {
  requestLog(filter: $f, first: $first, after: $after) {
    edges { node { time requestId item appId network transport method httpStatus category reason latencyMs clientIp computeUnits } }
    pageInfo { hasNextPage endCursor } } }`;

/**
 * The request log: every error and a sample of successes (docs/request-log.md), newest first. The search
 * box takes a requestId pasted from an error response and shows that request alone.
 */
export function RequestLogPage() {
  const workspaceId = useWorkspace().current!.id;
  const [appId, setAppId] = useState("");
  const [network, setNetwork] = useState("");
  const [method, setMethod] = useState("");
  const [category, setCategory] = useState("");
  const [search, setSearch] = useState("");
  const [requestId, setRequestId] = useState("");
  const [more, setMore] = useState<{ entries: Entry[]; cursor: string | null; error: unknown }>({
    entries: [],
    cursor: null,
    error: null,
  });
  const apps = useQuery(
    () =>
      gql<{ apps: { id: string; name: string }[] }>("query($w: ID) { apps(workspaceId: $w) { id name } }", {
        w: workspaceId,
      }),
    [workspaceId],
  );
  const filter = requestId
    ? { workspaceId, requestId }
    : {
        workspaceId,
        ...(appId ? { appId } : {}),
        ...(network.trim() ? { network: network.trim() } : {}),
        ...(method.trim() ? { method: method.trim() } : {}),
        ...(category ? { category } : {}),
      };
  const key = JSON.stringify(filter);
  const q = useQuery(async () => {
    const r = await gql<{ requestLog: Page }>(QUERY, { f: filter, first: PAGE });
    setMore({ entries: [], cursor: r.requestLog.pageInfo.endCursor, error: null });
    return r.requestLog;
  }, [key]);
  const loadMore = async () => {
    try {
      const r = await gql<{ requestLog: Page }>(QUERY, { f: filter, first: PAGE, after: more.cursor });
      setMore((m) => ({
        entries: [...m.entries, ...r.requestLog.edges.map((e) => e.node)],
        cursor: r.requestLog.pageInfo.hasNextPage ? r.requestLog.pageInfo.endCursor : null,
        error: null,
      }));
    } catch (error) {
      setMore((m) => ({ ...m, error }));
    }
  };
  const appName = (id: string | null) => apps.data?.apps.find((a) => a.id === id)?.name ?? (id ? "-" : "");
  const onSearch = (e: FormEvent) => {
    e.preventDefault();
    setRequestId(search.trim());
  };

  return (
    <section>
      <div className="row between wrap">
        <h1>Request log</h1>
        <button type="button" className="small secondary" onClick={q.reload}>
          Refresh
        </button>
      </div>
      <form className="card row wrap" onSubmit={onSearch} aria-label="Find a request">
        <label className="inline grow">
          Request ID
          <input
            name="requestId"
            placeholder="Paste the requestId of an error response"
            value={search}
            onChange={(e) => setSearch(e.target.value)}
          />
        </label>
        <button type="submit">Find</button>
        {requestId && (
          <button
            type="button"
            className="secondary"
            onClick={() => {
              setSearch("");
              setRequestId("");
            }}
          >
            Show all
          </button>
        )}
      </form>
      {!requestId && (
        <div className="card row wrap" data-card="Filters">
          <label className="inline">
            App
            <select name="app" value={appId} onChange={(e) => setAppId(e.target.value)}>
              <option value="">All apps</option>
              {apps.data?.apps.map((a) => (
                <option key={a.id} value={a.id}>
                  {a.name}
                </option>
              ))}
            </select>
          </label>
          <label className="inline">
            Network
            <input name="network" value={network} onChange={(e) => setNetwork(e.target.value)} />
          </label>
          <label className="inline">
            Method
            <input name="method" value={method} onChange={(e) => setMethod(e.target.value)} />
          </label>
          <label className="inline">
            Category
            <select name="category" value={category} onChange={(e) => setCategory(e.target.value)}>
              <option value="">All</option>
              {CATEGORIES.map((c) => (
                <option key={c} value={c}>
                  {c}
                </option>
              ))}
            </select>
          </label>
        </div>
      )}
      <Async q={q}>
        {(page) => {
          const rows = [...page.edges.map((e) => e.node), ...more.entries];
          if (rows.length === 0)
            return (
              <div className="card muted" data-testid="request-log-empty">
                {requestId
                  ? "No such request in this workspace's log (errors are kept; successes only when sampled)."
                  : "Nothing logged yet."}
              </div>
            );
          return (
            <div className="card">
              <div className="table-wrap">
                <table className="request-log" data-testid="request-log">
                  <thead>
                    <tr>
                      <th>Time</th>
                      <th>Request ID</th>
                      <th>App</th>
                      <th>Network</th>
                      <th>Method</th>
                      <th>Status</th>
                      <th>Category</th>
                      <th>Reason</th>
                      <th>Latency</th>
                      <th className="num" title="Compute units this request object was charged">
                        CU
                      </th>
                      <th>Client</th>
                    </tr>
                  </thead>
                  <tbody>
                    {rows.map((r) => (
                      <tr key={`${r.requestId}/${r.item}/${r.time}`} data-request-id={r.requestId}>
                        <td>{fmtDate(r.time)}</td>
                        <td className="mono">
                          {r.requestId}
                          {r.item > 0 ? ` #${r.item}` : ""}
                        </td>
                        <td>{appName(r.appId)}</td>
                        <td>{r.network}</td>
                        <td className="mono">{r.method}</td>
                        <td>
                          {r.transport === "ws" ? "ws" : r.httpStatus}
                          {r.transport === "node" ? " (node)" : ""}
                        </td>
                        <td>{r.category}</td>
                        <td>{r.reason}</td>
                        <td>{r.latencyMs.toFixed(1)} ms</td>
                        <td className="num" data-testid="log-cu">
                          {r.computeUnits === null ? "—" : fmtNum(r.computeUnits)}
                        </td>
                        <td className="mono">{r.clientIp ?? ""}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              <ErrorBox error={more.error} />
              {(more.entries.length > 0 ? more.cursor !== null : page.pageInfo.hasNextPage) && (
                <button type="button" className="secondary" onClick={loadMore}>
                  Load more
                </button>
              )}
            </div>
          );
        }}
      </Async>
    </section>
  );
}
