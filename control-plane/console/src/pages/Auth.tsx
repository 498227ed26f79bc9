import { type FormEvent, useState } from "react";
import { gql } from "../api";
import { Link } from "../router";
import { FieldError, FormError } from "../ui";

const FIELDS = ["email", "password", "workspaceName"];

export function AuthPage({
  mode,
  onSignedIn,
}: {
  mode: "login" | "signup";
  onSignedIn: (token: string) => void;
}) {
  const [email, setEmail] = useState("");
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
        const d = await gql<{ signUp: { token: string } }>(
          "mutation($i: SignUpInput!) { signUp(input: $i) { token } }",
          { i: { email, password, workspaceName: workspaceName || email.split("@")[0] } },
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

  return (
    <form className="card auth" onSubmit={submit} noValidate>
      <h1>{mode === "signup" ? "Create your account" : "Log in"}</h1>
      <label>
        Email
        <input
          name="email"
          type="email"
          autoComplete="email"
          value={email}
          onChange={(e) => setEmail(e.target.value)}
          required
        />
      </label>
      <FieldError error={error} field="email" />
      <label>
        Password
        <input
          name="password"
          type="password"
          autoComplete={mode === "signup" ? "new-password" : "current-password"}
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          required
        />
      </label>
      <FieldError error={error} field="password" />
      {mode === "signup" && (
        <>
          <label>
            Workspace name
            <input
              name="workspaceName"
              value={workspaceName}
              placeholder="Acme"
              onChange={(e) => setWorkspaceName(e.target.value)}
            />
          </label>
          <FieldError error={error} field="workspaceName" />
        </>
      )}
      <FormError error={error} fields={FIELDS} />
      <button type="submit" disabled={busy}>
        {busy ? "Please wait…" : mode === "signup" ? "Sign up" : "Log in"}
      </button>
      <p className="muted">
        {mode === "signup" ? (
          <>
            Already have an account? <Link to="/login">Log in</Link>
          </>
        ) : (
          <>
            New here? <Link to="/signup">Create an account</Link>
          </>
        )}
      </p>
    </form>
  );
}
