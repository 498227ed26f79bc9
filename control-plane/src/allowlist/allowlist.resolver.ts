import { MaxLength } from "class-validator";
import { Arg, Ctx, Field, ID, InputType, Mutation, Resolver } from "type-graphql";
import { GqlContext } from "../graphql/context";
import { ALLOWLIST_VALUE_MAX } from "./allowlist.validation";
import { AllowlistEntry, AllowlistKind } from "./allowlist-entry.entity";

@InputType()
export class AllowlistEntryInput {
  @Field(() => AllowlistKind)
  kind: AllowlistKind;

  /** ORIGIN: `https://app.example.com` or `*.example.com`; IP: address or CIDR, v4 or v6. */
  @Field()
  @MaxLength(ALLOWLIST_VALUE_MAX)
  value: string;
}

/**
 * With entries of both kinds a request passes when it matches ANY listed origin OR ANY listed IP; an
 * empty allowlist accepts every caller (see allowlist.validation.ts).
 */
@Resolver()
export class AllowlistResolver {
  @Mutation(() => AllowlistEntry)
  addAllowlistEntry(
    @Arg("appId", () => ID) appId: string,
    @Arg("input", () => AllowlistEntryInput) input: AllowlistEntryInput,
    @Ctx() ctx: GqlContext,
  ): Promise<AllowlistEntry> {
    return ctx.services.allowlist.add(ctx, appId, input);
  }

  @Mutation(() => AllowlistEntry, { description: "Returns the removed entry." })
  removeAllowlistEntry(
    @Arg("appId", () => ID) appId: string,
    @Arg("entryId", () => ID) entryId: string,
    @Ctx() ctx: GqlContext,
  ): Promise<AllowlistEntry> {
    return ctx.services.allowlist.remove(ctx, appId, entryId);
  }
}
