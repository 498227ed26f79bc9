import { Arg, Ctx, Field, Int, Mutation, ObjectType, Query, Resolver, registerEnumType } from "type-graphql";
import { GqlContext } from "../graphql/context";
import type { MethodCostSource as Source } from "./method-cost.service";

export enum MethodCostSource {
  PLATFORM = "PLATFORM",
  NETWORK = "NETWORK",
}
registerEnumType(MethodCostSource, {
  name: "MethodCostSource",
  description: "PLATFORM: the platform default table; NETWORK: the network's own override.",
});

@ObjectType({ description: "One method's weight in compute units." })
export class MethodCostEntry {
  @Field()
  method: string;

  @Field(() => Int)
  units: number;

  @Field(() => MethodCostSource)
  source: Source;
}

@ObjectType({
  description:
    "Method weights in compute units: the platform default table (networkSlug null), or what one network charges (the platform table overlaid with its overrides).",
})
export class MethodCosts {
  @Field(() => String, { nullable: true })
  networkSlug: string | null;

  @Field(() => Int, { description: "The weight of any method not listed (method `*`)." })
  defaultUnits: number;

  @Field(() => MethodCostSource)
  defaultSource: Source;

  @Field(() => [MethodCostEntry])
  methods: MethodCostEntry[];
}

@Resolver()
export class MethodCostResolver {
  @Query(() => MethodCosts, {
    description:
      "Method weights in compute units (any signed-in account): the platform table, or a network's resolved weights.",
  })
  methodCosts(
    @Arg("networkSlug", () => String, { nullable: true }) networkSlug: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<MethodCosts> {
    return ctx.services.methodCosts.list(ctx, networkSlug ?? null);
  }

  @Mutation(() => MethodCosts, {
    description:
      "Operator: sets a method's weight (units 0..1000000) in the platform table (no networkSlug) or as a network's override; method `*` is the default weight. Republishes every network.",
  })
  setMethodCost(
    @Arg("networkSlug", () => String, { nullable: true }) networkSlug: string | null,
    @Arg("method", () => String) method: string,
    @Arg("units", () => Int) units: number,
    @Ctx() ctx: GqlContext,
  ): Promise<MethodCosts> {
    return ctx.services.methodCosts.set(ctx, networkSlug ?? null, method, units);
  }

  @Mutation(() => MethodCosts, {
    description:
      "Operator: removes a network's override (the platform weight applies again) or a platform entry (the default weight applies). The platform `*` cannot be removed.",
  })
  removeMethodCost(
    @Arg("networkSlug", () => String, { nullable: true }) networkSlug: string | null,
    @Arg("method", () => String) method: string,
    @Ctx() ctx: GqlContext,
  ): Promise<MethodCosts> {
    return ctx.services.methodCosts.remove(ctx, networkSlug ?? null, method);
  }
}
