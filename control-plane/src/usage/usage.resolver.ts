import { Arg, Ctx, FieldResolver, Int, Query, Resolver, Root } from "type-graphql";
import { GqlContext } from "../graphql/context";
import { Workspace } from "../workspaces/workspace.entity";
import {
  MethodSort,
  MethodUsage,
  RequestsSummary,
  ResponseTime,
  SortOrder,
  TodayUsage,
  UsageDay,
  UsageFilter,
  UsageReport,
} from "./usage.types";

@Resolver(() => UsageReport)
export class UsageResolver {
  @Query(() => UsageReport, {
    description:
      "Usage of the caller's workspace (operator: filter.workspaceId). Poll it; nothing is pushed.",
  })
  usage(@Arg("filter", () => UsageFilter) filter: UsageFilter, @Ctx() ctx: GqlContext): Promise<UsageReport> {
    return ctx.services.usage.report(ctx, filter);
  }

  @FieldResolver(() => RequestsSummary, {
    description:
      "Totals by category and a series: hourly over the last 24 h by default (daily beyond 7 days).",
  })
  requests24h(@Root() r: UsageReport, @Ctx() ctx: GqlContext): Promise<RequestsSummary> {
    return ctx.services.usage.requests(r);
  }

  @FieldResolver(() => ResponseTime)
  responseTime(
    @Root() r: UsageReport,
    @Arg("method", () => String, { nullable: true }) method: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<ResponseTime> {
    return ctx.services.usage.responseTime(r, method);
  }

  @FieldResolver(() => [MethodUsage])
  methods(
    @Root() r: UsageReport,
    @Arg("sortBy", () => MethodSort, { defaultValue: MethodSort.REQUESTS }) sortBy: MethodSort,
    @Arg("order", () => SortOrder, { defaultValue: SortOrder.DESC }) order: SortOrder,
    @Ctx() ctx: GqlContext,
  ): Promise<MethodUsage[]> {
    return ctx.services.usage.methods(r, sortBy, order);
  }

  @FieldResolver(() => [UsageDay], { description: "Per UTC day, oldest first, today last." })
  history(
    @Root() r: UsageReport,
    @Arg("days", () => Int, { defaultValue: 30 }) days: number,
    @Ctx() ctx: GqlContext,
  ): Promise<UsageDay[]> {
    return ctx.services.usage.history(r, days);
  }

  @FieldResolver(() => TodayUsage, { description: "The workspace's count against its daily limit." })
  today(@Root() r: UsageReport, @Ctx() ctx: GqlContext): Promise<TodayUsage> {
    return ctx.services.usage.today(r.workspaceId);
  }
}

/** `Workspace.today`: lives here so the workspace module does not depend on usage. */
@Resolver(() => Workspace)
export class WorkspaceUsageResolver {
  @FieldResolver(() => TodayUsage, { description: "Requests counted today against the plan's daily limit." })
  today(@Root() ws: Workspace, @Ctx() ctx: GqlContext): Promise<TodayUsage> {
    return ctx.services.usage.today(ws.id);
  }
}
