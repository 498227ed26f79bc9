import { Field, Float, ID, Int, InterfaceType, ObjectType } from "type-graphql";

/**
 * The amounts every statement row carries. Counts are Float: they may exceed 32 bits.
 * `requests` / `computeUnits` count every request object the gateway answered for the workspace (what the
 * usage rollups hold), `refusedRequests` / `refusedComputeUnits` the part refused with 429 (category Too Many
 * Requests: rate or daily / monthly limit), `servedRequests` / `servedComputeUnits` the rest.
 */
@InterfaceType("BillingAmounts", {
  description: "Requests and compute units of a statement row (docs/billing.md).",
})
export abstract class StatementAmounts {
  @Field(() => Float, { description: "Request objects answered (every category, refusals included)." })
  requests: number;
  @Field(() => Float, { description: "Compute units of those request objects." })
  computeUnits: number;
  @Field(() => Float, { description: "Of `requests`: refused with 429 (Too Many Requests)." })
  refusedRequests: number;
  @Field(() => Float, { description: "Of `computeUnits`: those of refused request objects." })
  refusedComputeUnits: number;
  @Field(() => Float, { description: "`requests` - `refusedRequests`." })
  servedRequests: number;
  @Field(() => Float, { description: "`computeUnits` - `refusedComputeUnits`." })
  servedComputeUnits: number;
}

@ObjectType("UsageStatementLine", {
  implements: StatementAmounts,
  description: "One app x network x method of a statement. Dedicated-node traffic has no app.",
})
export class StatementLine extends StatementAmounts {
  @Field(() => ID, { nullable: true, description: "null: dedicated-node traffic (network `node-{id}`)." })
  appId: string | null;
  @Field(() => String, { nullable: true, description: "The app's name now; `(deleted app)` if it is gone." })
  appName: string | null;
  @Field() network: string;
  @Field() method: string;
}

@ObjectType("UsageStatementApp", {
  implements: StatementAmounts,
  description: "A statement's totals for one app (null: dedicated nodes).",
})
export class StatementAppTotal extends StatementAmounts {
  @Field(() => ID, { nullable: true }) appId: string | null;
  @Field(() => String, { nullable: true }) appName: string | null;
}

@ObjectType("UsageStatementNetwork", {
  implements: StatementAmounts,
  description: "A statement's totals for one network.",
})
export class StatementNetworkTotal extends StatementAmounts {
  @Field() network: string;
}

@ObjectType("UsageStatementDay", {
  implements: StatementAmounts,
  description: "One UTC day of a statement.",
})
export class StatementDay extends StatementAmounts {
  @Field({ description: "`YYYY-MM-DD` (UTC)." })
  date: string;
  @Field(() => Float, {
    nullable: true,
    description:
      "The lowest daily request limit among the plans in force that day (null: no plan recorded that day).",
  })
  dailyRequestLimit: number | null;
  @Field(() => Float, {
    nullable: true,
    description:
      "The lowest daily compute-unit limit among the plans in force that day (null: none of them limits compute units).",
  })
  dailyComputeUnitLimit: number | null;
  @Field({
    description:
      "The workspace reached its daily limit: the day's served requests on app keys (what the daily quota counts) reached `dailyRequestLimit`, or their compute units reached `dailyComputeUnitLimit`.",
  })
  overLimit: boolean;
}

@ObjectType("UsageStatementPlan", {
  description: "A plan in force during (part of) the month.",
})
export class StatementPlanPeriod {
  @Field(() => ID) planId: string;
  @Field() name: string;
  @Field({ description: "Start of the period within the month." })
  from: Date;
  @Field({ description: "End of the period within the month (exclusive; now for the current plan)." })
  to: Date;
  @Field(() => Float, { description: "The plan's daily request limit (its current setting)." })
  dailyRequestLimit: number;
  @Field(() => Float, { nullable: true, description: "The plan's monthly request limit (current setting)." })
  monthlyRequestLimit: number | null;
  @Field(() => Int, { description: "The plan's requests per second (current setting)." })
  requestsPerSecond: number;
  @Field(() => Float, {
    nullable: true,
    description: "The plan's daily compute-unit limit (current setting).",
  })
  dailyComputeUnitLimit: number | null;
  @Field(() => Float, {
    nullable: true,
    description: "The plan's monthly compute-unit limit (current setting).",
  })
  monthlyComputeUnitLimit: number | null;
}

@ObjectType("UsageStatement", {
  implements: StatementAmounts,
  description:
    "A workspace's usage for one calendar month (UTC), for invoicing (docs/billing.md). Totals equal the usage rollups for the month.",
})
export class UsageStatement extends StatementAmounts {
  @Field(() => ID) workspaceId: string;
  @Field() workspaceName: string;
  @Field({ description: "`YYYY-MM`." })
  month: string;
  @Field({ description: "00:00 UTC on the month's first day." })
  from: Date;
  @Field({ description: "00:00 UTC on the next month's first day (exclusive)." })
  to: Date;
  @Field({ description: "The month has ended; the current month's statement grows until it does." })
  complete: boolean;
  @Field(() => [StatementLine], { description: "By app, network and method; largest first." })
  lines: StatementLine[];
  @Field(() => [StatementAppTotal]) byApp: StatementAppTotal[];
  @Field(() => [StatementNetworkTotal]) byNetwork: StatementNetworkTotal[];
  @Field(() => [StatementDay], { description: "Every UTC day of the month so far, oldest first." })
  days: StatementDay[];
  @Field(() => [String], { description: "Dates (`YYYY-MM-DD`) of the days with `overLimit`." })
  daysOverLimit: string[];
  @Field(() => [StatementPlanPeriod], { description: "Plans in force during the month, oldest first." })
  plans: StatementPlanPeriod[];
}

@ObjectType("UsageStatementPage", {
  description: "Every workspace's statement for a month, a page at a time.",
})
export class UsageStatementPage {
  @Field() month: string;
  @Field(() => [UsageStatement], { description: "Ordered by workspace id." })
  statements: UsageStatement[];
  @Field(() => ID, {
    nullable: true,
    description: "Pass as `after` for the next page; null on the last page.",
  })
  nextCursor: string | null;
}
