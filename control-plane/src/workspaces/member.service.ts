import { createHash, randomBytes } from "node:crypto";
import { DataSource, EntityManager, In, IsNull, MoreThan } from "typeorm";
import { Account } from "../accounts/account.entity";
import { requireAccount } from "../auth/auth.service";
import { RequestContext } from "../auth/context";
import { badInput, forbidden, isUuid, notFound } from "../common/errors";
import { Invitation } from "./invitation.entity";
import { Membership } from "./membership.entity";
import { can, outranks, Permission, ROLE_RANK, roleArticle, WorkspaceRole } from "./roles";
import { Workspace } from "./workspace.entity";
import { WorkspaceAccess, WorkspaceService } from "./workspace.service";

/** An invitation link works for 7 days. */
export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;
/** Pending invitations one workspace may hold at once (a guard against runaway automation). */
export const MAX_PENDING_INVITATIONS = 100;

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const EMAIL_MAX = 254;

export enum InvitationStatus {
  PENDING = "PENDING",
  ACCEPTED = "ACCEPTED",
  REVOKED = "REVOKED",
  EXPIRED = "EXPIRED",
}

/** `acceptInvitation` / `signUp(invitationToken)` refusals: `extensions.reason` of the BAD_USER_INPUT. */
export enum InvitationRefusal {
  Revoked = "INVITATION_REVOKED",
  Used = "INVITATION_USED",
  Expired = "INVITATION_EXPIRED",
  EmailMismatch = "INVITATION_EMAIL_MISMATCH",
  AlreadyMember = "ALREADY_MEMBER",
}

export interface MemberView {
  id: string;
  workspaceId: string;
  accountId: string;
  email: string;
  role: WorkspaceRole;
  joinedAt: Date;
  isCaller: boolean;
}

export interface InvitationView {
  id: string;
  workspaceId: string;
  email: string;
  role: WorkspaceRole;
  createdAt: Date;
  expiresAt: Date;
  status: InvitationStatus;
  invitedByEmail: string | null;
}

export interface InvitationPreviewView {
  workspaceName: string;
  email: string;
  role: WorkspaceRole;
  expiresAt: Date;
  status: InvitationStatus;
}

function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Invitation tokens: `rgi_` + 32 random bytes (base64url); only the SHA-256 is stored. */
function newInvitationToken(): string {
  return `rgi_${randomBytes(32).toString("base64url")}`;
}

function statusOf(inv: Invitation, now = Date.now()): InvitationStatus {
  if (inv.acceptedAt) return InvitationStatus.ACCEPTED;
  if (inv.revokedAt) return InvitationStatus.REVOKED;
  if (inv.expiresAt.getTime() <= now) return InvitationStatus.EXPIRED;
  return InvitationStatus.PENDING;
}

function invitationView(inv: Invitation): InvitationView {
  return {
    id: inv.id,
    workspaceId: inv.workspaceId,
    email: inv.email,
    role: inv.role,
    createdAt: inv.createdAt,
    expiresAt: inv.expiresAt,
    status: statusOf(inv),
    invitedByEmail: inv.inviter?.email ?? null,
  };
}

function normaliseEmail(raw: string): string {
  const email = raw.trim().toLowerCase();
  if (email.length > EMAIL_MAX || !EMAIL_RE.test(email)) throw badInput("email", "Not a valid email address");
  return email;
}

/**
 * Revokes the pending invitations `accountId` sent in `workspaceId` that its role `role` (null: no longer
 * a member) could not send now: all of them without ManageMembers, else those for a role it does not
 * outrank. Runs inside the membership change, under the workspace lock, so a removed or demoted member's
 * links stop working together with its rights. Returns how many were revoked.
 */
async function revokeInvitationsBeyond(
  m: EntityManager,
  workspaceId: string,
  accountId: string,
  role: WorkspaceRole | null,
): Promise<number> {
  const repo = m.getRepository(Invitation);
  const pending = await repo.find({
    where: { workspaceId, invitedBy: accountId, acceptedAt: IsNull(), revokedAt: IsNull() },
  });
  const stale = pending.filter(
    (inv) => role === null || !can(role, Permission.ManageMembers) || !outranks(role, inv.role),
  );
  if (stale.length > 0) await repo.update({ id: In(stale.map((i) => i.id)) }, { revokedAt: new Date() });
  return stale.length;
}

