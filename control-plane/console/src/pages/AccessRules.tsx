import { type FormEvent, useEffect, useState } from "react";
import { type App, gql, type MethodRuleMode, roleCan, type WorkspaceRole } from "../api";
import { Field, FieldError, FormError, fmtDate, fmtNum } from "../ui";

/** Lines (or commas) of a method list; an entry with a space inside is kept whole, for the server to refuse. */
function methodList(text: string): string[] {
  return text
    .split(/[\n,]+/)
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

/** One User-Agent pattern per line (patterns may hold spaces and commas). */
function lineList(text: string): string[] {
  return text
    .split("\n")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

/** "" = no cap. */
function capValue(text: string): number | null {
  const t = text.trim();
  if (t === "") return null;
  const n = Number(t);
  return Number.isFinite(n) ? Math.trunc(n) : null;
}

/**
 * An app's access rules (docs/access-rules.md): method allow- or deny-list, the app's own per-second and
 * daily caps, allowed User-Agent patterns. OWNERs and ADMINs edit them; everyone else reads them.
 */
export function AccessRulesCard({
  app,
  role,
  onChanged,
}: {
  app: App;
  role: WorkspaceRole | null;
  onChanged: () => void;
}) {
  const r = app.accessRules;
  const edits = roleCan(role, "manageAccessRules");
  const [mode, setMode] = useState<MethodRuleMode>(r.methodMode);
  const [methods, setMethods] = useState(r.methods.join("\n"));
  const [rps, setRps] = useState(r.requestsPerSecond === null ? "" : String(r.requestsPerSecond));
  const [daily, setDaily] = useState(r.requestsPerDay === null ? "" : String(r.requestsPerDay));
  const [cups, setCups] = useState(r.computeUnitsPerSecond === null ? "" : String(r.computeUnitsPerSecond));
  const [agents, setAgents] = useState(r.userAgents.join("\n"));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState(false);
  // A reload (after saving, or another member's change) shows what the server holds.
  useEffect(() => {
    setMode(r.methodMode);
    setMethods(r.methods.join("\n"));
    setRps(r.requestsPerSecond === null ? "" : String(r.requestsPerSecond));
    setDaily(r.requestsPerDay === null ? "" : String(r.requestsPerDay));
    setCups(r.computeUnitsPerSecond === null ? "" : String(r.computeUnitsPerSecond));
    setAgents(r.userAgents.join("\n"));
  }, [r]);

  const save = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setSaved(false);
    try {
      await gql(
        "mutation($a: ID!, $i: AccessRulesInput!) { setAppAccessRules(appId: $a, input: $i) { methodMode } }",
        {
          a: app.id,
          i: {
            methodMode: mode,
            methods: methodList(methods),
            requestsPerSecond: capValue(rps),
            computeUnitsPerSecond: capValue(cups),
            requestsPerDay: capValue(daily),
            userAgents: lineList(agents),
          },
        },
      );
      setSaved(true);
      onChanged();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (!edits) {
    return (
      <div className="card" data-card="Access rules">
        <h2>Access rules</h2>
        <dl className="rules" data-testid="access-rules-summary">
          <dt>Methods</dt>
          <dd>
            {r.methods.length === 0 && r.methodMode === "DENY"
              ? "any method"
              : `${r.methodMode === "ALLOW" ? "only" : "all but"} ${r.methods.join(", ")}`}
          </dd>
          <dt>Requests per second</dt>
          <dd>{r.requestsPerSecond === null ? "the plan's limit" : fmtNum(r.requestsPerSecond)}</dd>
          <dt>Compute units per second</dt>
          <dd>{r.computeUnitsPerSecond === null ? "the plan's limit" : fmtNum(r.computeUnitsPerSecond)}</dd>
          <dt>Requests per day</dt>
          <dd>{r.requestsPerDay === null ? "the workspace's limit" : fmtNum(r.requestsPerDay)}</dd>
          <dt>User agents</dt>
          <dd>{r.userAgents.length === 0 ? "any" : r.userAgents.join(", ")}</dd>
        </dl>
      </div>
    );
  }

  return (
    <div className="card" data-card="Access rules">
      <h2>Access rules</h2>
      <p className="muted">
        Applied by the gateway to this app's key within a second. Methods are exact names (
        <code>eth_call</code>) or namespaces (<code>debug_*</code>); caps apply below the plan's limits.
      </p>
      <form onSubmit={save} aria-label="Access rules">
        <div className="row wrap">
          <Field className="inline" label="Method rule">
            <select
              name="methodMode"
              value={mode}
              onChange={(e) => setMode(e.target.value as MethodRuleMode)}
            >
              <option value="DENY">Deny-list: every method but these</option>
              <option value="ALLOW">Allow-list: only these methods</option>
            </select>
          </Field>
        </div>
        <Field label="Methods (one per line)" error={error} field="methods">
          <textarea
            name="methods"
            rows={4}
            value={methods}
            placeholder={mode === "ALLOW" ? "eth_call\neth_getBalance\nnet_*" : "eth_getLogs\ndebug_*"}
            onChange={(e) => setMethods(e.target.value)}
          />
        </Field>
        <div className="row wrap">
          <Field className="grow" label="Requests per second (empty: the plan's)">
            <input
              name="requestsPerSecond"
              type="number"
              min={1}
              value={rps}
              onChange={(e) => setRps(e.target.value)}
            />
          </Field>
          <Field className="grow" label="Compute units per second (empty: the plan's)">
            <input
              name="computeUnitsPerSecond"
              type="number"
              min={1}
              value={cups}
              onChange={(e) => setCups(e.target.value)}
            />
          </Field>
          <Field className="grow" label="Requests per day (empty: no app cap)">
            <input
              name="requestsPerDay"
              type="number"
              min={1}
              value={daily}
              onChange={(e) => setDaily(e.target.value)}
            />
          </Field>
        </div>
        <FieldError error={error} field="requestsPerSecond" />
        <FieldError error={error} field="computeUnitsPerSecond" />
        <FieldError error={error} field="requestsPerDay" />
        <Field
          label="Allowed User-Agent patterns (one per line, * = anything; empty: any)"
          error={error}
          field="userAgents"
        >
          <textarea
            name="userAgents"
            rows={2}
            value={agents}
            placeholder="MyWallet/*"
            onChange={(e) => setAgents(e.target.value)}
          />
        </Field>
        <FormError
          error={error}
          fields={["methods", "requestsPerSecond", "computeUnitsPerSecond", "requestsPerDay", "userAgents"]}
        />
        <div className="row">
          <button type="submit" disabled={busy}>
            {busy ? "Saving…" : "Save access rules"}
          </button>
          {saved && !error && (
            <span className="muted" role="status">
              Saved
            </span>
          )}
        </div>
      </form>
    </div>
  );
}

/**
 * The app's JWT public keys (at most 3) and whether every request must carry a JWT signed by one of them,
 * with the audience / subject it must name (docs/jwt.md).
 */
export function JwtCard({
  app,
  role,
  onChanged,
}: {
  app: App;
  role: WorkspaceRole | null;
  onChanged: () => void;
}) {
  const r = app.accessRules;
  const edits = roleCan(role, "manageAccessRules");
  const [kid, setKid] = useState("");
  const [key, setKey] = useState("");
  const [keyError, setKeyError] = useState<unknown>(null);
  const [required, setRequired] = useState(r.jwtRequired);
  const [audience, setAudience] = useState(r.jwtAudience ?? "");
  const [subject, setSubject] = useState(r.jwtSubject ?? "");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    setRequired(r.jwtRequired);
    setAudience(r.jwtAudience ?? "");
    setSubject(r.jwtSubject ?? "");
  }, [r]);

  const addKey = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setKeyError(null);
    try {
      await gql("mutation($a: ID!, $i: JwtKeyInput!) { addJwtKey(appId: $a, input: $i) { id } }", {
        a: app.id,
        i: { kid: kid.trim(), key },
      });
      setKid("");
      setKey("");
      onChanged();
    } catch (err) {
      setKeyError(err);
    } finally {
      setBusy(false);
    }
  };
  const removeKey = async (id: string) => {
    setKeyError(null);
    try {
      await gql("mutation($a: ID!, $k: ID!) { removeJwtKey(appId: $a, keyId: $k) { id } }", {
        a: app.id,
        k: id,
      });
      onChanged();
    } catch (err) {
      setKeyError(err);
    }
  };
  const saveSettings = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await gql(
        "mutation($a: ID!, $i: AccessRulesInput!) { setAppAccessRules(appId: $a, input: $i) { jwtRequired } }",
        { a: app.id, i: { jwtRequired: required, jwtAudience: audience, jwtSubject: subject } },
      );
      onChanged();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="card" data-card="JWT">
      <h2>JWT</h2>
      <p className="muted" data-testid="jwt-status">
        {r.jwtRequired
          ? "Every request must carry Authorization: Bearer <jwt> (WebSocket: or ?jwt=) signed by one of these keys."
          : "JWTs are not required."}
        {r.jwtRequired && r.jwtAudience && ` Audience: ${r.jwtAudience}.`}
        {r.jwtRequired && r.jwtSubject && ` Subject: ${r.jwtSubject}.`}
      </p>
      {app.jwtKeys.length > 0 ? (
        <ul className="allowlist jwt-keys">
          {app.jwtKeys.map((k) => (
            <li key={k.id} data-kid={k.kid}>
              <span className="badge">{k.algorithm}</span> <code>{k.kid}</code>
              <span className="muted mono" title="RFC 7638 thumbprint">
                {k.thumbprint.slice(0, 16)}…
              </span>
              <span className="muted">{fmtDate(k.createdAt)}</span>
              {edits && (
                <button type="button" className="small secondary" onClick={() => removeKey(k.id)}>
                  Remove
                </button>
              )}
            </li>
          ))}
        </ul>
      ) : (
        <p className="muted">No public keys registered.</p>
      )}
      {edits && (
        <>
          <form onSubmit={addKey} aria-label="Add JWT key">
            <div className="row wrap">
              <Field className="grow" label="Key id (kid)">
                <input
                  name="kid"
                  value={kid}
                  placeholder="main-2025"
                  onChange={(e) => setKid(e.target.value)}
                />
              </Field>
            </div>
            <Field label="Public key (PEM or JWK; RS256 or ES256)">
              <textarea
                name="key"
                rows={4}
                value={key}
                placeholder="-----BEGIN PUBLIC KEY-----"
                onChange={(e) => setKey(e.target.value)}
              />
            </Field>
            <FieldError error={keyError} field="kid" />
            <FieldError error={keyError} field="key" />
            <FieldError error={keyError} field="algorithm" />
            <FormError error={keyError} fields={["kid", "key", "algorithm"]} />
            <button type="submit" disabled={busy || kid.trim() === "" || key.trim() === ""}>
              Add key
            </button>
          </form>
          <form onSubmit={saveSettings} aria-label="JWT settings">
            <label className="check">
              <input
                name="jwtRequired"
                type="checkbox"
                checked={required}
                onChange={(e) => setRequired(e.target.checked)}
              />
              Require a JWT on every request
            </label>
            <div className="row wrap">
              <Field className="grow" label="Audience (aud; empty: not checked)">
                <input name="jwtAudience" value={audience} onChange={(e) => setAudience(e.target.value)} />
              </Field>
              <Field className="grow" label="Subject (sub; empty: not checked)">
                <input name="jwtSubject" value={subject} onChange={(e) => setSubject(e.target.value)} />
              </Field>
            </div>
            <FieldError error={error} field="jwtRequired" />
            <FieldError error={error} field="jwtAudience" />
            <FieldError error={error} field="jwtSubject" />
            <FormError error={error} fields={["jwtRequired", "jwtAudience", "jwtSubject"]} />
            <button type="submit" disabled={busy}>
              Save JWT settings
            </button>
          </form>
        </>
      )}
    </div>
  );
}
