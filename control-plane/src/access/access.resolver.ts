import { IsOptional, MaxLength } from "class-validator";
import { Arg, Ctx, Field, FieldResolver, ID, InputType, Int, Mutation, Resolver, Root } from "type-graphql";
import { App } from "../apps/app.entity";
import { GqlContext } from "../graphql/context";
import { KEY_TEXT_MAX, KID_MAX } from "./access.validation";
import { AppAccessRules, MethodRuleMode } from "./access-rules.entity";
import { AppJwtKey, JwtAlgorithm } from "./jwt-key.entity";

@InputType({
  description:
    "A change to an app's access rules: omitted fields keep their value; null clears a cap, a claim or a list.",
})
export class AccessRulesInput {
  @Field(() => MethodRuleMode, { nullable: true })
  methodMode?: MethodRuleMode | null;

  @Field(() => [String], { nullable: true, description: "Exact names (eth_call) or namespace_* patterns." })
  methods?: string[] | null;

  @Field(() => Int, { nullable: true })
  requestsPerSecond?: number | null;

  @Field(() => Int, { nullable: true, description: "The app's own per-second cap in compute units." })
  computeUnitsPerSecond?: number | null;

  @Field(() => Int, { nullable: true })
  requestsPerDay?: number | null;

  @Field(() => [String], { nullable: true, description: "User-Agent globs, * = any run of characters." })
  userAgents?: string[] | null;

  @Field(() => Boolean, { nullable: true })
  jwtRequired?: boolean | null;

  @Field(() => String, { nullable: true })
  jwtAudience?: string | null;

  @Field(() => String, { nullable: true })
  jwtSubject?: string | null;
}

@InputType()
export class JwtKeyInput {
  @Field({ description: "Key id, matched against a token's kid header." })
  @MaxLength(KID_MAX)
  kid: string;

  @Field({ description: "The public key: PEM (PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE) or a JWK as JSON." })
  @MaxLength(KEY_TEXT_MAX)
  key: string;

  @Field(() => JwtAlgorithm, {
    nullable: true,
    description: "Checked against the key; inferred when omitted.",
  })
  @IsOptional()
  algorithm?: JwtAlgorithm | null;
}

/** Access rules and JWT keys: App fields and their mutations (rules live in AccessService). */
@Resolver(() => App)
export class AccessResolver {
  @FieldResolver(() => AppAccessRules, {
    description: "Method rules, caps, User-Agent patterns and JWT settings.",
  })
  accessRules(@Root() app: App, @Ctx() ctx: GqlContext): Promise<AppAccessRules> {
    return ctx.services.access.rulesFor(ctx, app.id);
  }

  @FieldResolver(() => [AppJwtKey], {
    description: "Public keys the app's JWTs may be signed with (at most 3).",
  })
  jwtKeys(@Root() app: App, @Ctx() ctx: GqlContext): Promise<AppJwtKey[]> {
    return ctx.services.access.jwtKeysFor(ctx, app.id);
  }

  @Mutation(() => AppAccessRules, {
    description: "Changes an app's access rules (OWNER, ADMIN); the data planes apply them within a second.",
  })
  setAppAccessRules(
    @Arg("appId", () => ID) appId: string,
    @Arg("input", () => AccessRulesInput) input: AccessRulesInput,
    @Ctx() ctx: GqlContext,
  ): Promise<AppAccessRules> {
    return ctx.services.access.setRules(ctx, appId, input);
  }

  @Mutation(() => AppJwtKey, {
    description: "Registers a JWT public key (RS256 or ES256) for the app; at most 3.",
  })
  addJwtKey(
    @Arg("appId", () => ID) appId: string,
    @Arg("input", () => JwtKeyInput) input: JwtKeyInput,
    @Ctx() ctx: GqlContext,
  ): Promise<AppJwtKey> {
    return ctx.services.access.addJwtKey(ctx, appId, input);
  }

  @Mutation(() => AppJwtKey, { description: "Removes a JWT key; returns it." })
  removeJwtKey(
    @Arg("appId", () => ID) appId: string,
    @Arg("keyId", () => ID) keyId: string,
    @Ctx() ctx: GqlContext,
  ): Promise<AppJwtKey> {
    return ctx.services.access.removeJwtKey(ctx, appId, keyId);
  }
}
