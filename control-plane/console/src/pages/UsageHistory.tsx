import { Bar } from "react-chartjs-2";
import { fmtNum } from "../ui";

export interface UsageDay {
  date: string;
  total: number;
  computeUnits: number;
  limitReached: boolean;
  byApp: { app: { id: string; name: string }; count: number; computeUnits: number }[];
}

/** What the history chart stacks: request objects, or their compute units. */
export type UsageUnit = "requests" | "computeUnits";

const PALETTE = ["#2563eb", "#0891b2", "#7c3aed", "#db2777", "#ea580c", "#65a30d", "#0d9488", "#9333ea"];

/** Per UTC day, stacked by app, in the chosen unit; days over the daily limit are outlined in red. */
export function HistoryCard({
  history,
  days,
  setDays,
  unit,
  setUnit,
}: {
  history: UsageDay[];
  days: number;
  setDays: (d: number) => void;
  unit: UsageUnit;
  setUnit: (u: UsageUnit) => void;
}) {
  const apps = new Map<string, string>();
  for (const d of history) for (const a of d.byApp) apps.set(a.app.id, a.app.name);
  const limitDays = history.filter((d) => d.limitReached);
  const cu = unit === "computeUnits";
  const data = {
    labels: history.map((d) => d.date.slice(5)),
    datasets: [...apps].map(([id, name], i) => ({
      label: name,
      data: history.map((d) => {
        const a = d.byApp.find((x) => x.app.id === id);
        return (cu ? a?.computeUnits : a?.count) ?? 0;
      }),
      backgroundColor: PALETTE[i % PALETTE.length],
      borderColor: history.map((d) => (d.limitReached ? "#dc2626" : "transparent")),
      borderWidth: 2,
      stack: "apps",
    })),
  };
  const title = cu ? "Total compute units per day" : "Total requests per day";
  return (
    <div className="card" data-card="History">
      <div className="row between wrap">
        <h2>{title}</h2>
        <div className="row wrap">
          <label className="inline">
            Unit
            <select name="historyUnit" value={unit} onChange={(e) => setUnit(e.target.value as UsageUnit)}>
              <option value="requests">Requests</option>
              <option value="computeUnits">Compute units</option>
            </select>
          </label>
          <label className="inline">
            Days
            <select name="days" value={days} onChange={(e) => setDays(Number(e.target.value))}>
              <option value={7}>7</option>
              <option value={30}>30</option>
              <option value={90}>90</option>
            </select>
          </label>
        </div>
      </div>
      {/* The canvas has no DOM legend: data-datasets names the stacked apps (and their sums) for tests. */}
      <div
        className="chart"
        data-testid="history-chart"
        data-unit={unit}
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
            scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true } },
            plugins: {
              legend: { position: "bottom" },
              tooltip: {
                callbacks: {
                  footer: (items) => {
                    const d = history[items[0]?.dataIndex ?? -1];
                    return d
                      ? `Total ${fmtNum(d.total)} requests, ${fmtNum(d.computeUnits)} compute units${d.limitReached ? " · daily limit reached" : ""}`
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