/** Serialises every membership and invitation change of one workspace (and its role checks). */
async function lockWorkspace(m: EntityManager, workspaceId: string): Promise<void> {
  const rows: unknown[] = await m.query("SELECT id FROM workspaces WHERE id = $1 FOR UPDATE", [workspaceId]);
  if (rows.length === 0) throw notFound("Workspace");
}

/**
 * Members, invitations and ownership. Rules on top of the role table (`roles.ts`):
 * - members are managed (invited, re-roled, removed) only by a role that outranks both the member's role
 *   and the role given: an ADMIN manages MEMBERs and VIEWERs, the OWNER everyone else;
 * - OWNER is never invited or assigned; `transferOwnership` moves it (the old owner becomes ADMIN), so
 *   every workspace keeps exactly one OWNER, who can neither leave, be removed nor be demoted;
 * - every change runs in a transaction holding the workspace row's lock, and the caller's role is read
 *   again under it, so a concurrent demotion or transfer cannot be raced past;
 * - a member removed (or leaving) or demoted loses its pending invitations that its new role could not
 *   send (`revokeInvitationsBeyond`), in the same transaction.
 */
export class MemberService {
  constructor(
    private readonly ds: DataSource,
    private readonly workspaces: WorkspaceService,
    /** Absolute base URL of the console (`PUBLIC_CONSOLE_URL`, else this server's own /console). */
    private readonly consoleUrl: () => string,
  ) {}

  /** The link `inviteMember` answers with: the token sits in the fragment, which browsers never send. */
  invitationLink(token: string): string {
    return `${this.consoleUrl()}/invite#${token}`;
  }

  async members(ctx: RequestContext, workspaceId?: string | null): Promise<MemberView[]> {
    const { workspaceId: wsId } = await this.workspaces.authorize(ctx, workspaceId, Permission.Read);
    const rows = await this.ds.getRepository(Membership).find({
      where: { workspaceId: wsId },
      relations: { account: true },
      order: { createdAt: "ASC", id: "ASC" },
    });
    const me = ctx.principal?.kind === "account" ? ctx.principal.accountId : null;
    return rows.map((r) => this.memberView(r, me)).sort((a, b) => ROLE_RANK[b.role] - ROLE_RANK[a.role]);
  }

  private memberView(r: Membership, callerAccountId: string | null): MemberView {
    return {
      id: r.id,
      workspaceId: r.workspaceId,
      accountId: r.accountId,
      email: r.account.email,
      role: r.role,
      joinedAt: r.createdAt,
      isCaller: r.accountId === callerAccountId,
    };
  }

  /** Pending invitations (not accepted, revoked or expired), newest first. */
  async invitations(ctx: RequestContext, workspaceId?: string | null): Promise<InvitationView[]> {
    const { workspaceId: wsId } = await this.workspaces.authorize(ctx, workspaceId, Permission.ManageMembers);
    const rows = await this.ds.getRepository(Invitation).find({
      where: {
        workspaceId: wsId,
        acceptedAt: IsNull(),
        revokedAt: IsNull(),
        expiresAt: MoreThan(new Date()),
      },
      relations: { inviter: true },
      order: { createdAt: "DESC", id: "DESC" },
    });
    return rows.map(invitationView);
  }

  /** Refuses giving `role` by a caller of role `callerRole` (null: the operator). */
  private checkGrant(callerRole: WorkspaceRole | null, role: WorkspaceRole, field: string): void {
    if (role === WorkspaceRole.OWNER) {
      throw badInput(
        field,
        "OWNER cannot be given this way: give ADMIN, then transferOwnership (a workspace has one owner)",
      );
    }
    if (callerRole && !outranks(callerRole, role)) {
      throw forbidden(`${roleArticle(callerRole)} may give only roles below ${callerRole}`, {
        role: callerRole,
        permission: Permission.ManageMembers,
      });
    }
  }

