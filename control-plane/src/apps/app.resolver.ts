import { IsOptional, MaxLength } from "class-validator";
import {
  Arg,
  Ctx,
  Field,
  FieldResolver,
  ID,
  InputType,
  Int,
  Mutation,
  ObjectType,
  Query,
  Resolver,
  Root,
} from "type-graphql";
import { AllowlistEntry } from "../allowlist/allowlist-entry.entity";
import { GqlContext } from "../graphql/context";
import { Network } from "../networks/network.entity";
import { APP_NAME_MAX, App, AppEnvironment } from "./app.entity";
import { AppKeyView } from "./app.service";
import { buildEndpoints } from "./endpoints";

@InputType()
export class CreateAppInput {
  @Field()
  @MaxLength(APP_NAME_MAX)
  name: string;

  @Field(() => AppEnvironment)
  environment: AppEnvironment;
}

@InputType()
export class UpdateAppInput {
  @Field(() => String, { nullable: true })
  @IsOptional()
  @MaxLength(APP_NAME_MAX)
  name?: string | null;

  @Field(() => AppEnvironment, { nullable: true })
  environment?: AppEnvironment | null;
}

@ObjectType()
export class Endpoint {
  @Field(() => Network)
  network: Network;

  @Field()
  httpsUrl: string;

  @Field()
  wssUrl: string;

  /** A copy-pasteable curl command (eth_blockNumber on EVM, system_health on Substrate). */
  @Field()
  exampleCommand: string;
}

function keyView(app: App, ctx: GqlContext): Promise<AppKeyView> {
  ctx.keyViews ??= new Map();
  let v = ctx.keyViews.get(app.id);
  if (!v) {
    v = ctx.services.apps.keyViewFor(ctx, app);
    ctx.keyViews.set(app.id, v);
  }
  return v;
}

@Resolver(() => App)
export class AppResolver {
  @Query(() => [App], {
    description:
      "Apps of the caller's workspace (the operator passes workspaceId), oldest first. `first`: page size, 1..1000 (default all, at most 1000); `after`: the last id of the previous page. The query cost counts `first` apps.",
  })
  apps(
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Arg("first", () => Int, { nullable: true }) first: number | null,
    @Arg("after", () => ID, { nullable: true }) after: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<App[]> {
    return ctx.services.apps.list(ctx, workspaceId, { first, after });
  }

  @Query(() => App)
  app(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<App> {
    return ctx.services.apps.get(ctx, id);
  }

  @Mutation(() => App, { description: "Creates an app with its API key, in the caller's workspace." })
  createApp(
    @Arg("input", () => CreateAppInput) input: CreateAppInput,
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<App> {
    return ctx.services.apps.create(ctx, input, workspaceId);
  }

  @Mutation(() => App)
  updateApp(
    @Arg("id", () => ID) id: string,
    @Arg("input", () => UpdateAppInput) input: UpdateAppInput,
    @Ctx() ctx: GqlContext,
  ): Promise<App> {
    return ctx.services.apps.update(ctx, id, input);
  }

  @Mutation(() => ID, { description: "Deletes the app; its keys stop working at once. Returns the id." })
  async deleteApp(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<string> {
    return (await ctx.services.apps.delete(ctx, id)).id;
  }

  @Mutation(() => App, {
    description:
      "Replaces the app's API key. gracePeriodSeconds = 0 revokes the old key at once; otherwise it stays valid for that long (at most 604800 = 7 days).",
  })
  async regenerateApiKey(
    @Arg("appId", () => ID) appId: string,
    @Arg("gracePeriodSeconds", () => Int, { defaultValue: 0 }) gracePeriodSeconds: number,
    @Ctx() ctx: GqlContext,
  ): Promise<App> {
    const { app, view } = await ctx.services.apps.regenerateKey(ctx, appId, gracePeriodSeconds);
    // The response shows the key this call created (not a later one from a concurrent call).
    ctx.keyViews ??= new Map();
    ctx.keyViews.set(app.id, Promise.resolve(view));
    return app;
  }

  @FieldResolver(() => ID)
  workspaceId(@Root() app: App): string {
    return app.workspaceId;
  }

  @FieldResolver(() => String, {
    description: "The app's current API key; masked (apiKeyMasked) for a VIEWER of the workspace.",
  })
  async apiKey(@Root() app: App, @Ctx() ctx: GqlContext): Promise<string> {
    return (await keyView(app, ctx)).apiKey;
  }

  @FieldResolver(() => Boolean, {
    description: "True when apiKey (and the endpoints' URLs) carry a masked key: the caller is a VIEWER.",
  })
  async apiKeyMasked(@Root() app: App, @Ctx() ctx: GqlContext): Promise<boolean> {
    return (await keyView(app, ctx)).apiKeyMasked;
  }

  @FieldResolver(() => Date)
  async apiKeyCreatedAt(@Root() app: App, @Ctx() ctx: GqlContext): Promise<Date> {
    return (await keyView(app, ctx)).apiKeyCreatedAt;
  }

  @FieldResolver(() => Date, {
    nullable: true,
    description: "When the previous key (grace period) stops working.",
  })
  async previousApiKeyExpiresAt(@Root() app: App, @Ctx() ctx: GqlContext): Promise<Date | null> {
    return (await keyView(app, ctx)).previousApiKeyExpiresAt;
  }

  @FieldResolver(() => [AllowlistEntry])
  allowlist(@Root() app: App, @Ctx() ctx: GqlContext): Promise<AllowlistEntry[]> {
    return ctx.services.allowlist.listFor(ctx, app.id);
  }

  @FieldResolver(() => [Endpoint], { description: "Integration URLs, one per network." })
  async endpoints(@Root() app: App, @Ctx() ctx: GqlContext): Promise<Endpoint[]> {
    const [networks, view] = await Promise.all([ctx.services.networks.listFor(ctx), keyView(app, ctx)]);
    const { publicHttpUrl, publicWsUrl } = ctx.services.config;
    return buildEndpoints(networks, view.apiKey, publicHttpUrl, publicWsUrl);
  }
}
