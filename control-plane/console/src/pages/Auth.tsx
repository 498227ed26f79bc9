import { type FormEvent, useState } from "react";
import { gql } from "../api";
import { Link } from "../router";
import { Field, FieldError, FormError } from "../ui";

const FIELDS = ["email", "password", "workspaceName", "token"];

/**
 * Log in or sign up. With `invitation` (the accept page) the email is the invited one, sign-up joins that
 * workspace instead of creating one, and the log-in / sign-up switch stays on the page (`onSwitch`).
 */
export function AuthPage({
  mode,
  onSignedIn,
  invitation,
  onSwitch,
}: {
  mode: "login" | "signup";
  onSignedIn: (token: string) => void;
  invitation?: { token: string; email: string };
  onSwitch?: () => void;
}) {
  const [email, setEmail] = useState(invitation?.email ?? "");
  const [password, setPassword] = useState("");
  const [workspaceName, setWorkspaceName] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (mode === "signup") {
        const input = invitation
          ? { email, password, invitationToken: invitation.token }
          : { email, password, workspaceName: workspaceName || email.split("@")[0] };
        const d = await gql<{ signUp: { token: string } }>(
          "mutation($i: SignUpInput!) { signUp(input: $i) { token } }",
          { i: input },
        );
        onSignedIn(d.signUp.token);
      } else {
        const d = await gql<{ logIn: { token: string } }>(
          "mutation($e: String!, $p: String!) { logIn(email: $e, password: $p) { token } }",
          { e: email, p: password },
        );
        onSignedIn(d.logIn.token);
      }
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  const title = invitation
    ? mode === "signup"
      ? "Create your account to join"
      : "Log in to accept"
    : mode === "signup"
      ? "Create your account"
      : "Log in";
  return (
    <form className="card auth" onSubmit={submit} noValidate aria-label={title}>
      <h1>{title}</h1>
      <Field label="Email" error={error} field="email">
        <input
          name="email"
          type="email"
          autoComplete="email"
          value={email}
          readOnly={invitation !== undefined && mode === "signup"}
          onChange={(e) => setEmail(e.target.value)}
          required
        />
      </Field>
      <Field label="Password" error={error} field="password">
        <input
          name="password"
          type="password"
          autoComplete={mode === "signup" ? "new-password" : "current-password"}
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          required
        />
      </Field>
      {mode === "signup" && !invitation && (
        <Field label="Workspace name" error={error} field="workspaceName">
          <input
            name="workspaceName"
            value={workspaceName}
            placeholder="Acme"
            onChange={(e) => setWorkspaceName(e.target.value)}
          />
        </Field>
      )}
      <FieldError error={error} field="token" />
      <FormError error={error} fields={FIELDS} />
      <button type="submit" disabled={busy}>
        {busy ? "Please wait…" : mode === "signup" ? "Sign up" : "Log in"}
      </button>
      <p className="muted">
        {mode === "signup" ? "Already have an account? " : "New here? "}
        {onSwitch ? (
          <button type="button" className="link" onClick={onSwitch}>
            {mode === "signup" ? "Log in" : "Create an account"}
          </button>
        ) : mode === "signup" ? (
          <Link to="/login">Log in</Link>
        ) : (
          <Link to="/signup">Create an account</Link>
        )}
      </p>
    </form>
  );
}
