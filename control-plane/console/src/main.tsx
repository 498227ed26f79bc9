import { type FormEvent, type ReactElement, StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { getToken, gql, onUnauthenticated, setToken, setWorkspaceId } from "./api";
import { AppPage } from "./pages/AppPage";
import { AppsPage } from "./pages/Apps";
import { AuthPage } from "./pages/Auth";
import { BillingPage } from "./pages/Billing";
import { InvitePage } from "./pages/Invite";
import { MembersPage } from "./pages/Members";
import { NodeDeployPage, NodePage, NodesPage } from "./pages/Nodes";
import { OperatorComputeUnitsPage } from "./pages/OperatorComputeUnits";
import { OperatorNetworksPage } from "./pages/OperatorNetworks";
import { OperatorPlansPage } from "./pages/OperatorPlans";
import { OperatorUsagePage } from "./pages/OperatorUsage";
import { OperatorWorkspacesPage } from "./pages/OperatorWorkspaces";
import { PlanPage } from "./pages/Plan";
import { RequestLogPage } from "./pages/RequestLog";
import { UsagePage } from "./pages/Usage";
import { WebhookPage, WebhooksPage } from "./pages/Webhooks";
import { Link, match, RouterProvider, useRoute } from "./router";
import { ErrorBox, FieldError, FormError, Loading, useQuery } from "./ui";
import { useWorkspace, WorkspaceProvider } from "./workspace";
import "./styles.css";

/**
 * Revokes the session on the server first, then forgets it here whatever the answer (an expired or already
 * revoked token answers an error, and the user still wants out); a server that does not answer within 3 s
 * does not keep the user in either.
 */
function revokeSession(): Promise<unknown> {
  const revoke = gql<{ logOut: boolean }>("mutation { logOut }").catch(() => undefined);
  return Promise.race([revoke, new Promise((r) => setTimeout(r, 3_000))]);
}

function Shell() {
  const { path, navigate } = useRoute();
  const [token, setTok] = useState(getToken);

  useEffect(
    () =>
      onUnauthenticated(() => {
        setToken(null);
        setTok(null);
        navigate("/login");
      }),
    [navigate],
  );

  const remember = (t: string | null) => {
    setToken(t);
    setTok(t);
  };
  const signedIn = (t: string) => {
    // A new session starts in the account's default workspace, not the previous user's choice.
    setWorkspaceId(null);
    remember(t);
    navigate("/");
  };

  // The invitation link works logged in (accept) and logged out (sign up or log in first).
  if (path === "/invite") {
    return (
      <main className="auth-shell">
        <InvitePage
          signedIn={token !== null}
          onSession={(t, next) => {
            if (next === "console") signedIn(t);
            else remember(t);
          }}
          onJoined={(workspaceId) => {
            setWorkspaceId(workspaceId);
            navigate("/");
          }}
          onLogOut={() => void revokeSession().finally(() => remember(null))}
        />
      </main>
    );
  }

  if (!token || path === "/login" || path === "/signup") {
    return (
      <main className="auth-shell">
        <AuthPage mode={path === "/signup" ? "signup" : "login"} onSignedIn={signedIn} />
      </main>
    );
  }

  const logOut = () => {
    void revokeSession().finally(() => {
      remember(null);
      navigate("/login");
    });
  };

  return (
    <WorkspaceProvider
      key={token}
      fallback={(error, retry) => (
        <main className="auth-shell">{error ? <ErrorBox error={error} retry={retry} /> : <Loading />}</main>
      )}
    >
      <SignedIn logOut={logOut} />
    </WorkspaceProvider>
  );
}

function SignedIn({ logOut }: { logOut: () => void }) {
  const { path, navigate } = useRoute();
  const ws = useWorkspace();
  const [menuOpen, setMenuOpen] = useState(false);
  // biome-ignore lint/correctness/useExhaustiveDependencies: close the phone menu on every route change
  useEffect(() => setMenuOpen(false), [path]);

  // Operator pages are listed only for operator accounts; the server refuses their queries to anyone else.
  const me = useQuery(() => gql<{ me: { isOperator: boolean } }>("{ me { isOperator } }"), []);
  const operator = me.data?.me.isOperator === true;

  const appMatch = match("/apps/:id", path);
  const nodeMatch = match("/nodes/:id", path);
  const webhookMatch = match("/webhooks/:id", path);
  let page: ReactElement;
  if (operator && path === "/operator/networks") page = <OperatorNetworksPage />;
  else if (operator && path === "/operator/plans") page = <OperatorPlansPage />;
  else if (operator && path === "/operator/compute-units") page = <OperatorComputeUnitsPage />;
  else if (operator && path === "/operator/workspaces") page = <OperatorWorkspacesPage />;
  else if (operator && path === "/operator/usage") page = <OperatorUsagePage />;
  else if (!ws.current) page = <NoWorkspace />;
  else if (path === "/" || path === "/apps") page = <AppsPage />;
  else if (appMatch) page = <AppPage id={appMatch.id!} />;
  else if (path === "/usage") page = <UsagePage />;
  else if (path === "/request-log") page = <RequestLogPage />;
  else if (path === "/plan") page = <PlanPage />;
  else if (path === "/billing") page = <BillingPage />;
  else if (path === "/members") page = <MembersPage />;
  else if (path === "/nodes") page = <NodesPage />;
  else if (path === "/nodes/new") page = <NodeDeployPage />;
  else if (nodeMatch) page = <NodePage id={nodeMatch.id!} />;
  else if (path === "/webhooks") page = <WebhooksPage />;
  else if (webhookMatch) page = <WebhookPage id={webhookMatch.id!} />;
  else
    page = (
      <div className="card">
        <h2>Not found</h2>
        <Link to="/">Back to apps</Link>
      </div>
    );

  return (
    <div className="shell">
      <header className="topbar">
        <Link to="/" className="brand">
          RPC gateway
        </Link>
        {ws.workspaces.length > 0 && (
          <select
            className="workspace-switcher"
            aria-label="Workspace"
            value={ws.current?.id ?? ""}
            onChange={(e) => {
              ws.switchTo(e.target.value);
              navigate("/");
            }}
          >
            {ws.workspaces.map((w) => (
              <option key={w.id} value={w.id}>
                {w.name} ({w.myRole?.toLowerCase()})
              </option>
            ))}
          </select>
        )}
        <button
          type="button"
          className="menu-toggle"
          aria-label="Menu"
          aria-expanded={menuOpen}
          onClick={() => setMenuOpen((o) => !o)}
        >
          ☰
        </button>
        <nav className={menuOpen ? "open" : undefined}>
          <Link to="/">Apps</Link>
          <Link to="/usage">Usage</Link>
          <Link to="/request-log">Request log</Link>
          <Link to="/nodes">Dedicated nodes</Link>
          <Link to="/members">Members</Link>
          <Link to="/webhooks">Webhooks</Link>
          <Link to="/plan">Plan</Link>
          <Link to="/billing">Billing</Link>
          {operator && <Link to="/operator/networks">Operator</Link>}
          <button type="button" className="link" onClick={logOut}>
            Log out
          </button>
        </nav>
      </header>
      {/* Keyed by workspace: switching remounts the page, so nothing of the previous one lingers. */}
      <main className="content" key={ws.current?.id ?? "none"}>
        {page}
      </main>
    </div>
  );
}

/** An account that left (or was removed from) every workspace starts a new one. */
function NoWorkspace() {
  const ws = useWorkspace();
  return (
    <section>
      <h1>No workspace</h1>
      <div className="card empty">
        You are not a member of any workspace. Create one, or open an invitation link.
      </div>
      <CreateWorkspace onCreated={(id) => void ws.reload(id)} />
    </section>
  );
}

function CreateWorkspace({ onCreated }: { onCreated: (id: string) => void }) {
  const [name, setName] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const d = await gql<{ createWorkspace: { id: string } }>(
        "mutation($n: String!) { createWorkspace(name: $n) { id } }",
        { n: name },
      );
      onCreated(d.createWorkspace.id);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card" onSubmit={submit} aria-label="Create workspace">
      <h2>New workspace</h2>
      <label>
        Workspace name
        <input name="workspaceName" value={name} onChange={(e) => setName(e.target.value)} />
      </label>
      <FieldError error={error} field="workspaceName" />
      <FormError error={error} fields={["workspaceName"]} />
      <button type="submit" disabled={busy}>
        {busy ? "Creating…" : "Create workspace"}
      </button>
    </form>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <RouterProvider>
      <Shell />
    </RouterProvider>
  </StrictMode>,
);
