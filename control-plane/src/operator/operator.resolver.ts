import { Arg, Ctx, FieldResolver, Mutation, Query, Resolver, Root } from "type-graphql";
import { HealthRecord } from "../../../shared/src/redis/records";
import { Account } from "../accounts/account.entity";
import { GqlContext } from "../graphql/context";
import { Network } from "../networks/network.entity";
import { Upstream } from "../networks/upstream.entity";
import { Workspace } from "../workspaces/workspace.entity";
import { OperatorService } from "./operator.service";
import { PlatformUsage, UpstreamHealthView, WorkspaceMemberSummary } from "./operator.types";

/** Health records read once per GraphQL request, however many upstreams the query lists. */
const healthMemo = new WeakMap<GqlContext, Promise<HealthRecord[]>>();

function healthRecords(ctx: GqlContext): Promise<HealthRecord[]> {
  let p = healthMemo.get(ctx);
  if (!p) {
    p = ctx.services.operator.healthRecords(ctx);
    healthMemo.set(ctx, p);
  }
  return p;
}

/** Slug of each network id, memoised per request like the health records. */
const slugMemo = new WeakMap<GqlContext, Promise<Map<string, string>>>();

function slugs(ctx: GqlContext): Promise<Map<string, string>> {
  let p = slugMemo.get(ctx);
  if (!p) {
    p = ctx.services.networks.list().then((ns: Network[]) => new Map(ns.map((n) => [n.id, n.slug])));
    slugMemo.set(ctx, p);
  }
  return p;
}

@Resolver()
export class OperatorResolver {
  @Mutation(() => Account, {
    description:
      "ADMIN_TOKEN only: make an account (by id or email) a platform operator, or stop it being one.",
  })
  setOperator(
    @Arg("account", () => String) account: string,
    @Arg("operator", () => Boolean) operator: boolean,
    @Ctx() ctx: GqlContext,
  ): Promise<Account> {
    return ctx.services.operator.setOperator(ctx, account, operator);
  }

  @Query(() => [Workspace], { description: "Operator only: every workspace, oldest first." })
  operatorWorkspaces(@Ctx() ctx: GqlContext): Promise<Workspace[]> {
    return ctx.services.operator.workspaces(ctx);
  }

  @Query(() => PlatformUsage, {
    description: "Operator only: requests and errors across every workspace (default: the last 24 hours).",
  })
  platformUsage(
    @Arg("from", () => Date, { nullable: true }) from: Date | null,
    @Arg("to", () => Date, { nullable: true }) to: Date | null,
    @Ctx() ctx: GqlContext,
  ): Promise<PlatformUsage> {
    return ctx.services.operator.platformUsage(ctx, from, to);
  }
}

@Resolver(() => Workspace)
export class OperatorWorkspaceResolver {
  @FieldResolver(() => [WorkspaceMemberSummary], { description: "Operator only: the workspace's members." })
  operatorMembers(@Root() ws: Workspace, @Ctx() ctx: GqlContext): Promise<WorkspaceMemberSummary[]> {
    return ctx.services.operator.members(ctx, ws.id);
  }
}

@Resolver(() => Upstream)
export class UpstreamHealthResolver {
  @FieldResolver(() => UpstreamHealthView, {
    description:
      "Operator only: live health from the data planes' health records (HEALTH_PUBLISH_INTERVAL_MS).",
  })
  async health(@Root() u: Upstream, @Ctx() ctx: GqlContext): Promise<UpstreamHealthView> {
    const records = await healthRecords(ctx);
    const slug = (await slugs(ctx)).get(u.networkId) ?? "";
    return OperatorService.aggregate(records, slug, u.id);
  }
}
