import { Arg, Ctx, FieldResolver, ID, Int, Query, Resolver, Root } from "type-graphql";
import { GqlContext } from "../graphql/context";
import { statementCsv } from "./statement.csv";
import { STATEMENTS_PAGE_DEFAULT } from "./statement.service";
import { UsageStatement, UsageStatementPage } from "./statement.types";

@Resolver(() => UsageStatement)
export class StatementResolver {
  @Query(() => UsageStatement, {
    description:
      "A workspace's usage statement for a calendar month (UTC, `YYYY-MM`): OWNER and ADMIN of the workspace (default: the caller's own), or the operator (workspaceId required).",
  })
  usageStatement(
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Arg("month", () => String) month: string,
    @Ctx() ctx: GqlContext,
  ): Promise<UsageStatement> {
    return ctx.services.statements.statement(ctx, workspaceId, month);
  }

  @Query(() => UsageStatementPage, {
    description:
      "Operator only: every workspace's statement for a month, ordered by workspace id; pass `nextCursor` as `after` for the next page.",
  })
  usageStatements(
    @Arg("month", () => String) month: string,
    @Arg("first", () => Int, { defaultValue: STATEMENTS_PAGE_DEFAULT }) first: number,
    @Arg("after", () => ID, { nullable: true }) after: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<UsageStatementPage> {
    return ctx.services.statements.statements(ctx, month, first, after);
  }

  @FieldResolver(() => String, {
    description: "The statement as CSV (sections total, plan, day, usage; docs/billing.md).",
  })
  csv(@Root() s: UsageStatement): string {
    return statementCsv(s);
  }
}
