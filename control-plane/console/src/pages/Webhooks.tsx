import { type FormEvent, useState } from "react";
import { gql, roleCan } from "../api";
import { Link, useRoute } from "../router";
import {
  Async,
  ConfirmDialog,
  CopyButton,
  ErrorBox,
  Field,
  FieldError,
  FormError,
  fmtDate,
  useQuery,
} from "../ui";
import { useWorkspace } from "../workspace";

type EventType = "QUOTA_THRESHOLD" | "NODE_STATUS" | "VALIDATOR_STATUS" | "KEY_REGENERATED" | "USAGE_DAILY";
type DeliveryStatus = "PENDING" | "SUCCEEDED" | "FAILED";

const EVENT_TYPES: { value: EventType; wire: string; help: string }[] = [
  {
    value: "QUOTA_THRESHOLD",
    wire: "quota.threshold",
    help: "today's usage reached 80% or 100% of the daily limit",
  },
  {
    value: "NODE_STATUS",
    wire: "node.status",
    help: "a dedicated node left SYNCED, entered ERROR or is SYNCED again",
  },
  { value: "VALIDATOR_STATUS", wire: "validator.status", help: "a validator node's status changed" },
  {
    value: "KEY_REGENERATED",
    wire: "key.regenerated",
    help: "an app's or a dedicated node's API key was replaced",
  },
  { value: "USAGE_DAILY", wire: "usage.daily", help: "yesterday's usage totals, once a day (billing)" },
];
const wire = (t: EventType) => EVENT_TYPES.find((e) => e.value === t)?.wire ?? t;

interface Endpoint {
  id: string;
  workspaceId: string;
  url: string;
  description: string | null;
  eventTypes: EventType[];
  enabled: boolean;
  secretCreatedAt: string;
  createdAt: string;
}

interface Attempt {
  attempt: number;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  responseExcerpt: string | null;
  at: string;
}

interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  payload: string;
  status: DeliveryStatus;
  attemptCount: number;
  nextAttemptAt: string | null;
  createdAt: string;
  attempts: Attempt[];
}

const ENDPOINT_FIELDS = "id workspaceId url description eventTypes enabled secretCreatedAt createdAt";
const FORM_FIELDS = ["url", "eventTypes", "description"];

/** The signing secret, shown once (after creating the endpoint or rotating its secret). */
function SecretCard({ secret, onDone }: { secret: string; onDone: () => void }) {
  return (
    <div className="card secret" data-card="Signing secret" role="status">
      <h2>Signing secret</h2>
      <p>
        Copy it now: it is <strong>not shown again</strong>. Use it to check the{" "}
        <code>webhook-signature</code> header of every delivery.
      </p>
      <div className="row wrap">
        <code className="key" data-testid="webhook-secret">
          {secret}
        </code>
        <CopyButton text={secret} label="Copy secret" />
        <button type="button" className="small secondary" onClick={onDone}>
          I have stored it
        </button>
      </div>
    </div>
  );
}

function EventChoice({ value, onChange }: { value: EventType[]; onChange: (v: EventType[]) => void }) {
  return (
    <fieldset>
      <legend>Events</legend>
      {EVENT_TYPES.map((e) => (
        <label key={e.value} className="check">
          <input
            type="checkbox"
            name="eventTypes"
            value={e.value}
            checked={value.includes(e.value)}
            onChange={(ev) =>
              onChange(ev.target.checked ? [...value, e.value] : value.filter((v) => v !== e.value))
            }
          />
          <span>
            <code>{e.wire}</code> <span className="muted">— {e.help}</span>
          </span>
        </label>
      ))}
    </fieldset>
  );
}

