import { type FormEvent, useState } from "react";
import { gql, outranks, roleCan, rolesBelow, type WorkspaceRole } from "../api";
import { useRoute } from "../router";
import { Async, ConfirmDialog, CopyButton, ErrorBox, FieldError, FormError, fmtDate, useQuery } from "../ui";
import { useWorkspace } from "../workspace";

interface Member {
  id: string;
  email: string;
  role: WorkspaceRole;
  joinedAt: string;
  isCaller: boolean;
}

interface Invitation {
  id: string;
  email: string;
  role: WorkspaceRole;
  createdAt: string;
  expiresAt: string;
  invitedByEmail: string | null;
}

type Pending =
  | { kind: "remove"; member: Member }
  | { kind: "transfer"; member: Member }
  | { kind: "leave"; member: Member }
  | { kind: "revoke"; invitation: Invitation };

/**
 * The workspace's members and pending invitations. Everyone sees the list; OWNERs and ADMINs invite,
 * revoke, change roles and remove members below their own role; the OWNER transfers ownership.
 */
export function MembersPage() {
  const ws = useWorkspace();
  const { navigate } = useRoute();
  const current = ws.current!;
  const role = current.myRole;
  const manages = roleCan(role, "manageMembers");
  const q = useQuery(async () => {
    const [m, i] = await Promise.all([
      gql<{ members: Member[] }>(
        "query($w: ID) { members(workspaceId: $w) { id email role joinedAt isCaller } }",
        { w: current.id },
      ),
      // Pending invitations are for the roles that manage members only.
      manages
        ? gql<{ invitations: Invitation[] }>(
            "query($w: ID) { invitations(workspaceId: $w) { id email role createdAt expiresAt invitedByEmail } }",
            { w: current.id },
          )
        : Promise.resolve(null),
    ]);
    return { members: m.members, invitations: i?.invitations ?? null };
  }, [current.id, manages]);
  const [pending, setPending] = useState<Pending | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const run = async (fn: () => Promise<unknown>, after?: () => void) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
      setPending(null);
      if (after) after();
      else q.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const changeRole = (m: Member, to: WorkspaceRole) =>
    run(() =>
      gql("mutation($m: ID!, $r: WorkspaceRole!) { changeMemberRole(memberId: $m, role: $r) { id } }", {
        m: m.id,
        r: to,
      }),
    );
  const confirm = () => {
    if (!pending) return;
    if (pending.kind === "revoke") {
      void run(() =>
        gql("mutation($id: ID!) { revokeInvitation(id: $id) { id } }", { id: pending.invitation.id }),
      );
    } else if (pending.kind === "transfer") {
      // The caller's own role changes (to ADMIN): the switcher and the buttons follow.
      void run(
        () => gql("mutation($m: ID!) { transferOwnership(memberId: $m) { id } }", { m: pending.member.id }),
        () => {
          q.reload();
          void ws.reload();
        },
      );
    } else if (pending.kind === "leave") {
      void run(
        () => gql("mutation($w: ID!) { leaveWorkspace(workspaceId: $w) }", { w: current.id }),
        () => {
          void ws.reload();
          navigate("/");
        },
      );
    } else {
      void run(() => gql("mutation($m: ID!) { removeMember(memberId: $m) }", { m: pending.member.id }));
    }
  };

  return (
    <section>
      <h1>Members</h1>
      {manages && <InviteForm workspaceId={current.id} role={role} onInvited={q.reload} />}
      <ErrorBox error={error} />
      <Async q={q}>
        {({ members, invitations }) => (
          <>
            <div className="card">
              <h2>Members of {current.name}</h2>
              <div className="table-wrap">
                <table className="members">
                  <thead>
                    <tr>
                      <th>Email</th>
                      <th>Role</th>
                      <th>Joined</th>
                      <th />
                    </tr>
                  </thead>
                  <tbody>
                    {members.map((m) => {
                      const editable = manages && !m.isCaller && outranks(role, m.role);
                      return (
                        <tr key={m.id} data-email={m.email}>
                          <td>
                            {m.email}
                            {m.isCaller && <span className="muted"> (you)</span>}
                          </td>
                          <td>
                            {editable ? (
                              <select
                                aria-label={`Role of ${m.email}`}
                                value={m.role}
                                disabled={busy}
                                onChange={(e) => void changeRole(m, e.target.value as WorkspaceRole)}
                              >
                                {rolesBelow(role).map((r) => (
                                  <option key={r} value={r}>
                                    {r}
                                  </option>
                                ))}
                              </select>
                            ) : (
                              <span className="badge" data-testid="member-role">
                                {m.role}
                              </span>
                            )}
                          </td>
                          <td>{fmtDate(m.joinedAt)}</td>
                          <td className="actions">
                            <div className="row">
                              {roleCan(role, "transferOwnership") && !m.isCaller && (
                                <button
                                  type="button"
                                  className="small secondary"
                                  onClick={() => setPending({ kind: "transfer", member: m })}
                                >
                                  Make owner
                                </button>
                              )}
                              {editable && (
                                <button
                                  type="button"
                                  className="small danger"
                                  onClick={() => setPending({ kind: "remove", member: m })}
                                >
                                  Remove
                                </button>
                              )}
                              {m.isCaller && m.role !== "OWNER" && (
                                <button
                                  type="button"
                                  className="small secondary"
                                  onClick={() => setPending({ kind: "leave", member: m })}
                                >
                                  Leave
                                </button>
                              )}
                            </div>
                          </td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </div>
              {role === "OWNER" && (
                <p className="muted">
                  A workspace has one owner. To leave it, make another member the owner first.
                </p>
              )}
            </div>
            {invitations && (
              <div className="card" data-card="Pending invitations">
                <h2>Pending invitations</h2>
                {invitations.length === 0 ? (
                  <p className="muted">None.</p>
                ) : (
                  <ul className="invitations">
                    {invitations.map((i) => (
                      <li key={i.id} data-email={i.email}>
                        <span className="badge">{i.role}</span> {i.email}{" "}
                        <span className="muted">
                          · expires {fmtDate(i.expiresAt)}
                          {i.invitedByEmail ? ` · by ${i.invitedByEmail}` : ""}
                        </span>
                        {outranks(role, i.role) && (
                          <button
                            type="button"
                            className="small secondary"
                            onClick={() => setPending({ kind: "revoke", invitation: i })}
                          >
                            Revoke
                          </button>
                        )}
                      </li>
                    ))}
                  </ul>
                )}
              </div>
            )}
          </>
        )}
      </Async>
      {pending && (
        <ConfirmDialog
          title={
            pending.kind === "revoke"
              ? `Revoke the invitation for ${pending.invitation.email}?`
              : pending.kind === "transfer"
                ? `Make ${pending.member.email} the owner?`
                : pending.kind === "leave"
                  ? `Leave ${current.name}?`
                  : `Remove ${pending.member.email}?`
          }
          confirmLabel={
            pending.kind === "revoke"
              ? "Revoke"
              : pending.kind === "transfer"
                ? "Transfer ownership"
                : pending.kind === "leave"
                  ? "Leave"
                  : "Remove"
          }
          busy={busy}
          onCancel={() => {
            setPending(null);
            setError(null);
          }}
          onConfirm={confirm}
        >
          <p>
            {pending.kind === "revoke"
              ? "The link stops working at once."
              : pending.kind === "transfer"
                ? "They get every right, including the plan and the members; you stay as an ADMIN."
                : pending.kind === "leave"
                  ? "You lose access to its apps and keys until someone invites you again."
                  : "They lose access to this workspace at once."}
          </p>
          <ErrorBox error={error} />
        </ConfirmDialog>
      )}
    </section>
  );
}

function InviteForm({
  workspaceId,
  role,
  onInvited,
}: {
  workspaceId: string;
  role: WorkspaceRole | null;
  onInvited: () => void;
}) {
  const choices = rolesBelow(role);
  const [email, setEmail] = useState("");
  const [inviteRole, setInviteRole] = useState<WorkspaceRole>(
    choices.includes("MEMBER") ? "MEMBER" : choices[0]!,
  );
  const [link, setLink] = useState<{ email: string; link: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setLink(null);
    try {
      const d = await gql<{ inviteMember: { link: string; invitation: { email: string } } }>(
        `mutation($e: String!, $r: WorkspaceRole!, $w: ID) {
          inviteMember(email: $e, role: $r, workspaceId: $w) { link invitation { email } } }`,
        { e: email, r: inviteRole, w: workspaceId },
      );
      setLink({ email: d.inviteMember.invitation.email, link: d.inviteMember.link });
      setEmail("");
      onInvited();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card" onSubmit={submit} aria-label="Invite member">
      <h2>Invite a member</h2>
      <div className="row wrap">
        <input
          name="email"
          type="email"
          className="grow"
          placeholder="teammate@example.com"
          aria-label="Email"
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        <select
          name="role"
          aria-label="Role"
          value={inviteRole}
          onChange={(e) => setInviteRole(e.target.value as WorkspaceRole)}
        >
          {choices.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
        <button type="submit" disabled={busy || email.trim() === ""}>
          {busy ? "Inviting…" : "Invite"}
        </button>
      </div>
      <FieldError error={error} field="email" />
      <FieldError error={error} field="role" />
      <FormError error={error} fields={["email", "role"]} />
      {link && (
        <div className="invite-link" data-testid="invite-link">
          <p>
            Send this link to <strong>{link.email}</strong> (no email is sent; it works once, for 7 days):
          </p>
          <div className="row">
            <code className="url" data-testid="invite-url">
              {link.link}
            </code>
            <CopyButton text={link.link} label="Copy link" />
          </div>
        </div>
      )}
    </form>
  );
}
