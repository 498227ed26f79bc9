import { Arg, Ctx, Int, Query, Resolver } from "type-graphql";
import { GqlContext } from "../graphql/context";
import { RequestLogConnection, RequestLogFilter } from "./requestlog.types";

@Resolver()
export class RequestLogResolver {
  @Query(() => RequestLogConnection, {
    description:
      "The request log of the caller's workspace (operator: filter.workspaceId), newest first: every error " +
      "and a sample of successes (REQUEST_LOG_SAMPLE_PERCENT), kept REQUEST_LOG_RETENTION_DAYS days.",
  })
  requestLog(
    @Arg("filter", () => RequestLogFilter) filter: RequestLogFilter,
    @Arg("first", () => Int, { nullable: true, description: "Page size (default 50, at most 500)." })
    first: number | null,
    @Arg("after", () => String, { nullable: true, description: "`pageInfo.endCursor` of the previous page." })
    after: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<RequestLogConnection> {
    return ctx.services.requestLog.list(ctx, filter, first, after);
  }
}
