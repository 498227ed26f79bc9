import { IsOptional, MaxLength } from "class-validator";
import { Arg, Ctx, Field, ID, InputType, Int, Mutation, ObjectType, Query, Resolver } from "type-graphql";
import { Account } from "../accounts/account.entity";
import { GqlContext } from "../graphql/context";
import { WORKSPACE_NAME_MAX } from "../workspaces/workspace.service";
import { AccessToken } from "./access-token.entity";
import { EMAIL_MAX, PASSWORD_MAX } from "./auth.service";

@InputType()
export class SignUpInput {
  @Field()
  @MaxLength(EMAIL_MAX)
  email: string;

  @Field()
  @MaxLength(PASSWORD_MAX)
  password: string;

  @Field(() => String, {
    nullable: true,
    description: "The account's own workspace; required unless signing up with an invitationToken.",
  })
  @IsOptional()
  @MaxLength(WORKSPACE_NAME_MAX)
  workspaceName?: string | null;

  @Field(() => String, {
    nullable: true,
    description:
      "A token from inviteMember: the new account joins that workspace (its email must be the invitation's).",
  })
  @IsOptional()
  @MaxLength(128)
  invitationToken?: string | null;
}

@ObjectType()
export class AuthPayload {
  /** Session token for `Authorization: Bearer TOKEN`; expires after SESSION_TTL_SECONDS. */
  @Field()
  token: string;

  @Field(() => Account)
  account: Account;
}

@ObjectType()
export class CreatedAccessToken {
  /** The token itself: shown only in this response. */
  @Field()
  token: string;

  @Field(() => AccessToken)
  accessToken: AccessToken;
}

@Resolver()
export class AuthResolver {
  @Mutation(() => AuthPayload, {
    description:
      "Creates an account and its workspace (free plan, account as OWNER). With input.invitationToken the account joins the invited workspace, and gets its own only if workspaceName is given. Rate limited per client IP.",
  })
  signUp(@Arg("input", () => SignUpInput) input: SignUpInput, @Ctx() ctx: GqlContext): Promise<AuthPayload> {
    return ctx.services.auth.signUp(input, ctx.ip);
  }

  @Mutation(() => AuthPayload, {
    description:
      "Rate limited per (email, client address) with exponential back-off, per client address and per email (a high ceiling).",
  })
  logIn(
    @Arg("email", () => String) email: string,
    @Arg("password", () => String) password: string,
    @Ctx() ctx: GqlContext,
  ): Promise<AuthPayload> {
    return ctx.services.auth.logIn(email, password, ctx.ip);
  }

  @Mutation(() => CreatedAccessToken, {
    description:
      "A personal token for automation (shown once). It expires after expiresInSeconds (60 up to ACCESS_TOKEN_MAX_TTL_SECONDS, 365 days by default), or ACCESS_TOKEN_TTL_SECONDS (30 days by default) when not given.",
  })
  createAccessToken(
    @Arg("name", () => String) name: string,
    @Arg("expiresInSeconds", () => Int, { nullable: true }) expiresInSeconds: number | null,
    @Ctx() ctx: GqlContext,
  ): Promise<CreatedAccessToken> {
    return ctx.services.auth.createAccessToken(ctx, name, expiresInSeconds);
  }

  @Mutation(() => Boolean, {
    description: "Revokes the token this request is made with (log out). Needs an account token.",
  })
  logOut(@Ctx() ctx: GqlContext): Promise<boolean> {
    return ctx.services.auth.logOut(ctx);
  }

  @Mutation(() => Boolean, {
    description:
      "Revokes every token of the caller's account (this one included) and closes its graphql-ws connections.",
  })
  logOutEverywhere(@Ctx() ctx: GqlContext): Promise<boolean> {
    return ctx.services.auth.logOutEverywhere(ctx);
  }

  @Mutation(() => Boolean, {
    description:
      "Changes the caller's password (currentPassword must be right; rate limited as logIn). Revokes every other token of the account; the one this request is made with keeps working.",
  })
  changePassword(
    @Arg("currentPassword", () => String) currentPassword: string,
    @Arg("newPassword", () => String) newPassword: string,
    @Ctx() ctx: GqlContext,
  ): Promise<boolean> {
    return ctx.services.auth.changePassword(ctx, currentPassword, newPassword);
  }

  @Mutation(() => AccessToken)
  revokeAccessToken(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<AccessToken> {
    return ctx.services.auth.revokeAccessToken(ctx, id);
  }

  @Query(() => [AccessToken], {
    description:
      "The caller's live tokens (not revoked or expired), newest first, at most 100 (never the secrets).",
  })
  accessTokens(@Ctx() ctx: GqlContext): Promise<AccessToken[]> {
    return ctx.services.auth.listAccessTokens(ctx);
  }

  @Query(() => Account)
  me(@Ctx() ctx: GqlContext): Promise<Account> {
    return ctx.services.auth.account(ctx);
  }
}
