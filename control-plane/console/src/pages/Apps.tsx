import { type FormEvent, useState } from "react";
import { type AppEnvironment, gql, roleCan } from "../api";
import { Link, useRoute } from "../router";
import { Async, Field, FormError, fmtNum, useQuery } from "../ui";
import { useWorkspace } from "../workspace";

interface AppRow {
  id: string;
  name: string;
  environment: AppEnvironment;
  createdAt: string;
}

export function AppsPage() {
  const ws = useWorkspace().current!;
  const q = useQuery(async () => {
    const d = await gql<{
      apps: AppRow[];
      usage: { history: { byApp: { app: { id: string }; count: number }[] }[] };
    }>(
      `query($w: ID) { apps(workspaceId: $w) { id name environment createdAt }
         usage(filter: { workspaceId: $w }) { history(days: 1) { byApp { app { id } count } } } }`,
      { w: ws.id },
    );
    const today = new Map<string, number>();
    for (const a of d.usage.history.at(-1)?.byApp ?? []) today.set(a.app.id, a.count);
    return { apps: d.apps, today };
  }, [ws.id]);
  const [creating, setCreating] = useState(false);

  return (
    <section>
      <div className="row between">
        <h1>Apps</h1>
        {roleCan(ws.myRole, "createApps") && (
          <button type="button" onClick={() => setCreating(true)}>
            Create app
          </button>
        )}
      </div>
      {creating && <CreateApp workspaceId={ws.id} onCancel={() => setCreating(false)} />}
      <Async q={q}>
        {({ apps, today }) =>
          apps.length === 0 ? (
            <div className="card empty">
              No apps yet
              {roleCan(ws.myRole, "createApps") ? ": create one to get an API key and endpoints." : "."}
            </div>
          ) : (
            <div className="table-wrap">
              <table className="apps">
                <thead>
                  <tr>
                    <th>Name</th>
                    <th>Environment</th>
                    <th className="num">Today's requests</th>
                  </tr>
                </thead>
                <tbody>
                  {apps.map((a) => (
                    <tr key={a.id}>
                      <td>
                        <Link to={`/apps/${a.id}`}>{a.name}</Link>
                      </td>
                      <td>
                        <span className={`badge ${a.environment.toLowerCase()}`}>{a.environment}</span>
                      </td>
                      <td className="num">{fmtNum(today.get(a.id) ?? 0)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Async>
    </section>
  );
}

function CreateApp({ workspaceId, onCancel }: { workspaceId: string; onCancel: () => void }) {
  const { navigate } = useRoute();
  const [name, setName] = useState("");
  const [environment, setEnvironment] = useState<AppEnvironment>("DEVELOPMENT");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const d = await gql<{ createApp: { id: string } }>(
        "mutation($i: CreateAppInput!, $w: ID) { createApp(input: $i, workspaceId: $w) { id } }",
        { i: { name, environment }, w: workspaceId },
      );
      navigate(`/apps/${d.createApp.id}`);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return (
    <form className="card" onSubmit={submit} aria-label="Create app">
      <h2>Create app</h2>
      <Field label="Name" error={error} field="name">
        <input name="name" value={name} onChange={(e) => setName(e.target.value)} />
      </Field>
      <Field label="Environment" error={error} field="environment">
        <select
          name="environment"
          value={environment}
          onChange={(e) => setEnvironment(e.target.value as AppEnvironment)}
        >
          <option value="DEVELOPMENT">Development</option>
          <option value="PRODUCTION">Production</option>
        </select>
      </Field>
      <FormError error={error} fields={["name", "environment"]} />
      <div className="row">
        <button type="submit" disabled={busy}>
          {busy ? "Creating…" : "Create"}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
