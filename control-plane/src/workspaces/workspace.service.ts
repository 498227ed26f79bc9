import { DataSource, EntityManager } from "typeorm";
import { App } from "../apps/app.entity";
import { requireAccount } from "../auth/auth.service";
import { isPlatformOperator, RequestContext } from "../auth/context";
import { badInput, forbidden, isUuid, notFound, unauthenticated } from "../common/errors";
import { Plan } from "../plans/plan.entity";
import { PublicationService } from "../publication/publication.service";
import { Membership } from "./membership.entity";
import { can, describePermission, Permission, roleArticle, WorkspaceRole } from "./roles";
import { Workspace } from "./workspace.entity";

export const WORKSPACE_NAME_MAX = 64;
/** Plan of a new workspace (sign-up, createWorkspace). */
export const DEFAULT_PLAN = "free";
/**
 * Workspaces one account may own. Each workspace has its own daily quota, so without a cap one account
 * could multiply its free plan by creating workspaces.
 */
export const MAX_OWNED_WORKSPACES = 10;

/** What the caller may act on: the workspace, and its role there (null: the operator, who may do all). */
export interface WorkspaceAccess {
  workspaceId: string;
  role: WorkspaceRole | null;
}

export function validWorkspaceName(raw: string): string {
  const name = raw.trim();
  if (name.length < 1 || name.length > WORKSPACE_NAME_MAX) {
    throw badInput("workspaceName", `Workspace name must be 1-${WORKSPACE_NAME_MAX} characters`);
  }
  return name;
}

/** The FORBIDDEN error of a role that lacks `permission` (extensions: role, permission). */
export function roleForbidden(role: WorkspaceRole, permission: Permission): Error {
  return forbidden(`${roleArticle(role)} of this workspace may not ${describePermission(permission)}`, {
    role,
    permission,
  });
}

/**
 * Inserts a workspace on the default plan with `accountId` as its OWNER, inside the caller's transaction.
 * Refused when the account already owns MAX_OWNED_WORKSPACES.
 */
export async function insertOwnedWorkspace(
  m: EntityManager,
  accountId: string,
  name: string,
): Promise<Workspace> {
  const owned = await m.getRepository(Membership).countBy({ accountId, role: WorkspaceRole.OWNER });
  if (owned >= MAX_OWNED_WORKSPACES) {
    throw badInput("workspaceName", `An account may own at most ${MAX_OWNED_WORKSPACES} workspaces`);
  }
  const plan = await m.getRepository(Plan).findOneByOrFail({ name: DEFAULT_PLAN });
  const ws = await m
    .getRepository(Workspace)
    .save(m.getRepository(Workspace).create({ name, planId: plan.id }));
  await m.getRepository(Membership).insert({ accountId, workspaceId: ws.id, role: WorkspaceRole.OWNER });
  return ws;
}

/**
 * Tenant boundary and role checks. Every workspace-scoped read or write names a `Permission` and goes
 * through `authorize` / `check` / `appForCaller`: an account that is not a member of the workspace gets
 * NOT_FOUND (existence not revealed, also after it was removed), a member whose role lacks the permission
 * gets FORBIDDEN (`roles.ts` is the table). The operator may do everything in every workspace.
 */
export class WorkspaceService {
  constructor(
    private readonly ds: DataSource,
    private readonly publication: PublicationService,
  ) {}

  /** The caller's default workspace: its oldest membership (normally the one it signed up with). */
  async callerWorkspaceId(ctx: RequestContext, m: EntityManager = this.ds.manager): Promise<string> {
    const accountId = requireAccount(ctx);
    const ms = await m
      .getRepository(Membership)
      .findOne({ where: { accountId }, order: { createdAt: "ASC", id: "ASC" } });
    if (!ms) throw notFound("Workspace");
    return ms.workspaceId;
  }

  /**
   * The caller's role in the workspace; null for a non-member, the operator or anonymous. Memoised per
   * HTTP request (`ctx.roles`) unless read inside a transaction (`m`), which must see the locked rows.
   */
  roleIn(ctx: RequestContext, workspaceId: string, m?: EntityManager): Promise<WorkspaceRole | null> {
    if (ctx.principal?.kind !== "account") return Promise.resolve(null);
    const accountId = ctx.principal.accountId;
    const read = async () =>
      (
        await (m ?? this.ds.manager)
          .getRepository(Membership)
          .findOne({ select: { role: true }, where: { accountId, workspaceId } })
      )?.role ?? null;
    if (m || !ctx.roles) return read();
    let memo = ctx.roles.get(workspaceId);
    if (!memo) {
      memo = read();
      ctx.roles.set(workspaceId, memo);
      // A failed read is not remembered.
      memo.catch(() => ctx.roles?.delete(workspaceId));
    }
    return memo;
  }

  /** Forgets memoised roles after a membership change made in this request. */
  forgetRoles(ctx: RequestContext, workspaceId: string): void {
    ctx.roles?.delete(workspaceId);
  }

  /**
   * `permission` in a workspace whose id is known to exist (an app's, a node's, a member's): a non-member
   * gets NOT_FOUND naming `what`, a member without the permission FORBIDDEN.
   */
  async check(
    ctx: RequestContext,
    workspaceId: string,
    permission: Permission,
    what = "Workspace",
    m?: EntityManager,
  ): Promise<WorkspaceAccess> {
    if (!ctx.principal) throw unauthenticated();
    if (ctx.principal.kind === "operator") return { workspaceId, role: null };
    const role = await this.roleIn(ctx, workspaceId, m);
    if (!role) throw notFound(what);
    if (!can(role, permission)) throw roleForbidden(role, permission);
    return { workspaceId, role };
  }

