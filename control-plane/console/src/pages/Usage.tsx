import {
  BarElement,
  CategoryScale,
  Chart as ChartJS,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from "chart.js";
import { useState } from "react";
import { Bar } from "react-chartjs-2";
import { gql, TODAY_FIELDS, type Today } from "../api";
import { Async, fmtDate, fmtMs, fmtNum, useQuery } from "../ui";
import { useWorkspace } from "../workspace";
import { HistoryCard, type UsageDay, type UsageUnit } from "./UsageHistory";
import { MethodsTable, type MethodUsage } from "./UsageMethods";

ChartJS.register(
  BarElement,
  LineController,
  LineElement,
  PointElement,
  CategoryScale,
  LinearScale,
  Tooltip,
  Legend,
);

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
    /** Compute units of the `total` requests. */
    computeUnits: number;
    success: number;
    errors: ErrorBreakdown;
    /** Per hour: Success and each error category (`errors` is their sum, unused here), and compute units. */
    series: ({ at: string; success: number; computeUnits: number } & ErrorBreakdown)[];
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
const COMPUTE_UNITS = "#0f172a";

export function UsagePage() {
  const [appId, setAppId] = useState("");
  const [days, setDays] = useState(30);
  const [historyUnit, setHistoryUnit] = useState<UsageUnit>("requests");
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
          requests24h { total computeUnits success
            series { at success computeUnits clientError nodeError serviceError tooManyRequests unknownError }
            errors { clientError nodeError serviceError tooManyRequests unknownError } }
          methods { method requests computeUnits errors p50 p95 avg }
          history(days: $days) { date total computeUnits limitReached byApp { app { id name } count computeUnits } }
          ${TODAY_FIELDS} } }`,
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
            <HistoryCard
              history={usage.history}
              days={days}
              setDays={setDays}
              unit={historyUnit}
              setUnit={setHistoryUnit}
            />
          </>
        )}
      </Async>
    </section>
  );
}

/** One daily limit's meter: green, amber from 80%, red at 100%. */
function Meter({ used, limit, label }: { used: number; limit: number; label: string }) {
  const pct = limit > 0 ? Math.min(100, (used / limit) * 100) : 0;
  return (
    <div
      className={`meter ${pct >= 100 ? "full" : pct >= 80 ? "warn" : ""}`}
      role="progressbar"
      aria-label={label}
      aria-valuenow={Math.round(pct)}
      aria-valuemin={0}
      aria-valuemax={100}
    >
      <div style={{ width: `${pct}%` }} />
    </div>
  );
}

/** Today's requests against the daily limit, and compute units (against their limit when the plan has one). */
function TodayCard({ today }: { today: Today }) {
  return (
    <div className="card" data-card="Today">
      <h2>Today</h2>
      <div className="big" data-testid="today-count">
        {fmtNum(today.count)} <span className="muted">of {fmtNum(today.limit)} requests</span>
      </div>
      <Meter used={today.count} limit={today.limit} label="Requests against the daily limit" />
      <div className="big" data-testid="today-compute-units">
        {fmtNum(today.computeUnits)}{" "}
        <span className="muted">
          {today.computeUnitLimit === null
            ? "compute units"
            : `of ${fmtNum(today.computeUnitLimit)} compute units`}
        </span>
      </div>
      {today.computeUnitLimit !== null && (
        <Meter
          used={today.computeUnits}
          limit={today.computeUnitLimit}
          label="Compute units against the daily limit"
        />
      )}
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
  // Compute units on their own axis: a heavy method weighs tens of units per request.
  const cuLine = {
    type: "line" as const,
    label: "Compute units",
    data: r.series.map((p) => p.computeUnits),
    borderColor: COMPUTE_UNITS,
    backgroundColor: COMPUTE_UNITS,
    pointRadius: 2,
    yAxisID: "cu",
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
            <span className="dot" style={{ background: COMPUTE_UNITS }} /> Compute units
          </div>
          <div className="big" data-testid="compute-units-total">
            {fmtNum(r.computeUnits)}
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
        data-compute-units={JSON.stringify(cuLine.data)}
      >
        <Bar
          // A line dataset in a bar chart: react-chartjs-2 types the datasets by the chart's own type.
          data={{ ...data, datasets: [...data.datasets, cuLine as unknown as (typeof data.datasets)[0]] }}
          options={{
            responsive: true,
            maintainAspectRatio: false,
            animation: false,
            interaction: { mode: "index", intersect: false },
            scales: {
              x: { stacked: true },
              y: { stacked: true, beginAtZero: true, title: { display: true, text: "Requests" } },
              cu: {
                position: "right",
                beginAtZero: true,
                grid: { drawOnChartArea: false },
                title: { display: true, text: "Compute units" },
              },
            },
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
