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
import type { GqlContext } from "../graphql/context";
import type { EndpointWithSecret } from "./webhook.service";
import { WebhookEventType } from "./webhook.types";
import { WebhookAttempt } from "./webhook-attempt.entity";
import { WebhookDelivery } from "./webhook-delivery.entity";
import { WEBHOOK_DESCRIPTION_MAX, WEBHOOK_URL_MAX, WebhookEndpoint } from "./webhook-endpoint.entity";

@InputType()
export class CreateWebhookEndpointInput {
  @Field({ description: "http:// or https:// URL, no user name or password." })
  @MaxLength(WEBHOOK_URL_MAX)
  url: string;

  @Field(() => [WebhookEventType])
  eventTypes: WebhookEventType[];

  @Field(() => String, { nullable: true })
  @IsOptional()
  @MaxLength(WEBHOOK_DESCRIPTION_MAX)
  description?: string | null;

  @Field({ defaultValue: true })
  enabled: boolean;
}

@InputType()
export class UpdateWebhookEndpointInput {
  @Field(() => String, { nullable: true })
  @IsOptional()
  @MaxLength(WEBHOOK_URL_MAX)
  url?: string | null;

  @Field(() => [WebhookEventType], { nullable: true })
  eventTypes?: WebhookEventType[] | null;

  @Field(() => String, { nullable: true, description: "Empty string clears it." })
  @IsOptional()
  @MaxLength(WEBHOOK_DESCRIPTION_MAX)
  description?: string | null;

  @Field(() => Boolean, { nullable: true })
  enabled?: boolean | null;
}

@ObjectType()
export class WebhookEndpointWithSecret {
  @Field(() => WebhookEndpoint)
  endpoint: WebhookEndpoint;

  @Field({
    description:
      "The signing secret (whsec_…), shown only in this answer: store it now. Verify deliveries with it (docs/webhooks.md).",
  })
  secret: string;
}

@Resolver(() => WebhookEndpoint)
export class WebhookEndpointResolver {
  @Query(() => [WebhookEndpoint], {
    description: "Webhook endpoints of the caller's workspace (the operator passes workspaceId).",
  })
  webhookEndpoints(
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<WebhookEndpoint[]> {
    return ctx.services.webhooks.list(ctx, workspaceId);
  }

  @Query(() => WebhookEndpoint)
  webhookEndpoint(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<WebhookEndpoint> {
    return ctx.services.webhooks.get(ctx, id);
  }

  @Query(() => [WebhookDelivery], {
    description:
      "Deliveries to one endpoint, newest first, with their attempts. `after`: the last id of the previous page.",
  })
  webhookDeliveries(
    @Arg("endpointId", () => ID) endpointId: string,
    @Arg("first", () => Int, { defaultValue: 20, description: "1..100" }) first: number,
    @Arg("after", () => ID, { nullable: true }) after: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<WebhookDelivery[]> {
    return ctx.services.webhooks.deliveries(ctx, endpointId, first, after);
  }

  @FieldResolver(() => String, {
    description:
      "Where events are POSTed. A VIEWER sees only scheme, host and port, the rest masked (urlMasked): such URLs often carry a token.",
  })
  async url(@Root() endpoint: WebhookEndpoint, @Ctx() ctx: GqlContext): Promise<string> {
    return (await ctx.services.webhooks.urlFor(ctx, endpoint)).url;
  }

  @FieldResolver(() => Boolean, { description: "True when url is masked: the caller is a VIEWER." })
  async urlMasked(@Root() endpoint: WebhookEndpoint, @Ctx() ctx: GqlContext): Promise<boolean> {
    return (await ctx.services.webhooks.urlFor(ctx, endpoint)).masked;
  }

  @Mutation(() => WebhookEndpointWithSecret, {
    description: "Registers an endpoint; the answer holds its signing secret, which is not shown again.",
  })
  createWebhookEndpoint(
    @Arg("input", () => CreateWebhookEndpointInput) input: CreateWebhookEndpointInput,
    @Arg("workspaceId", () => ID, { nullable: true }) workspaceId: string | null,
    @Ctx() ctx: GqlContext,
  ): Promise<EndpointWithSecret> {
    return ctx.services.webhooks.create(ctx, input, workspaceId);
  }

  @Mutation(() => WebhookEndpoint)
  updateWebhookEndpoint(
    @Arg("id", () => ID) id: string,
    @Arg("input", () => UpdateWebhookEndpointInput) input: UpdateWebhookEndpointInput,
    @Ctx() ctx: GqlContext,
  ): Promise<WebhookEndpoint> {
    return ctx.services.webhooks.update(ctx, id, input);
  }

  @Mutation(() => ID, { description: "Deletes the endpoint and its delivery history. Returns the id." })
  async deleteWebhookEndpoint(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<string> {
    return (await ctx.services.webhooks.delete(ctx, id)).id;
  }

  @Mutation(() => WebhookEndpointWithSecret, {
    description:
      "Replaces the signing secret at once (the old one signs nothing more); the new one is shown only here.",
  })
  rotateWebhookSecret(@Arg("id", () => ID) id: string, @Ctx() ctx: GqlContext): Promise<EndpointWithSecret> {
    return ctx.services.webhooks.rotateSecret(ctx, id);
  }

  @Mutation(() => WebhookDelivery, {
    description:
      "Queues a webhook.test event to this endpoint (even when disabled); answers the pending delivery.",
  })
  sendTestWebhook(
    @Arg("endpointId", () => ID) endpointId: string,
    @Ctx() ctx: GqlContext,
  ): Promise<WebhookDelivery> {
    return ctx.services.webhooks.sendTest(ctx, endpointId);
  }
}

@Resolver(() => WebhookDelivery)
export class WebhookDeliveryResolver {
  @FieldResolver(() => [WebhookAttempt], { description: "Oldest first." })
  async attempts(@Root() delivery: WebhookDelivery, @Ctx() ctx: GqlContext): Promise<WebhookAttempt[]> {
    if (delivery.attempts) return delivery.attempts;
    return (await ctx.services.webhooks.attemptsOf([delivery.id])).get(delivery.id) ?? [];
  }
}