  /** Refuses managing a member of role `target` by a caller of role `callerRole` (null: the operator). */
  private checkManage(callerRole: WorkspaceRole | null, target: WorkspaceRole): void {
    if (target === WorkspaceRole.OWNER && (callerRole === null || callerRole === WorkspaceRole.OWNER)) {
      throw badInput("memberId", "The owner cannot be removed or demoted: transfer ownership first");
    }
    if (callerRole && !outranks(callerRole, target)) {
      throw forbidden(`${roleArticle(callerRole)} may manage only members below ${callerRole}`, {
        role: callerRole,
        permission: Permission.ManageMembers,
      });
    }
  }

  /**
   * A single-use invitation for `email` with `role`, valid 7 days. A pending invitation for the same email
   * in the workspace is revoked (the new link replaces it). Returns the token once; only its hash is kept.
   */
  async invite(
    ctx: RequestContext,
    rawEmail: string,
    role: WorkspaceRole,
    workspaceId?: string | null,
  ): Promise<{ token: string; link: string; invitation: InvitationView }> {
    const email = normaliseEmail(rawEmail);
    const first = await this.workspaces.authorize(ctx, workspaceId, Permission.ManageMembers);
    const token = newInvitationToken();
    const id = await this.ds.transaction(async (m) => {
      await lockWorkspace(m, first.workspaceId);
      const { role: callerRole } = await this.workspaces.check(
        ctx,
        first.workspaceId,
        Permission.ManageMembers,
        "Workspace",
        m,
      );
      this.checkGrant(callerRole, role, "role");
      const member = await m
        .getRepository(Membership)
        .createQueryBuilder("ms")
        .innerJoin(Account, "a", "a.id = ms.account_id")
        .where("ms.workspace_id = :ws AND a.email = :email", { ws: first.workspaceId, email })
        .getExists();
      if (member) throw badInput("email", `${email} is already a member of this workspace`);
      const repo = m.getRepository(Invitation);
      const now = new Date();
      await repo.update(
        { workspaceId: first.workspaceId, email, acceptedAt: IsNull(), revokedAt: IsNull() },
        { revokedAt: now },
      );
      const pending = await repo.countBy({
        workspaceId: first.workspaceId,
        acceptedAt: IsNull(),
        revokedAt: IsNull(),
        expiresAt: MoreThan(now),
      });
      if (pending >= MAX_PENDING_INVITATIONS) {
        throw badInput(
          "email",
          `A workspace may have at most ${MAX_PENDING_INVITATIONS} pending invitations: revoke some first`,
        );
      }
      const inserted = await repo.insert({
        workspaceId: first.workspaceId,
        email,
        role,
        tokenHash: hashToken(token),
        invitedBy: ctx.principal?.kind === "account" ? ctx.principal.accountId : null,
        expiresAt: new Date(now.getTime() + INVITATION_TTL_MS),
      });
      return inserted.identifiers[0]!.id as string;
    });
    const inv = await this.ds
      .getRepository(Invitation)
      .findOneOrFail({ where: { id }, relations: { inviter: true } });
    return { token, link: this.invitationLink(token), invitation: invitationView(inv) };
  }

  /** Revokes a pending invitation (idempotent); an accepted one cannot be revoked. */
  async revokeInvitation(ctx: RequestContext, id: string): Promise<InvitationView> {
    if (!isUuid(id)) throw notFound("Invitation");
    const found = await this.ds.getRepository(Invitation).findOneBy({ id });
    if (!found) throw notFound("Invitation");
    await this.ds.transaction(async (m) => {
      await lockWorkspace(m, found.workspaceId);
      const { role } = await this.workspaces.check(
        ctx,
        found.workspaceId,
        Permission.ManageMembers,
        "Invitation",
        m,
      );
      const inv = await m.getRepository(Invitation).findOneByOrFail({ id });
      if (role && !outranks(role, inv.role)) {
        throw forbidden(`${roleArticle(role)} may revoke only invitations for roles below ${role}`, {
          role,
          permission: Permission.ManageMembers,
        });
      }
      if (inv.acceptedAt) throw badInput("id", "This invitation was already accepted");
      if (!inv.revokedAt) await m.getRepository(Invitation).update({ id }, { revokedAt: new Date() });
    });
    return invitationView(
      await this.ds.getRepository(Invitation).findOneOrFail({ where: { id }, relations: { inviter: true } }),
    );
  }

