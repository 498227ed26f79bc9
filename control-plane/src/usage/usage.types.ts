import { Field, Float, ID, InputType, ObjectType, registerEnumType } from "type-graphql";

export enum MethodSort {
  REQUESTS = "REQUESTS",
  COMPUTE_UNITS = "COMPUTE_UNITS",
  ERRORS = "ERRORS",
  P50 = "P50",
  P95 = "P95",
  AVG = "AVG",
}
registerEnumType(MethodSort, { name: "MethodSort", description: "Sort key of the usage method table." });

export enum SortOrder {
  ASC = "ASC",
  DESC = "DESC",
}
registerEnumType(SortOrder, { name: "SortOrder" });

@InputType({ description: "Scope of a usage report. Every field is optional." })
export class UsageFilter {
  @Field(() => ID, {
    nullable: true,
    description:
      "Operator: the workspace to report on. Accounts: one of their workspaces (default: their own).",
  })
  workspaceId?: string | null;

  @Field(() => ID, { nullable: true, description: "Only this app (of the workspace)." })
  appId?: string | null;

  @Field(() => String, { nullable: true, description: "Only this network slug." })
  network?: string | null;

  @Field(() => Date, {
    nullable: true,
    description: "Range start (default: 23 hours before the current hour).",
  })
  from?: Date | null;

  @Field(() => Date, { nullable: true, description: "Range end, exclusive (default: now)." })
  to?: Date | null;
}

/**
 * Counts are Float: they may exceed 32 bits. Every count of requests (request objects: a batch counts one
 * per element) has a `computeUnits` beside it: the same request objects weighed by their method's weight
 * (NetworkRecord.methodCosts); usage recorded before compute units existed counts a weight of 1.
 */
@ObjectType()
export class ErrorBreakdown {
  @Field(() => Float) serviceError: number;
  @Field(() => Float) nodeError: number;
  @Field(() => Float) clientError: number;
  @Field(() => Float) tooManyRequests: number;
  @Field(() => Float) unknownError: number;
}

@ObjectType({
  description:
    "Requests of one hour (or UTC day) by category; `errors` is the sum of the five error categories.",
})
export class UsageSeriesPoint {
  @Field(() => Date, { description: "Start of the hour (or UTC day for ranges over 7 days)." })
  at: Date;
  @Field(() => Float) success: number;
  @Field(() => Float, { description: "Requests in any category but Success." }) errors: number;
  @Field(() => Float, { description: "Compute units of this point's requests (every category)." })
  computeUnits: number;
  @Field(() => Float) serviceError: number;
  @Field(() => Float) nodeError: number;
  @Field(() => Float) clientError: number;
  @Field(() => Float) tooManyRequests: number;
  @Field(() => Float) unknownError: number;
}

@ObjectType()
export class RequestsSummary {
  @Field(() => Float) total: number;
  @Field(() => Float, { description: "Compute units of the `total` requests (every category)." })
  computeUnits: number;
  @Field(() => Float) success: number;
  @Field(() => ErrorBreakdown) errors: ErrorBreakdown;
  @Field(() => [UsageSeriesPoint]) series: UsageSeriesPoint[];
}

@ObjectType({
  description: "Latency in ms; p50/p95 are interpolated within histogram buckets. Null without data.",
})
export class ResponseTime {
  @Field(() => Float, { nullable: true }) p50: number | null;
  @Field(() => Float, { nullable: true }) p95: number | null;
  @Field(() => Float, { nullable: true }) avg: number | null;
}

@ObjectType()
export class MethodUsage {
  @Field() method: string;
  @Field(() => Float) requests: number;
  @Field(() => Float, { description: "Compute units of those requests." }) computeUnits: number;
  @Field(() => Float, { description: "Requests in any category but Success." }) errors: number;
  @Field(() => Float, { nullable: true }) p50: number | null;
  @Field(() => Float, { nullable: true }) p95: number | null;
  @Field(() => Float, { nullable: true }) avg: number | null;
}

@ObjectType()
export class UsageApp {
  @Field(() => ID) id: string;
  @Field({ description: 'The app\'s name ("(deleted app)" once deleted).' }) name: string;
}

@ObjectType()
export class AppUsage {
  @Field(() => UsageApp) app: UsageApp;
  @Field(() => Float) count: number;
  @Field(() => Float, { description: "Compute units of those `count` requests." }) computeUnits: number;
}

@ObjectType()
export class UsageDay {
  @Field({ description: "UTC day, YYYY-MM-DD." }) date: string;
  @Field(() => Float) total: number;
  @Field(() => Float, { description: "Compute units of the `total` requests." }) computeUnits: number;
  @Field(() => [AppUsage]) byApp: AppUsage[];
  @Field({
    description:
      "The workspace's served requests (all categories but Too Many Requests) that day reached the plan's daily limit, in requests or (plans with a daily compute-unit limit) in compute units.",
  })
  limitReached: boolean;
}

@ObjectType()
export class TodayUsage {
  @Field(() => Float, { description: "Requests counted against today's limit (the limiter's live counter)." })
  count: number;
  @Field(() => Float, { description: "The plan's daily request limit." }) limit: number;
  @Field(() => Float, {
    description:
      "Compute units used today: the limiter's live counter when the plan limits compute units, else the ingested usage (lags by the flush and ingestion delay).",
  })
  computeUnits: number;
  @Field(() => Float, {
    nullable: true,
    description: "The plan's daily compute-unit limit; null = the plan does not limit compute units.",
  })
  computeUnitLimit: number | null;
  @Field(() => Date, { description: "Next 00:00 UTC." }) resetsAt: Date;
}

@ObjectType({ description: "Usage of one workspace (optionally one app / network) over a time range." })
export class UsageReport {
  @Field(() => ID) workspaceId: string;
  @Field(() => ID, { nullable: true }) appId: string | null;
  @Field(() => String, { nullable: true }) network: string | null;
  @Field(() => Date) from: Date;
  @Field(() => Date) to: Date;
}
