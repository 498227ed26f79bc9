import { BarElement, CategoryScale, Chart as ChartJS, Legend, LinearScale, Tooltip } from "chart.js";
import { useMemo, useState } from "react";
import { Bar } from "react-chartjs-2";
import { gql, type Today } from "../api";
import { Async, fmtDate, fmtMs, fmtNum, useQuery } from "../ui";
import { useWorkspace } from "../workspace";

ChartJS.register(BarElement, CategoryScale, LinearScale, Tooltip, Legend);

interface MethodUsage {
  method: string;
  requests: number;
  errors: number;
  p50: number | null;
  p95: number | null;
  avg: number | null;
}

interface UsageDay {
  date: string;
  total: number;
  limitReached: boolean;
  byApp: { app: { id: string; name: string }; count: number }[];
}

interface ErrorBreakdown {
  clientError: number;
  nodeError: number;
  serviceError: number;
  tooManyRequests: number;
  unknownError: number;
}

interface Report {
  requests24h: {
    total: number;
    success: number;
    errors: ErrorBreakdown;
    /** Per hour: Success and each error category (`errors` is their sum, unused here). */
    series: ({ at: string; success: number } & ErrorBreakdown)[];
  };
  methods: MethodUsage[];
  history: UsageDay[];
  today: Today;
}

const CATEGORIES: { key: keyof ErrorBreakdown; label: string; color: string }[] = [
  { key: "clientError", label: "Client Error", color: "#f59e0b" },
  { key: "tooManyRequests", label: "Too Many Requests", color: "#a855f7" },
  { key: "nodeError", label: "Node Error", color: "#ef4444" },
  { key: "serviceError", label: "Service Error", color: "#be123c" },
  { key: "unknownError", label: "Unknown Error", color: "#6b7280" },
];
const SUCCESS = "#16a34a";
const PALETTE = ["#2563eb", "#0891b2", "#7c3aed", "#db2777", "#ea580c", "#65a30d", "#0d9488", "#9333ea"];

export function UsagePage() {
  const [appId, setAppId] = useState("");
  const [days, setDays] = useState(30);
  const workspaceId = useWorkspace().current!.id;
  const apps = useQuery(
    () =>
      gql<{ apps: { id: string; name: string }[] }>("query($w: ID) { apps(workspaceId: $w) { id name } }", {
        w: workspaceId,
      }),
    [workspaceId],
  );
  const q = useQuery(
    () =>
      gql<{ usage: Report }>(
        `query($f: UsageFilter!, $days: Int!) { usage(filter: $f) {
          requests24h { total success
            series { at success clientError nodeError serviceError tooManyRequests unknownError }
            errors { clientError nodeError serviceError tooManyRequests unknownError } }
          methods { method requests errors p50 p95 avg }
          history(days: $days) { date total limitReached byApp { app { id name } count } }
          today { count limit resetsAt } } }`,
        { f: appId ? { appId, workspaceId } : { workspaceId }, days },
      ),
    [appId, days, workspaceId],
    30_000,
  );
  return (
    <section>
      <div className="row between wrap">
        <h1>Usage</h1>
        <div className="row wrap">
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
          <button type="button" className="small secondary" onClick={q.reload}>
            Refresh
          </button>
        </div>
      </div>
      <Async q={q}>
        {({ usage }) => (
          <>
            <TodayCard today={usage.today} />
            <RequestsCard r={usage.requests24h} />
            <ResponseTimeCard
              workspaceId={workspaceId}
              appId={appId}
              methods={usage.methods.map((m) => m.method)}
            />
            <MethodsTable rows={usage.methods} />
            <HistoryCard history={usage.history} days={days} setDays={setDays} />
          </>
        )}
      </Async>
    </section>
  );
}

function TodayCard({ today }: { today: Today }) {
  const pct = today.limit > 0 ? Math.min(100, (today.count / today.limit) * 100) : 0;
  return (
    <div className="card" data-card="Today">
      <h2>Today</h2>
      <div className="big" data-testid="today-count">
        {fmtNum(today.count)} <span className="muted">of {fmtNum(today.limit)} requests</span>
      </div>
      <div
        className={`meter ${pct >= 100 ? "full" : pct >= 80 ? "warn" : ""}`}
        role="progressbar"
        aria-valuenow={Math.round(pct)}
        aria-valuemin={0}
        aria-valuemax={100}
      >
        <div style={{ width: `${pct}%` }} />
      </div>
      <p className="muted">Resets at {fmtDate(today.resetsAt)} (00:00 UTC)</p>
    </div>
  );
}

function hourLabel(iso: string, daily: boolean): string {
  const d = new Date(iso);
  return daily
    ? d.toLocaleDateString(undefined, { month: "short", day: "numeric" })
    : d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
}

