import { Arg, Ctx, FieldResolver, ID, Int, Mutation, Query, Resolver, Root } from "type-graphql";
import { App } from "../apps/app.entity";
import { GqlContext } from "../graphql/context";
import { Plan } from "../plans/plan.entity";
import { WorkspaceRole } from "./roles";
import { Workspace } from "./workspace.entity";

@Resolver(() => Workspace)
export class WorkspaceResolver {
  @Query(() => Workspace, {
    description:
      "A workspace the caller belongs to: `id`, or its default (the oldest membership); the operator passes an id (any workspace).",
  })
  workspace(
    @Arg("id", () => ID, { nullable: true }) id: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<Workspace> {
    return ctx.services.workspaces.workspace(ctx, id);
  }

  @Query(() => [Workspace], { description: "Workspaces the caller belongs to (the operator: all)." })
  workspaces(@Ctx() ctx: GqlContext): Promise<Workspace[]> {
    return ctx.services.workspaces.workspacesOfCaller(ctx);
  }

  @FieldResolver(() => WorkspaceRole, {
    nullable: true,
    description: "The caller's role in this workspace (null for the operator).",
  })
  myRole(@Root() ws: Workspace, @Ctx() ctx: GqlContext): Promise<WorkspaceRole | null> {
    return ctx.services.workspaces.roleIn(ctx, ws.id);
  }

  @Mutation(() => Workspace, {
    description:
      "A new workspace on the free plan with the caller as its OWNER (an account owns at most 10).",
  })
  createWorkspace(@Arg("name", () => String) name: string, @Ctx() ctx: GqlContext): Promise<Workspace> {
    return ctx.services.workspaces.create(ctx, name);
  }

  @FieldResolver(() => Plan)
  async plan(@Root() ws: Workspace, @Ctx() ctx: GqlContext): Promise<Plan> {
    return ws.plan ?? ctx.services.plans.byId(ws.planId);
  }

  @FieldResolver(() => [App], {
    description: "As Query.apps: oldest first, `first` (1..1000, default all) after the app `after`.",
  })
  apps(
    @Root() ws: Workspace,
    @Arg("first", () => Int, { nullable: true }) first: number | null,
    @Arg("after", () => ID, { nullable: true }) after: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<App[]> {
    return ctx.services.apps.listForWorkspace(ws.id, { first, after });
  }

  @Mutation(() => Workspace, { description: "Operator: move a workspace to a plan." })
  setWorkspacePlan(
    @Arg("workspaceId", () => ID) workspaceId: string,
    @Arg("plan", () => String) plan: string,
    @Ctx() ctx: GqlContext,
  ): Promise<Workspace> {
    return ctx.services.workspaces.setWorkspacePlan(ctx, workspaceId, plan);
  }

  @Mutation(() => Workspace, {
    description:
      "Workspace OWNER: change the plan of workspaceId (default: the caller's default workspace) to a self-service plan.",
  })
  changePlan(
    @Arg("plan", () => String) plan: string,
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<Workspace> {
    return ctx.services.workspaces.changePlan(ctx, plan, workspaceId);
  }
}