  /**
   * What an invitation link offers, for whoever holds the token (the accept page shows it before logging
   * in or signing up). An unknown token is NOT_FOUND.
   */
  async preview(token: string): Promise<InvitationPreviewView> {
    const inv = await this.ds
      .getRepository(Invitation)
      .findOne({ where: { tokenHash: hashToken(token) }, relations: { workspace: true } });
    if (!inv) throw notFound("Invitation");
    return {
      workspaceName: inv.workspace.name,
      email: inv.email,
      role: inv.role,
      expiresAt: inv.expiresAt,
      status: statusOf(inv),
    };
  }

  /** The logged-in caller accepts: it joins the workspace with the invitation's role. */
  async accept(ctx: RequestContext, token: string): Promise<Workspace> {
    const accountId = requireAccount(ctx);
    const account = await this.ds.getRepository(Account).findOneByOrFail({ id: accountId });
    const workspaceId = await this.ds.transaction((m) => this.acceptIn(m, account, token));
    this.workspaces.forgetRoles(ctx, workspaceId);
    return this.ds
      .getRepository(Workspace)
      .findOneOrFail({ where: { id: workspaceId }, relations: { plan: true } });
  }

  /**
   * Accepts inside the caller's transaction (also `signUp(invitationToken)`, whose new account then rolls
   * back with a refused invitation). The invitation row is locked, so one token adds one membership even
   * when used twice at once. Returns the workspace id.
   */
  async acceptIn(m: EntityManager, account: Pick<Account, "id" | "email">, token: string): Promise<string> {
    const repo = m.getRepository(Invitation);
    const found = await repo.findOneBy({ tokenHash: hashToken(token) });
    if (!found) throw notFound("Invitation");
    await lockWorkspace(m, found.workspaceId);
    const inv = await repo.findOneOrFail({ where: { id: found.id }, lock: { mode: "pessimistic_write" } });
    switch (statusOf(inv)) {
      case InvitationStatus.ACCEPTED:
        throw badInput("token", "This invitation was already used", InvitationRefusal.Used);
      case InvitationStatus.REVOKED:
        throw badInput("token", "This invitation was revoked", InvitationRefusal.Revoked);
      case InvitationStatus.EXPIRED:
        throw badInput("token", "This invitation has expired: ask for a new one", InvitationRefusal.Expired);
      case InvitationStatus.PENDING:
        break;
    }
    if (account.email !== inv.email) {
      throw badInput(
        "token",
        `This invitation is for ${inv.email}: log in or sign up with that email`,
        InvitationRefusal.EmailMismatch,
      );
    }
    const memberships = m.getRepository(Membership);
    if (await memberships.existsBy({ accountId: account.id, workspaceId: inv.workspaceId })) {
      throw badInput("token", "You are already a member of this workspace", InvitationRefusal.AlreadyMember);
    }
    await memberships.insert({ accountId: account.id, workspaceId: inv.workspaceId, role: inv.role });
    await repo.update({ id: inv.id }, { acceptedAt: new Date(), acceptedBy: account.id });
    return inv.workspaceId;
  }

  /** The membership `memberId` and the caller's access to its workspace, under the workspace lock. */
  private async lockedMember(
    m: EntityManager,
    ctx: RequestContext,
    memberId: string,
    permission: Permission,
  ): Promise<{ ms: Membership; access: WorkspaceAccess }> {
    if (!isUuid(memberId)) throw notFound("Member");
    const found = await m.getRepository(Membership).findOneBy({ id: memberId });
    if (!found) throw notFound("Member");
    await lockWorkspace(m, found.workspaceId);
    const access = await this.workspaces.check(ctx, found.workspaceId, permission, "Member", m);
    const ms = await m.getRepository(Membership).findOneBy({ id: memberId });
    if (!ms) throw notFound("Member");
    return { ms, access };
  }