export function WebhooksPage() {
  const ws = useWorkspace().current!;
  const canManage = roleCan(ws.myRole, "manageWebhooks");
  const q = useQuery(
    () =>
      gql<{ webhookEndpoints: Endpoint[] }>(
        `query($w: ID) { webhookEndpoints(workspaceId: $w) { ${ENDPOINT_FIELDS} } }`,
        { w: ws.id },
      ),
    [ws.id],
  );
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<{ id: string; secret: string } | null>(null);
  return (
    <section>
      <div className="row between">
        <h1>Webhooks</h1>
        {canManage && (
          <button type="button" onClick={() => setCreating(true)}>
            Add endpoint
          </button>
        )}
      </div>
      <p className="muted">
        Alerts are POSTed as JSON to your endpoints, signed in the Standard Webhooks format (
        <code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>), and retried
        with exponential backoff until your endpoint answers 2xx.
      </p>
      {created && (
        <>
          <SecretCard secret={created.secret} onDone={() => setCreated(null)} />
          <p>
            <Link to={`/webhooks/${created.id}`}>Open the endpoint</Link> to send a test event.
          </p>
        </>
      )}
      {creating && (
        <CreateEndpoint
          workspaceId={ws.id}
          onCancel={() => setCreating(false)}
          onCreated={(id, secret) => {
            setCreating(false);
            setCreated({ id, secret });
            q.reload();
          }}
        />
      )}
      <Async q={q}>
        {({ webhookEndpoints }) =>
          webhookEndpoints.length === 0 ? (
            <div className="card empty">
              No endpoints yet{canManage ? ": add one to receive alerts." : "."}
            </div>
          ) : (
            <div className="table-wrap">
              <table className="webhooks">
                <thead>
                  <tr>
                    <th>URL</th>
                    <th>Events</th>
                    <th>State</th>
                  </tr>
                </thead>
                <tbody>
                  {webhookEndpoints.map((e) => (
                    <tr key={e.id}>
                      <td>
                        <Link to={`/webhooks/${e.id}`}>{e.description ?? e.url}</Link>
                        {e.description && <div className="muted mono">{e.url}</div>}
                      </td>
                      <td>{e.eventTypes.map(wire).join(", ")}</td>
                      <td>
                        <span className={`badge ${e.enabled ? "status-synced" : ""}`}>
                          {e.enabled ? "enabled" : "disabled"}
                        </span>
                      </td>
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

function CreateEndpoint({
  workspaceId,
  onCancel,
  onCreated,
}: {
  workspaceId: string;
  onCancel: () => void;
  onCreated: (id: string, secret: string) => void;
}) {
  const [url, setUrl] = useState("");
  const [description, setDescription] = useState("");
  const [eventTypes, setEventTypes] = useState<EventType[]>(EVENT_TYPES.map((e) => e.value));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const d = await gql<{ createWebhookEndpoint: { secret: string; endpoint: { id: string } } }>(
        "mutation($i: CreateWebhookEndpointInput!, $w: ID) { createWebhookEndpoint(input: $i, workspaceId: $w) { secret endpoint { id } } }",
        { i: { url: url.trim(), eventTypes, description: description.trim() || null }, w: workspaceId },
      );
      onCreated(d.createWebhookEndpoint.endpoint.id, d.createWebhookEndpoint.secret);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return (
    <form className="card" onSubmit={submit} aria-label="Add webhook endpoint">
      <h2>Add endpoint</h2>
      <Field label="URL" error={error} field="url">
        <input
          name="url"
          value={url}
          placeholder="https://example.com/webhooks/rpc"
          onChange={(e) => setUrl(e.target.value)}
        />
      </Field>
      <Field label="Description (optional)" error={error} field="description">
        <input name="description" value={description} onChange={(e) => setDescription(e.target.value)} />
      </Field>
      <EventChoice value={eventTypes} onChange={setEventTypes} />
      <FieldError error={error} field="eventTypes" />
      <FormError error={error} fields={FORM_FIELDS} />
      <div className="row">
        <button type="submit" disabled={busy}>
          {busy ? "Adding…" : "Add"}
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function WebhookPage({ id }: { id: string }) {
  const { navigate } = useRoute();
  const { roleIn } = useWorkspace();
  const q = useQuery(
    () =>
      gql<{ webhookEndpoint: Endpoint }>(
        `query($id: ID!) { webhookEndpoint(id: $id) { ${ENDPOINT_FIELDS} } }`,
        {
          id,
        },
      ),
    [id],
  );
  const [secret, setSecret] = useState<string | null>(null);
  const [confirm, setConfirm] = useState<"rotate" | "delete" | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [editing, setEditing] = useState(false);
  const [deliveriesKey, setDeliveriesKey] = useState(0);

  const act = async (fn: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const rotate = () =>
    act(async () => {
      const d = await gql<{ rotateWebhookSecret: { secret: string } }>(
        "mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret } }",
        { id },
      );
      setConfirm(null);
      setSecret(d.rotateWebhookSecret.secret);
      q.reload();
    });
  const remove = () =>
    act(async () => {
      await gql("mutation($id: ID!) { deleteWebhookEndpoint(id: $id) }", { id });
      navigate("/webhooks");
    });
  const sendTest = () =>
    act(async () => {
      await gql("mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }", { id });
      setDeliveriesKey((k) => k + 1);
    });
  const setEnabled = (enabled: boolean) =>
    act(async () => {
      await gql(
        "mutation($id: ID!, $e: Boolean!) { updateWebhookEndpoint(id: $id, input: { enabled: $e }) { id } }",
        {
          id,
          e: enabled,
        },
      );
      q.reload();
    });

  return (
    <section>
      <p className="crumbs">
        <Link to="/webhooks">Webhooks</Link> /
      </p>
      <Async q={q}>
        {({ webhookEndpoint: e }) => {
          const canManage = roleCan(roleIn(e.workspaceId), "manageWebhooks");
          return (
            <>
              <div className="row between">
                <h1>{e.description ?? e.url}</h1>
                <span className={`badge ${e.enabled ? "status-synced" : ""}`}>
                  {e.enabled ? "enabled" : "disabled"}
                </span>
              </div>
              {secret && <SecretCard secret={secret} onDone={() => setSecret(null)} />}
              <div className="card" data-card="Endpoint">
                <h2>Endpoint</h2>
                <div className="label">URL</div>
                <code className="url" data-testid="webhook-url">
                  {e.url}
                </code>
                <div className="label">Events</div>
                <p>{e.eventTypes.map(wire).join(", ")}</p>
                <p className="muted">
                  Created {fmtDate(e.createdAt)} · signing secret from {fmtDate(e.secretCreatedAt)}
                </p>
                <label className="check">
                  <input
                    type="checkbox"
                    name="enabled"
                    checked={e.enabled}
                    disabled={busy || !canManage}
                    onChange={(ev) => setEnabled(ev.target.checked)}
                  />
                  Enabled (a disabled endpoint receives no events; test events still go out)
                </label>
                {canManage && (
                  <div className="row wrap">
                    <button type="button" onClick={sendTest} disabled={busy}>
                      Send test event
                    </button>
                    <button type="button" className="secondary" onClick={() => setEditing((x) => !x)}>
                      {editing ? "Close editor" : "Edit"}
                    </button>
                    <button type="button" className="secondary" onClick={() => setConfirm("rotate")}>
                      Rotate secret
                    </button>
                    <button type="button" className="danger" onClick={() => setConfirm("delete")}>
                      Delete
                    </button>
                  </div>
                )}
                <ErrorBox error={confirm ? null : error} />
              </div>
              {editing && (
                <EditEndpoint
                  endpoint={e}
                  onSaved={() => {
                    setEditing(false);
                    q.reload();
                  }}
                />
              )}
              {confirm === "rotate" && (
                <ConfirmDialog
                  title="Rotate the signing secret?"
                  confirmLabel="Rotate"
                  busy={busy}
                  onCancel={() => setConfirm(null)}
                  onConfirm={rotate}
                >
                  <p>Deliveries are signed with the new secret from now on; the current one stops at once.</p>
                  <FormError error={error} fields={[]} />
                </ConfirmDialog>
              )}
              {confirm === "delete" && (
                <ConfirmDialog
                  title="Delete this endpoint?"
                  confirmLabel="Delete"
                  busy={busy}
                  onCancel={() => setConfirm(null)}
                  onConfirm={remove}
                >
                  <p>Its delivery history is deleted too.</p>
                  <FormError error={error} fields={[]} />
                </ConfirmDialog>
              )}
              <Deliveries endpointId={id} refreshKey={deliveriesKey} />
            </>
          );
        }}
      </Async>
    </section>
  );
}

function EditEndpoint({ endpoint, onSaved }: { endpoint: Endpoint; onSaved: () => void }) {
  const [url, setUrl] = useState(endpoint.url);
  const [description, setDescription] = useState(endpoint.description ?? "");
  const [eventTypes, setEventTypes] = useState<EventType[]>(endpoint.eventTypes);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await gql(
        "mutation($id: ID!, $i: UpdateWebhookEndpointInput!) { updateWebhookEndpoint(id: $id, input: $i) { id } }",
        { id: endpoint.id, i: { url: url.trim(), eventTypes, description: description.trim() } },
      );
      onSaved();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card" onSubmit={submit} aria-label="Edit webhook endpoint">
      <h2>Edit endpoint</h2>
      <Field label="URL" error={error} field="url">
        <input name="url" value={url} onChange={(e) => setUrl(e.target.value)} />
      </Field>
      <Field label="Description" error={error} field="description">
        <input name="description" value={description} onChange={(e) => setDescription(e.target.value)} />
      </Field>
      <EventChoice value={eventTypes} onChange={setEventTypes} />
      <FieldError error={error} field="eventTypes" />
      <FormError error={error} fields={FORM_FIELDS} />
      <button type="submit" disabled={busy}>
        {busy ? "Saving…" : "Save"}
      </button>
    </form>
  );
}

function attemptResult(a: Attempt): string {
  return a.statusCode !== null ? `HTTP ${a.statusCode}` : (a.error ?? "no answer");
}

function Deliveries({ endpointId, refreshKey }: { endpointId: string; refreshKey: number }) {
  const q = useQuery(
    () =>
      gql<{ webhookDeliveries: Delivery[] }>(
        `query($e: ID!) { webhookDeliveries(endpointId: $e, first: 50) {
          id eventId eventType payload status attemptCount nextAttemptAt createdAt
          attempts { attempt statusCode error durationMs responseExcerpt at } } }`,
        { e: endpointId },
      ),
    [endpointId, refreshKey],
    2000,
  );
  const [open, setOpen] = useState<string | null>(null);
  return (
    <div className="card" data-card="Deliveries">
      <h2>Deliveries</h2>
      <Async q={q}>
        {({ webhookDeliveries }) =>
          webhookDeliveries.length === 0 ? (
            <p className="muted">No deliveries yet. Send a test event to try the endpoint.</p>
          ) : (
            <div className="table-wrap">
              <table className="deliveries">
                <thead>
                  <tr>
                    <th>Time</th>
                    <th>Event</th>
                    <th>Status</th>
                    <th>Last attempt</th>
                    <th />
                  </tr>
                </thead>
                <tbody>
                  {webhookDeliveries.map((d) => {
                    const last = d.attempts.at(-1);
                    return [
                      <tr key={d.id} data-testid="webhook-delivery" data-status={d.status}>
                        <td>{fmtDate(d.createdAt)}</td>
                        <td>
                          <code>{d.eventType}</code>
                        </td>
                        <td>
                          <span
                            className={`badge ${d.status === "SUCCEEDED" ? "status-synced" : d.status === "FAILED" ? "status-error" : "status-pending"}`}
                          >
                            {d.status}
                          </span>
                          {d.status === "PENDING" && d.nextAttemptAt && (
                            <div className="muted">retry at {fmtDate(d.nextAttemptAt)}</div>
                          )}
                        </td>
                        <td>{last ? `${attemptResult(last)} · ${d.attemptCount} attempt(s)` : "–"}</td>
                        <td>
                          <button
                            type="button"
                            className="small secondary"
                            aria-expanded={open === d.id}
                            onClick={() => setOpen((o) => (o === d.id ? null : d.id))}
                          >
                            {open === d.id ? "Hide" : "Attempts"}
                          </button>
                        </td>
                      </tr>,
                      open === d.id && (
                        <tr key={`${d.id}-detail`}>
                          <td colSpan={5}>
                            <div className="muted mono">webhook-id {d.eventId}</div>
                            <ul className="events attempts">
                              {d.attempts.map((a) => (
                                <li key={a.attempt} data-testid="webhook-attempt">
                                  #{a.attempt} · {fmtDate(a.at)} · <strong>{attemptResult(a)}</strong> ·{" "}
                                  {a.durationMs} ms
                                  {a.statusCode !== null && a.error && a.error !== `HTTP ${a.statusCode}` && (
                                    <span className="muted"> · {a.error}</span>
                                  )}
                                  {a.responseExcerpt && <pre className="cmd">{a.responseExcerpt}</pre>}
                                </li>
                              ))}
                            </ul>
                            <div className="label">Payload</div>
                            <pre className="cmd">{JSON.stringify(JSON.parse(d.payload), null, 2)}</pre>
                          </td>
                        </tr>
                      ),
                    ];
                  })}
                </tbody>
              </table>
            </div>
          )
        }
      </Async>
    </div>
  );
}
