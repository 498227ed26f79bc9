import { useEffect, useState } from "react";
import { gql, type WorkspaceRole } from "../api";
import { Link } from "../router";
import { Async, ErrorBox, fmtDate, useQuery } from "../ui";
import { AuthPage } from "./Auth";

interface Preview {
  workspaceName: string;
  email: string;
  role: WorkspaceRole;
  expiresAt: string;
  status: "PENDING" | "ACCEPTED" | "REVOKED" | "EXPIRED";
}

const CLOSED: Record<Exclude<Preview["status"], "PENDING">, string> = {
  ACCEPTED: "This invitation was already used.",
  REVOKED: "This invitation was revoked.",
  EXPIRED: "This invitation has expired.",
};

function tokenInHash(): string {
  try {
    return decodeURIComponent(window.location.hash.replace(/^#/, ""));
  } catch {
    return "";
  }
}

/**
 * The invitation link, `/console/invite#TOKEN` (the token stays in the fragment, which the browser never
 * sends to a server). Logged in: accept it. Logged out: sign up with the invited email (the account joins
 * the workspace as it is created) or log in, then accept.
 */
export function InvitePage({
  signedIn,
  onSession,
  onJoined,
  onLogOut,
}: {
  signedIn: boolean;
  /** A session began here: after a sign-up (which joined already) go to the console, after a log-in stay. */
  onSession: (token: string, next: "console" | "stay") => void;
  /** Accepted: open the console on the joined workspace. */
  onJoined: (workspaceId: string) => void;
  onLogOut: () => void;
}) {
  const [token, setTokenFromHash] = useState(tokenInHash);
  // Another link pasted into the same tab changes only the fragment: no page load, so listen for it.
  useEffect(() => {
    const onHash = () => setTokenFromHash(tokenInHash());
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);
  const [mode, setMode] = useState<"signup" | "login">("signup");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const q = useQuery(async () => {
    const [inv, me] = await Promise.all([
      gql<{ invitation: Preview }>(
        "query($t: String!) { invitation(token: $t) { workspaceName email role expiresAt status } }",
        { t: token },
      ),
      signedIn ? gql<{ me: { email: string } }>("{ me { email } }") : Promise.resolve(null),
    ]);
    return { invitation: inv.invitation, me: me?.me.email ?? null };
  }, [token, signedIn]);

  const accept = async () => {
    setBusy(true);
    setError(null);
    try {
      const d = await gql<{ acceptInvitation: { id: string } }>(
        "mutation($t: String!) { acceptInvitation(token: $t) { id } }",
        { t: token },
      );
      onJoined(d.acceptInvitation.id);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  if (!token) {
    return (
      <div className="card auth">
        <h1>Invitation</h1>
        <div className="error" role="alert">
          This link has no invitation token: copy the whole link you were sent.
        </div>
      </div>
    );
  }
  return (
    <Async q={q}>
      {({ invitation: inv, me }) => (
        <div className="invite">
          <div className="card auth" data-testid="invitation">
            <h1>Join {inv.workspaceName}</h1>
            <p>
              You are invited as <span className="badge">{inv.role}</span> for <strong>{inv.email}</strong>.
            </p>
            {inv.status === "PENDING" ? (
              <p className="muted">The link works until {fmtDate(inv.expiresAt)}.</p>
            ) : (
              <div className="error" role="alert" data-testid="invitation-closed">
                {CLOSED[inv.status]} Ask for a new one.
              </div>
            )}
            {inv.status === "PENDING" && me !== null && (
              <>
                {me !== inv.email && (
                  <p className="error" role="alert">
                    You are logged in as {me}; this invitation is for {inv.email}.
                  </p>
                )}
                <ErrorBox error={error} />
                <div className="row wrap">
                  {me === inv.email && (
                    <button type="button" onClick={accept} disabled={busy}>
                      {busy ? "Joining…" : `Accept and join ${inv.workspaceName}`}
                    </button>
                  )}
                  <button type="button" className="secondary" onClick={onLogOut}>
                    {me === inv.email ? "Not you? Log out" : "Log out to continue"}
                  </button>
                </div>
              </>
            )}
            {me !== null && (
              <p className="muted">
                <Link to="/">Back to the console</Link>
              </p>
            )}
          </div>
          {inv.status === "PENDING" && me === null && (
            <AuthPage
              key={mode}
              mode={mode}
              invitation={{ token, email: inv.email }}
              onSwitch={() => setMode((m) => (m === "signup" ? "login" : "signup"))}
              onSignedIn={(t) => onSession(t, mode === "signup" ? "console" : "stay")}
            />
          )}
        </div>
      )}
    </Async>
  );
}