  /**
   * The workspace the caller acts on, with `permission` checked: `id` given -> it must be a member
   * (the operator: it must exist); no `id` -> the caller's default workspace (the operator must name one).
   */
  async authorize(
    ctx: RequestContext,
    id: string | null | undefined,
    permission: Permission,
    m: EntityManager = this.ds.manager,
  ): Promise<WorkspaceAccess> {
    if (!ctx.principal) throw unauthenticated();
    if (id == null) {
      if (ctx.principal.kind === "operator")
        throw badInput("workspaceId", "The operator must name a workspace");
      return this.check(ctx, await this.callerWorkspaceId(ctx, m), permission);
    }
    if (!isUuid(id)) throw notFound("Workspace");
    if (ctx.principal.kind === "operator") {
      if (!(await m.getRepository(Workspace).existsBy({ id }))) throw notFound("Workspace");
      return { workspaceId: id, role: null };
    }
    return this.check(ctx, id, permission);
  }

  /** An app the caller may act on with `permission`; NOT_FOUND for another workspace's app. */
  async appForCaller(
    ctx: RequestContext,
    appId: string,
    permission: Permission,
    m: EntityManager = this.ds.manager,
  ): Promise<App> {
    if (!ctx.principal) throw unauthenticated();
    if (!isUuid(appId)) throw notFound("App");
    const app = await m.getRepository(App).findOneBy({ id: appId });
    if (!app) throw notFound("App");
    await this.check(ctx, app.workspaceId, permission, "App");
    return app;
  }

  /** Whether the caller sees keys in clear in this workspace (a VIEWER gets them masked). */
  async seesKeys(ctx: RequestContext, workspaceId: string): Promise<boolean> {
    if (ctx.principal?.kind === "operator") return true;
    const role = await this.roleIn(ctx, workspaceId);
    return role !== null && can(role, Permission.ReadKeys);
  }

  async workspace(ctx: RequestContext, id?: string | null): Promise<Workspace> {
    const { workspaceId } = await this.authorize(ctx, id, Permission.Read);
    return this.ds
      .getRepository(Workspace)
      .findOneOrFail({ where: { id: workspaceId }, relations: { plan: true } });
  }

  async workspacesOfCaller(ctx: RequestContext): Promise<Workspace[]> {
    if (!ctx.principal) throw unauthenticated();
    if (ctx.principal.kind === "operator") {
      return this.ds
        .getRepository(Workspace)
        .find({ relations: { plan: true }, order: { createdAt: "ASC" } });
    }
    const rows = await this.ds.getRepository(Membership).find({
      where: { accountId: ctx.principal.accountId },
      relations: { workspace: { plan: true } },
      order: { createdAt: "ASC", id: "ASC" },
    });
    return rows.map((r) => r.workspace);
  }

  /** A new workspace on the default plan, the caller its OWNER. */
  async create(ctx: RequestContext, rawName: string): Promise<Workspace> {
    const accountId = requireAccount(ctx);
    const name = validWorkspaceName(rawName);
    const ws = await this.ds.transaction(async (m) => {
      // Serialises this account's creations, so the ownership cap holds under concurrency.
      await m.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [accountId]);
      return insertOwnedWorkspace(m, accountId, name);
    });
    await this.publication.safely("workspace", () => this.publication.publishWorkspaces([ws.id]));
    return this.ds
      .getRepository(Workspace)
      .findOneOrFail({ where: { id: ws.id }, relations: { plan: true } });
  }

  /**
   * Moves the workspace to the plan named `planName` and re-publishes it. `selfServiceOnly`: the plan must
   * be self-service; an unknown plan and a private one get the same answer, so a tenant cannot probe for
   * the operator's private plan names. The plan row is read FOR SHARE in the same transaction as the
   * update, so an operator turning `selfService` off concurrently cannot be raced past.
   */
  private async setPlan(workspaceId: string, planName: string, selfServiceOnly: boolean): Promise<Workspace> {
    await this.ds.transaction(async (m) => {
      const plan = await m
        .getRepository(Plan)
        .findOne({ where: { name: planName }, lock: { mode: "pessimistic_read" } });
      if (selfServiceOnly && !plan?.selfService) {
        throw badInput(
          "plan",
          `"${planName}" is not a self-service plan: ask the platform operator to move the workspace to it`,
        );
      }
      if (!plan) throw badInput("plan", `Unknown plan "${planName}"`);
      await m.getRepository(Workspace).update({ id: workspaceId }, { planId: plan.id });
    });
    await this.publication.safely("workspace plan", () => this.publication.publishWorkspaces([workspaceId]));
    return this.ds
      .getRepository(Workspace)
      .findOneOrFail({ where: { id: workspaceId }, relations: { plan: true } });
  }

  /** Operator: move any workspace to any plan, self-service or not. */
  async setWorkspacePlan(ctx: RequestContext, workspaceId: string, planName: string): Promise<Workspace> {
    if (!ctx.principal) throw unauthenticated();
    if (!isPlatformOperator(ctx)) throw forbidden("Only the operator may set a workspace's plan");
    // An operator account is usually not a member: the workspace only has to exist.
    if (!isUuid(workspaceId) || !(await this.ds.getRepository(Workspace).existsBy({ id: workspaceId })))
      throw notFound("Workspace");
    return this.setPlan(workspaceId, planName, false);
  }

  /**
   * Workspace OWNER: switch the workspace between self-service plans. Every other plan change is the
   * operator's (`setWorkspacePlan`); the rule holds for the operator here too, so this mutation never
   * grants a private plan.
   */
  async changePlan(ctx: RequestContext, planName: string, workspaceId?: string | null): Promise<Workspace> {
    const { workspaceId: id } = await this.authorize(ctx, workspaceId, Permission.ManagePlan);
    return this.setPlan(id, planName, true);
  }
}