  async changeRole(ctx: RequestContext, memberId: string, role: WorkspaceRole): Promise<MemberView> {
    const ms = await this.ds.transaction(async (m) => {
      const { ms, access } = await this.lockedMember(m, ctx, memberId, Permission.ManageMembers);
      this.checkGrant(access.role, role, "role");
      this.checkManage(access.role, ms.role);
      await m.getRepository(Membership).update({ id: ms.id }, { role });
      await revokeInvitationsBeyond(m, ms.workspaceId, ms.accountId, role);
      return ms;
    });
    this.workspaces.forgetRoles(ctx, ms.workspaceId);
    return this.memberById(ctx, ms.id);
  }

  /** Removes a member (a member removing itself is leaving). Returns the membership id. */
  async remove(ctx: RequestContext, memberId: string): Promise<string> {
    const ms = await this.ds.transaction(async (m) => {
      if (!isUuid(memberId)) throw notFound("Member");
      const target = await m.getRepository(Membership).findOneBy({ id: memberId });
      const self = ctx.principal?.kind === "account" && target?.accountId === ctx.principal.accountId;
      const { ms, access } = await this.lockedMember(
        m,
        ctx,
        memberId,
        self ? Permission.Leave : Permission.ManageMembers,
      );
      if (!self) this.checkManage(access.role, ms.role);
      await m.getRepository(Membership).delete({ id: ms.id });
      await revokeInvitationsBeyond(m, ms.workspaceId, ms.accountId, null);
      return ms;
    });
    this.workspaces.forgetRoles(ctx, ms.workspaceId);
    return ms.id;
  }

  /** The caller leaves the workspace (not its OWNER, who transfers ownership first). */
  async leave(ctx: RequestContext, workspaceId: string): Promise<string> {
    const accountId = requireAccount(ctx);
    if (!isUuid(workspaceId)) throw notFound("Workspace");
    const ms = await this.ds.getRepository(Membership).findOneBy({ accountId, workspaceId });
    if (!ms) throw notFound("Workspace");
    return this.remove(ctx, ms.id);
  }

  /** Makes member `memberId` the OWNER; the previous owner stays as ADMIN. */
  async transferOwnership(ctx: RequestContext, memberId: string): Promise<MemberView> {
    const ms = await this.ds.transaction(async (m) => {
      const { ms } = await this.lockedMember(m, ctx, memberId, Permission.TransferOwnership);
      if (ms.role === WorkspaceRole.OWNER) throw badInput("memberId", "This member is already the owner");
      const repo = m.getRepository(Membership);
      const previous = await repo.findOneBy({ workspaceId: ms.workspaceId, role: WorkspaceRole.OWNER });
      // Demote first: the partial unique index allows one OWNER row per workspace at any moment.
      await repo.update(
        { workspaceId: ms.workspaceId, role: WorkspaceRole.OWNER },
        { role: WorkspaceRole.ADMIN },
      );
      await repo.update({ id: ms.id }, { role: WorkspaceRole.OWNER });
      // The old owner, now ADMIN, may no longer invite ADMINs.
      if (previous) await revokeInvitationsBeyond(m, ms.workspaceId, previous.accountId, WorkspaceRole.ADMIN);
      return ms;
    });
    this.workspaces.forgetRoles(ctx, ms.workspaceId);
    return this.memberById(ctx, ms.id);
  }

  private async memberById(ctx: RequestContext, id: string): Promise<MemberView> {
    const row = await this.ds
      .getRepository(Membership)
      .findOneOrFail({ where: { id }, relations: { account: true } });
    return this.memberView(row, ctx.principal?.kind === "account" ? ctx.principal.accountId : null);
  }
}
