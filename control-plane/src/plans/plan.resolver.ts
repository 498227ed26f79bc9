import { IsOptional, Max, MaxLength, Min } from "class-validator";
import { Arg, Ctx, Field, InputType, Int, Mutation, Query, Resolver } from "type-graphql";
import { GqlContext } from "../graphql/context";
import { Plan } from "./plan.entity";
import { MAX_IN_FLIGHT_CAP } from "./plan.service";

const CAP_INPUT_DOC = `1..${MAX_IN_FLIGHT_CAP}; null = the data plane's default; omitted: null for a new plan, unchanged for an existing one.`;

@InputType()
export class PlanInput {
  @Field()
  @MaxLength(32)
  name: string;

  @Field(() => Int)
  @Min(1)
  dailyRequestLimit: number;

  @Field(() => Int)
  @Min(1)
  requestsPerSecond: number;

  @Field(() => Number, { nullable: true, description: "Null = no monthly limit." })
  monthlyRequestLimit?: number | null;

  @Field(() => Int, {
    nullable: true,
    description: "Compute units per second; null = none (set on every upsert).",
  })
  computeUnitsPerSecond?: number | null;

  @Field(() => Number, {
    nullable: true,
    description: "Compute units per UTC day; null = none (set on every upsert).",
  })
  dailyComputeUnitLimit?: number | null;

  @Field(() => Number, {
    nullable: true,
    description: "Compute units per UTC month; null = none (set on every upsert).",
  })
  monthlyComputeUnitLimit?: number | null;

  @Field(() => Int, { nullable: true })
  @IsOptional()
  @Min(0)
  @Max(10_000)
  maxDedicatedNodes?: number | null;

  @Field(() => Int, {
    nullable: true,
    description: "Apps a workspace on the plan may have, 0..1000; null = no limit (set on every upsert).",
  })
  @IsOptional()
  @Min(0)
  @Max(1000)
  maxApps?: number | null;

  @Field(() => Int, { nullable: true, description: CAP_INPUT_DOC })
  @IsOptional()
  @Min(1)
  @Max(MAX_IN_FLIGHT_CAP)
  maxInFlightPerKey?: number | null;

  @Field(() => Int, { nullable: true, description: CAP_INPUT_DOC })
  @IsOptional()
  @Min(1)
  @Max(MAX_IN_FLIGHT_CAP)
  maxHeavyInFlightPerKey?: number | null;

  @Field(() => Boolean, {
    nullable: true,
    description:
      "Owners may switch to the plan themselves (changePlan). Omitted: false for a new plan, unchanged for an existing one.",
  })
  selfService?: boolean | null;
}

@Resolver(() => Plan)
export class PlanResolver {
  @Query(() => [Plan], {
    description:
      "The operator: every plan. An account: the self-service plans plus the current plans of its workspaces.",
  })
  plans(@Ctx() ctx: GqlContext): Promise<Plan[]> {
    return ctx.services.plans.list(ctx);
  }

  @Query(() => String, {
    nullable: true,
    description:
      "Where to ask the operator for a plan that is not self-service (PLAN_CONTACT: an email, a URL or text); null = not configured.",
  })
  planContact(@Ctx() ctx: GqlContext): string | null {
    return ctx.services.plans.contact(ctx);
  }

  @Mutation(() => Plan, { description: "Operator: create or edit a plan by name." })
  upsertPlan(@Arg("input", () => PlanInput) input: PlanInput, @Ctx() ctx: GqlContext): Promise<Plan> {
    return ctx.services.plans.upsert(ctx, input);
  }
}