function RequestsCard({ r }: { r: Report["requests24h"] }) {
  const daily =
    r.series.length > 1 &&
    new Date(r.series[1]!.at).getTime() - new Date(r.series[0]!.at).getTime() >= 86_400_000;
  const errorsTotal = r.total - r.success;
  const data = {
    labels: r.series.map((p) => hourLabel(p.at, daily)),
    datasets: [
      { label: "Success", data: r.series.map((p) => p.success), backgroundColor: SUCCESS, stack: "s" },
      ...CATEGORIES.map((c) => ({
        label: c.label,
        data: r.series.map((p) => p[c.key]),
        backgroundColor: c.color,
        stack: "s",
      })),
    ],
  };
  return (
    <div className="card" data-card="Requests, last 24 hours">
      <h2>Requests, last 24 hours</h2>
      <div className="tiles">
        <div className="tile">
          <div className="muted">Total</div>
          <div className="big" data-testid="requests-total">
            {fmtNum(r.total)}
          </div>
        </div>
        <div className="tile">
          <div className="muted">
            <span className="dot" style={{ background: SUCCESS }} /> Success
          </div>
          <div className="big">{fmtNum(r.success)}</div>
        </div>
        {CATEGORIES.map((c) => (
          <div className="tile" key={c.key}>
            <div className="muted">
              <span className="dot" style={{ background: c.color }} /> {c.label}
            </div>
            <div className="big">{fmtNum(r.errors[c.key])}</div>
          </div>
        ))}
      </div>
      {/* The canvas has no DOM legend: data-datasets names the stacked series (and their sums) for tests. */}
      <div
        className="chart"
        data-testid="requests-chart"
        data-datasets={JSON.stringify(
          data.datasets.map((d) => ({ label: d.label, total: d.data.reduce((a, b) => a + b, 0) })),
        )}
      >
        <Bar
          data={data}
          options={{
            responsive: true,
            maintainAspectRatio: false,
            animation: false,
            interaction: { mode: "index", intersect: false },
            scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true } },
            plugins: { legend: { position: "bottom" } },
          }}
        />
      </div>
      {errorsTotal > 0 && (
        <div className="stackbar" title="Errors by category">
          {CATEGORIES.filter((c) => r.errors[c.key] > 0).map((c) => (
            <div
              key={c.key}
              title={`${c.label}: ${fmtNum(r.errors[c.key])}`}
              style={{ flex: r.errors[c.key], background: c.color }}
            />
          ))}
        </div>
      )}
    </div>
  );
}

function ResponseTimeCard({
  workspaceId,
  appId,
  methods,
}: {
  workspaceId: string;
  appId: string;
  methods: string[];
}) {
  const [method, setMethod] = useState("");
  const q = useQuery(
    () =>
      gql<{ usage: { responseTime: { p50: number | null; p95: number | null; avg: number | null } } }>(
        "query($f: UsageFilter!, $m: String) { usage(filter: $f) { responseTime(method: $m) { p50 p95 avg } } }",
        { f: appId ? { appId, workspaceId } : { workspaceId }, m: method || null },
      ),
    [appId, method, workspaceId],
  );
  return (
    <div className="card" data-card="Response time">
      <div className="row between wrap">
        <h2>Response time</h2>
        <label className="inline">
          Method
          <select name="method" value={method} onChange={(e) => setMethod(e.target.value)}>
            <option value="">All methods</option>
            {methods.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
        </label>
      </div>
      <Async q={q}>
        {({ usage: { responseTime: t } }) => (
          <div className="tiles">
            <div className="tile">
              <div className="muted">p50</div>
              <div className="big" data-testid="p50">
                {fmtMs(t.p50)}
              </div>
            </div>
            <div className="tile">
              <div className="muted">p95</div>
              <div className="big" data-testid="p95">
                {fmtMs(t.p95)}
              </div>
            </div>
            <div className="tile">
              <div className="muted">Average</div>
              <div className="big" data-testid="avg">
                {fmtMs(t.avg)}
              </div>
            </div>
          </div>
        )}
      </Async>
    </div>
  );
}

type SortKey = keyof MethodUsage;
const COLUMNS: { key: SortKey; label: string; fmt: (m: MethodUsage) => string }[] = [
  { key: "method", label: "Method", fmt: (m) => m.method },
  { key: "requests", label: "Requests", fmt: (m) => fmtNum(m.requests) },
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

function MethodsTable({ rows }: { rows: MethodUsage[] }) {
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

function HistoryCard({
  history,
  days,
  setDays,
}: {
  history: UsageDay[];
  days: number;
  setDays: (d: number) => void;
}) {
  const apps = new Map<string, string>();
  for (const d of history) for (const a of d.byApp) apps.set(a.app.id, a.app.name);
  const limitDays = history.filter((d) => d.limitReached);
  const data = {
    labels: history.map((d) => d.date.slice(5)),
    datasets: [...apps].map(([id, name], i) => ({
      label: name,
      data: history.map((d) => d.byApp.find((a) => a.app.id === id)?.count ?? 0),
      backgroundColor: PALETTE[i % PALETTE.length],
      borderColor: history.map((d) => (d.limitReached ? "#dc2626" : "transparent")),
      borderWidth: 2,
      stack: "apps",
    })),
  };
  return (
    <div className="card" data-card="Total requests per day">
      <div className="row between wrap">
        <h2>Total requests per day</h2>
        <label className="inline">
          Days
          <select name="days" value={days} onChange={(e) => setDays(Number(e.target.value))}>
            <option value={7}>7</option>
            <option value={30}>30</option>
            <option value={90}>90</option>
          </select>
        </label>
      </div>
      <div className="chart">
        <Bar
          data={data}
          options={{
            responsive: true,
            maintainAspectRatio: false,
            animation: false,
            scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true } },
            plugins: {
              legend: { position: "bottom" },
              tooltip: {
                callbacks: {
                  footer: (items) => {
                    const d = history[items[0]?.dataIndex ?? -1];
                    return d
                      ? `Total ${fmtNum(d.total)}${d.limitReached ? " · daily limit reached" : ""}`
                      : "";
                  },
                },
              },
            },
          }}
        />
      </div>
      {limitDays.length > 0 ? (
        <p className="limit-days" data-testid="limit-days">
          Daily limit reached on {limitDays.map((d) => d.date).join(", ")} (outlined in red).
        </p>
      ) : (
        <p className="muted">The daily limit was not reached in this period.</p>
      )}
    </div>
  );
}
