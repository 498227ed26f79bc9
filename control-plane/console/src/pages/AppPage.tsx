import { type FormEvent, useState } from "react";
import { type AllowlistKind, APP_FIELDS, type App, gql, roleCan, type WorkspaceRole } from "../api";
import { Link } from "../router";
import { Async, ConfirmDialog, CopyButton, Field, FieldError, FormError, fmtDate, useQuery } from "../ui";
import { useWorkspace } from "../workspace";
import { AccessRulesCard, JwtCard } from "./AccessRules";

export function mask(key: string): string {
  return key.length <= 8 ? "••••••••" : `${key.slice(0, 4)}${"•".repeat(12)}${key.slice(-4)}`;
}

export function AppPage({ id }: { id: string }) {
  const { roleIn } = useWorkspace();
  const q = useQuery(
    () => gql<{ app: App }>(`query($id: ID!) { app(id: $id) { ${APP_FIELDS} } }`, { id }),
    [id],
  );
  return (
    <section>
      <p className="crumbs">
        <Link to="/">Apps</Link> /
      </p>
      <Async q={q}>
        {({ app }) => (
          <>
            <div className="row between">
              <h1>{app.name}</h1>
              <span className={`badge ${app.environment.toLowerCase()}`}>{app.environment}</span>
            </div>
            <ApiKeyCard app={app} role={roleIn(app.workspaceId)} onChanged={q.reload} />
            <Endpoints app={app} />
            <Allowlist app={app} role={roleIn(app.workspaceId)} onChanged={q.reload} />
            <AccessRulesCard app={app} role={roleIn(app.workspaceId)} onChanged={q.reload} />
            <JwtCard app={app} role={roleIn(app.workspaceId)} onChanged={q.reload} />
          </>
        )}
      </Async>
    </section>
  );
}

