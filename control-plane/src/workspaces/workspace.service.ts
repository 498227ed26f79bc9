import { DataSource, EntityManager } from "typeorm";
import { App } from "../apps/app.entity";
import { requireAccount } from "../auth/auth.service";
import { RequestContext } from "../auth/context";
import { badInput, forbidden, isUuid, notFound, unauthenticated } from "../common/errors";
import { Plan } from "../plans/plan.entity";
import { PublicationService } from "../publication/publication.service";
import { Membership, MembershipRole } from "./membership.entity";
import { Workspace } from "./workspace.entity";

/**
 * Tenant boundary. Every workspace-scoped read or write goes through these checks: an account sees only
 * workspaces it is a member of, and another workspace's ids answer NOT_FOUND (existence not revealed).
 * The operator sees every workspace.
 */
export class WorkspaceService {
  constructor(
    private readonly ds: DataSource,
    private readonly publication: PublicationService,
  ) {}

  /** The caller's own workspace (its first membership). */
  async callerWorkspaceId(ctx: RequestContext, m: EntityManager = this.ds.manager): Promise<string> {
    const accountId = requireAccount(ctx);
    const ms = await m
      .getRepository(Membership)
      .findOne({ where: { accountId }, order: { createdAt: "ASC" } });
    if (!ms) throw notFound("Workspace");
    return ms.workspaceId;
  }

  /**
   * Workspace the caller may act on: `id` given -> must be a member (operator: must exist); no `id` ->
   * the caller's own (the operator must name one).
   */
  async resolveWorkspaceId(
    ctx: RequestContext,
    id?: string | null,
    m: EntityManager = this.ds.manager,
  ): Promise<string> {
    if (!ctx.principal) throw unauthenticated();
    if (id == null) {
      if (ctx.principal.kind === "operator")
        throw badInput("workspaceId", "The operator must name a workspace");
      return this.callerWorkspaceId(ctx, m);
    }
    if (!isUuid(id)) throw notFound("Workspace");
    if (ctx.principal.kind === "operator") {
      if (!(await m.getRepository(Workspace).existsBy({ id }))) throw notFound("Workspace");
      return id;
    }
    const ms = await m
      .getRepository(Membership)
      .findOneBy({ accountId: ctx.principal.accountId, workspaceId: id });
    if (!ms) throw notFound("Workspace");
    return id;
  }

  async roleIn(ctx: RequestContext, workspaceId: string): Promise<MembershipRole | null> {
    if (ctx.principal?.kind !== "account") return null;
    const ms = await this.ds
      .getRepository(Membership)
      .findOneBy({ accountId: ctx.principal.accountId, workspaceId });
    return ms?.role ?? null;
  }

  /** An app the caller may see; NOT_FOUND otherwise (also for another workspace's app). */
  async appForCaller(ctx: RequestContext, appId: string, m: EntityManager = this.ds.manager): Promise<App> {
    if (!ctx.principal) throw unauthenticated();
    if (!isUuid(appId)) throw notFound("App");
    const app = await m.getRepository(App).findOneBy({ id: appId });
    if (!app) throw notFound("App");
    if (ctx.principal.kind === "operator") return app;
    const ms = await m
      .getRepository(Membership)
      .findOneBy({ accountId: ctx.principal.accountId, workspaceId: app.workspaceId });
    if (!ms) throw notFound("App");
    return app;
  }

  async workspace(ctx: RequestContext, id?: string | null): Promise<Workspace> {
    const wsId = await this.resolveWorkspaceId(ctx, id);
    return this.ds.getRepository(Workspace).findOneOrFail({ where: { id: wsId }, relations: { plan: true } });
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
      order: { createdAt: "ASC" },
    });
    return rows.map((r) => r.workspace);
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
    if (ctx.principal.kind !== "operator") throw forbidden("Only the operator may set a workspace's plan");
    const id = await this.resolveWorkspaceId(ctx, workspaceId);
    return this.setPlan(id, planName, false);
  }

  /**
   * Workspace OWNER: switch the workspace between self-service plans. Every other plan change is the
   * operator's (`setWorkspacePlan`); the rule holds for the operator here too, so this mutation never
   * grants a private plan.
   */
  async changePlan(ctx: RequestContext, planName: string, workspaceId?: string | null): Promise<Workspace> {
    const id = await this.resolveWorkspaceId(ctx, workspaceId);
    if (ctx.principal?.kind === "account" && (await this.roleIn(ctx, id)) !== MembershipRole.OWNER) {
      throw forbidden("Only the workspace owner may change the plan");
    }
    return this.setPlan(id, planName, true);
  }
}
