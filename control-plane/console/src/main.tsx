import { type ReactElement, StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { getToken, gql, onUnauthenticated, setToken } from "./api";
import { AppPage } from "./pages/AppPage";
import { AppsPage } from "./pages/Apps";
import { AuthPage } from "./pages/Auth";
import { NodeDeployPage, NodePage, NodesPage } from "./pages/Nodes";
import { PlanPage } from "./pages/Plan";
import { UsagePage } from "./pages/Usage";
import { WebhookPage, WebhooksPage } from "./pages/Webhooks";
import { Link, match, RouterProvider, useRoute } from "./router";
import "./styles.css";

function Shell() {
  const { path, navigate } = useRoute();
  const [token, setTok] = useState(getToken);
  const [menuOpen, setMenuOpen] = useState(false);

  useEffect(
    () =>
      onUnauthenticated(() => {
        setToken(null);
        setTok(null);
        navigate("/login");
      }),
    [navigate],
  );
  // biome-ignore lint/correctness/useExhaustiveDependencies: close the phone menu on every route change
  useEffect(() => setMenuOpen(false), [path]);

  const signedIn = (t: string) => {
    setToken(t);
    setTok(t);
    navigate("/");
  };

  if (!token || path === "/login" || path === "/signup") {
    return (
      <main className="auth-shell">
        <AuthPage mode={path === "/signup" ? "signup" : "login"} onSignedIn={signedIn} />
      </main>
    );
  }

  const logOut = () => {
    // Revokes the session on the server first, then forgets it here whatever the answer (an expired or
    // already revoked token answers an error, and the user still wants out); a server that does not answer
    // within 3 s does not keep the user in either.
    const revoke = gql<{ logOut: boolean }>("mutation { logOut }").catch(() => undefined);
    void Promise.race([revoke, new Promise((r) => setTimeout(r, 3_000))]).finally(() => {
      setToken(null);
      setTok(null);
      navigate("/login");
    });
  };

  const appMatch = match("/apps/:id", path);
  const nodeMatch = match("/nodes/:id", path);
  const webhookMatch = match("/webhooks/:id", path);
  let page: ReactElement;
  if (path === "/" || path === "/apps") page = <AppsPage />;
  else if (appMatch) page = <AppPage id={appMatch.id!} />;
  else if (path === "/usage") page = <UsagePage />;
  else if (path === "/plan") page = <PlanPage />;
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
          <Link to="/nodes">Dedicated nodes</Link>
          <Link to="/webhooks">Webhooks</Link>
          <Link to="/plan">Plan</Link>
          <button type="button" className="link" onClick={logOut}>
            Log out
          </button>
        </nav>
      </header>
      <main className="content">{page}</main>
    </div>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <RouterProvider>
      <Shell />
    </RouterProvider>
  </StrictMode>,
);