function ApiKeyCard({
  app,
  role,
  onChanged,
}: {
  app: App;
  role: WorkspaceRole | null;
  onChanged: () => void;
}) {
  const [revealed, setRevealed] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [grace, setGrace] = useState("0");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const regenerate = async () => {
    setBusy(true);
    setError(null);
    try {
      await gql(
        "mutation($id: ID!, $g: Int!) { regenerateApiKey(appId: $id, gracePeriodSeconds: $g) { id apiKey } }",
        { id: app.id, g: Number(grace) },
      );
      setConfirming(false);
      onChanged();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="card" data-card="API key">
      <h2>API key</h2>
      <div className="row wrap">
        <code className="key" data-testid="api-key">
          {revealed || app.apiKeyMasked ? app.apiKey : mask(app.apiKey)}
        </code>
        {!app.apiKeyMasked && (
          <>
            <button type="button" className="small secondary" onClick={() => setRevealed((r) => !r)}>
              {revealed ? "Hide" : "Reveal"}
            </button>
            <CopyButton text={app.apiKey} label="Copy key" />
          </>
        )}
        {roleCan(role, "manageKeys") && (
          <button type="button" className="small danger" onClick={() => setConfirming(true)}>
            Regenerate key
          </button>
        )}
      </div>
      {app.apiKeyMasked && (
        <p className="muted" data-testid="key-masked">
          Keys are masked for viewers of this workspace.
        </p>
      )}
      <p className="muted">
        Created {fmtDate(app.apiKeyCreatedAt)}
        {app.previousApiKeyExpiresAt &&
          new Date(app.previousApiKeyExpiresAt) > new Date() &&
          ` · the previous key works until ${fmtDate(app.previousApiKeyExpiresAt)}`}
      </p>
      {confirming && (
        <ConfirmDialog
          title="Regenerate the API key?"
          confirmLabel="Regenerate"
          busy={busy}
          onCancel={() => {
            setConfirming(false);
            setError(null);
          }}
          onConfirm={regenerate}
        >
          <p>Clients using the current key must switch to the new one.</p>
          <Field label="Keep the old key working for" error={error} field="gracePeriodSeconds">
            <select name="gracePeriod" value={grace} onChange={(e) => setGrace(e.target.value)}>
              <option value="0">no grace period (revoke now)</option>
              <option value="3600">1 hour</option>
              <option value="86400">1 day</option>
              <option value="604800">7 days</option>
            </select>
          </Field>
          <FormError error={error} fields={["gracePeriodSeconds"]} />
        </ConfirmDialog>
      )}
    </div>
  );
}

function Endpoints({ app }: { app: App }) {
  const [tab, setTab] = useState(0);
  if (app.endpoints.length === 0)
    return (
      <div className="card">
        <h2>Endpoints</h2>
        <p className="muted">No networks are configured yet.</p>
      </div>
    );
  const ep = app.endpoints[Math.min(tab, app.endpoints.length - 1)]!;
  return (
    <div className="card">
      <h2>Endpoints</h2>
      <div className="tabs" role="tablist">
        {app.endpoints.map((e, i) => (
          <button
            key={e.network.id}
            type="button"
            role="tab"
            aria-selected={i === tab}
            className={i === tab ? "tab active" : "tab"}
            onClick={() => setTab(i)}
          >
            {e.network.name}
          </button>
        ))}
      </div>
      <div className="endpoint" data-network={ep.network.slug}>
        <div className="label">HTTPS</div>
        <div className="row">
          <code className="url" data-testid="https-url">
            {ep.httpsUrl}
          </code>
          {!app.apiKeyMasked && <CopyButton text={ep.httpsUrl} />}
        </div>
        <div className="label">WSS</div>
        <div className="row">
          <code className="url" data-testid="wss-url">
            {ep.wssUrl}
          </code>
          {!app.apiKeyMasked && <CopyButton text={ep.wssUrl} />}
        </div>
        <div className="label">Try it</div>
        <div className="row">
          <pre className="cmd">{ep.exampleCommand}</pre>
          {!app.apiKeyMasked && <CopyButton text={ep.exampleCommand} />}
        </div>
      </div>
    </div>
  );
}

function Allowlist({
  app,
  role,
  onChanged,
}: {
  app: App;
  role: WorkspaceRole | null;
  onChanged: () => void;
}) {
  const edits = roleCan(role, "manageAccessRules");
  const [kind, setKind] = useState<AllowlistKind>("ORIGIN");
  const [value, setValue] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const add = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await gql(
        "mutation($id: ID!, $i: AllowlistEntryInput!) { addAllowlistEntry(appId: $id, input: $i) { id } }",
        { id: app.id, i: { kind, value: value.trim() } },
      );
      setValue("");
      onChanged();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const remove = async (entryId: string) => {
    setError(null);
    try {
      await gql("mutation($a: ID!, $e: ID!) { removeAllowlistEntry(appId: $a, entryId: $e) { id } }", {
        a: app.id,
        e: entryId,
      });
      onChanged();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <div className="card" data-card="Allowlist">
      <h2>Allowlist</h2>
      <p className="muted">
        With no entries every origin and IP may use the key. Origins like <code>https://app.example.com</code>{" "}
        or <code>*.example.com</code>; IPs or CIDR ranges like <code>203.0.113.0/24</code>.
      </p>
      {app.allowlist.length > 0 && (
        <ul className="allowlist">
          {app.allowlist.map((e) => (
            <li key={e.id}>
              <span className="badge">{e.kind}</span> <code>{e.value}</code>
              {edits && (
                <button type="button" className="small secondary" onClick={() => remove(e.id)}>
                  Remove
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {edits && (
        <form className="row wrap" onSubmit={add} aria-label="Add allowlist entry">
          <select name="kind" value={kind} onChange={(e) => setKind(e.target.value as AllowlistKind)}>
            <option value="ORIGIN">Origin</option>
            <option value="IP">IP</option>
          </select>
          <input
            name="value"
            className="grow"
            value={value}
            placeholder={kind === "ORIGIN" ? "https://app.example.com" : "203.0.113.7"}
            onChange={(e) => setValue(e.target.value)}
            aria-invalid={Boolean(error)}
          />
          <button type="submit" disabled={busy || value.trim() === ""}>
            Add
          </button>
        </form>
      )}
      <FieldError error={error} field="value" />
      <FieldError error={error} field="kind" />
      <FormError error={error} fields={["value", "kind"]} />
    </div>
  );
}
