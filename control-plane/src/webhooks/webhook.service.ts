import { randomUUID } from "node:crypto";
import { DataSource, EntityManager, In } from "typeorm";
import type { WebhookEventPayload } from "../../../shared/src/queue/names";
import type { RequestContext } from "../auth/context";
import { badInput, isUuid, notFound, unauthenticated } from "../common/errors";
import type { WebhookSettings } from "../config";
import { Permission } from "../workspaces/roles";
import type { WorkspaceService } from "../workspaces/workspace.service";
import { validWebhookUrl } from "./address-policy";
import { generateWebhookSecret } from "./signature";
import { maskWebhookUrl } from "./url-mask";
import { newWebhookEventId, recordDeliveries, type WebhookQueue } from "./webhook.queue";
import { WEBHOOK_TEST_EVENT, type WebhookEventType } from "./webhook.types";
import { WebhookAttempt } from "./webhook-attempt.entity";
import { WebhookDelivery } from "./webhook-delivery.entity";
import { WEBHOOK_DESCRIPTION_MAX, WebhookEndpoint } from "./webhook-endpoint.entity";
import { sealWebhookSecret } from "./webhook-secret";

/** Endpoints per workspace. */
export const MAX_WEBHOOK_ENDPOINTS_PER_WORKSPACE = 20;
/** Largest page of `webhookDeliveries`. */
export const MAX_DELIVERIES_PAGE = 100;

export interface WebhookEndpointInput {
  url: string;
  eventTypes: WebhookEventType[];
  description?: string | null;
  enabled?: boolean | null;
}

export interface WebhookEndpointUpdate {
  url?: string | null;
  eventTypes?: WebhookEventType[] | null;
  description?: string | null;
  enabled?: boolean | null;
}

/** An endpoint with its signing secret in clear: only what `create` and `rotateSecret` answer. */
export interface EndpointWithSecret {
  endpoint: WebhookEndpoint;
  secret: string;
}

function validEventTypes(types: WebhookEventType[]): WebhookEventType[] {
  const unique = [...new Set(types)];
  if (unique.length === 0) throw badInput("eventTypes", "Choose at least one event type");
  return unique;
}

function validDescription(raw: string | null | undefined): string | null {
  const d = raw?.trim() ?? "";
  if (d.length > WEBHOOK_DESCRIPTION_MAX) {
    throw badInput("description", `Description must be at most ${WEBHOOK_DESCRIPTION_MAX} characters`);
  }
  return d === "" ? null : d;
}

/**
 * Webhook endpoints of a workspace: the GraphQL side. Another workspace's endpoint or delivery answers
 * NOT_FOUND. Deliveries are made by the worker (webhook.processor.ts); `sendTest` only records and
 * queues one.
 */
export class WebhookService {
  constructor(
    private readonly ds: DataSource,
    private readonly workspaces: WorkspaceService,
    private readonly queue: WebhookQueue,
    private readonly encryptionKey: Buffer,
    private readonly settings: WebhookSettings,
  ) {}

  /**
   * The one permission rule of this service, in the role table's terms (workspaces/roles.ts): reading is
   * Permission.Read (every member), managing (create, update, delete, rotate, test) is
   * Permission.ManageWebhooks (OWNER and ADMIN); the operator may do both. A non-member gets NOT_FOUND,
   * so the existence of another workspace's endpoints is not revealed.
   */
  async assertCanManageWebhooks(
    ctx: RequestContext,
    workspaceId: string,
    access: "read" | "manage" = "manage",
  ): Promise<void> {
    await this.workspaces.check(
      ctx,
      workspaceId,
      access === "manage" ? Permission.ManageWebhooks : Permission.Read,
      "Webhook endpoint",
    );
  }

  /** An endpoint the caller may read (`access` "read") or manage; NOT_FOUND otherwise. */
  private async endpointForCaller(
    ctx: RequestContext,
    id: string,
    access: "read" | "manage",
    m: EntityManager = this.ds.manager,
  ): Promise<WebhookEndpoint> {
    if (!ctx.principal) throw unauthenticated();
    if (!isUuid(id)) throw notFound("Webhook endpoint");
    const endpoint = await m.getRepository(WebhookEndpoint).findOneBy({ id });
    if (!endpoint) throw notFound("Webhook endpoint");
    await this.assertCanManageWebhooks(ctx, endpoint.workspaceId, access);
    return endpoint;
  }

  async list(ctx: RequestContext, workspaceId?: string | null): Promise<WebhookEndpoint[]> {
    const { workspaceId: wsId } = await this.workspaces.authorize(ctx, workspaceId, Permission.Read);
    return this.ds
      .getRepository(WebhookEndpoint)
      .find({ where: { workspaceId: wsId }, order: { createdAt: "ASC", id: "ASC" } });
  }

  /**
   * The endpoint's URL as the caller may see it: whole for the roles that may read keys (OWNER, ADMIN,
   * MEMBER) and the operator, masked (`maskWebhookUrl`) for a VIEWER: such URLs often carry a token.
   * `endpoint` was reached through an authorised path.
   */
  async urlFor(ctx: RequestContext, endpoint: WebhookEndpoint): Promise<{ url: string; masked: boolean }> {
    const whole = await this.workspaces.seesKeys(ctx, endpoint.workspaceId);
    return whole ? { url: endpoint.url, masked: false } : { url: maskWebhookUrl(endpoint.url), masked: true };
  }

  get(ctx: RequestContext, id: string): Promise<WebhookEndpoint> {
    return this.endpointForCaller(ctx, id, "read");
  }

  async create(
    ctx: RequestContext,
    input: WebhookEndpointInput,
    workspaceId?: string | null,
  ): Promise<EndpointWithSecret> {
    const { workspaceId: wsId } = await this.workspaces.authorize(
      ctx,
      workspaceId,
      Permission.ManageWebhooks,
    );
    const url = validWebhookUrl(input.url, this.settings.allowPrivateAddresses);
    const eventTypes = validEventTypes(input.eventTypes);
    const description = validDescription(input.description);
    const secret = generateWebhookSecret();
    const endpoint = await this.ds.transaction(async (m) => {
      // Serialises creations in one workspace so the limit holds under concurrency.
      await m.query("SELECT id FROM workspaces WHERE id = $1 FOR UPDATE", [wsId]);
      const repo = m.getRepository(WebhookEndpoint);
      if ((await repo.countBy({ workspaceId: wsId })) >= MAX_WEBHOOK_ENDPOINTS_PER_WORKSPACE) {
        throw badInput(
          "url",
          `A workspace may have at most ${MAX_WEBHOOK_ENDPOINTS_PER_WORKSPACE} webhook endpoints`,
        );
      }
      // The row id is chosen here so the secret can be sealed to it before the insert.
      const id = randomUUID();
      return repo.save(
        repo.create({
          id,
          workspaceId: wsId,
          url,
          description,
          eventTypes,
          enabled: input.enabled ?? true,
          secretCiphertext: sealWebhookSecret(secret, this.encryptionKey, id),
          secretCreatedAt: new Date(),
        }),
      );
    });
    return { endpoint, secret };
  }

  async update(ctx: RequestContext, id: string, input: WebhookEndpointUpdate): Promise<WebhookEndpoint> {
    const endpoint = await this.endpointForCaller(ctx, id, "manage");
    if (input.url != null) endpoint.url = validWebhookUrl(input.url, this.settings.allowPrivateAddresses);
    if (input.eventTypes != null) endpoint.eventTypes = validEventTypes(input.eventTypes);
    if (input.description !== undefined) endpoint.description = validDescription(input.description);
    if (input.enabled != null) endpoint.enabled = input.enabled;
    return this.ds.getRepository(WebhookEndpoint).save(endpoint);
  }

  /** Deletes the endpoint with its deliveries; queued attempts find no row and do nothing. */
  async delete(ctx: RequestContext, id: string): Promise<WebhookEndpoint> {
    const endpoint = await this.endpointForCaller(ctx, id, "manage");
    await this.ds.getRepository(WebhookEndpoint).delete({ id: endpoint.id });
    return endpoint;
  }

  /** A new signing secret, effective for every attempt from now on (the old one stops at once). */
  async rotateSecret(ctx: RequestContext, id: string): Promise<EndpointWithSecret> {
    const endpoint = await this.endpointForCaller(ctx, id, "manage");
    const secret = generateWebhookSecret();
    endpoint.secretCiphertext = sealWebhookSecret(secret, this.encryptionKey, endpoint.id);
    endpoint.secretCreatedAt = new Date();
    await this.ds
      .getRepository(WebhookEndpoint)
      .update(
        { id: endpoint.id },
        { secretCiphertext: endpoint.secretCiphertext, secretCreatedAt: endpoint.secretCreatedAt },
      );
    return { endpoint, secret };
  }

  /**
   * Records a `webhook.test` delivery to this endpoint (enabled or not, whatever its event types) and
   * queues it; answers the PENDING delivery, which the worker then attempts like any other.
   */
  async sendTest(ctx: RequestContext, endpointId: string): Promise<WebhookDelivery> {
    const endpoint = await this.endpointForCaller(ctx, endpointId, "manage");
    const event: WebhookEventPayload = {
      id: newWebhookEventId(),
      type: WEBHOOK_TEST_EVENT,
      workspaceId: endpoint.workspaceId,
      occurredAt: new Date().toISOString(),
      data: { endpointId: endpoint.id, message: "Test event sent from the console or sendTestWebhook" },
    };
    const [id] = await recordDeliveries(this.ds, event, [endpoint.id]);
    await this.queue.addDelivery(id!);
    return this.ds.getRepository(WebhookDelivery).findOneByOrFail({ id: id! });
  }

  /** Newest first; `after` = the last delivery id of the previous page. */
  async deliveries(
    ctx: RequestContext,
    endpointId: string,
    first = 20,
    after?: string | null,
  ): Promise<WebhookDelivery[]> {
    const endpoint = await this.endpointForCaller(ctx, endpointId, "read");
    if (!Number.isInteger(first) || first < 1 || first > MAX_DELIVERIES_PAGE) {
      throw badInput("first", `first must be 1..${MAX_DELIVERIES_PAGE}`);
    }
    const qb = this.ds
      .getRepository(WebhookDelivery)
      .createQueryBuilder("d")
      .where("d.endpoint_id = :endpointId", { endpointId: endpoint.id })
      .orderBy("d.created_at", "DESC")
      .addOrderBy("d.id", "DESC")
      .take(first);
    if (after != null) {
      if (!isUuid(after)) throw badInput("after", "after must be a delivery id");
      qb.andWhere(
        "(d.created_at, d.id) < (SELECT c.created_at, c.id FROM webhook_deliveries c WHERE c.id = :after AND c.endpoint_id = :endpointId)",
        { after },
      );
    }
    const deliveries = await qb.getMany();
    const attempts = await this.attemptsOf(deliveries.map((d) => d.id));
    for (const d of deliveries) d.attempts = attempts.get(d.id) ?? [];
    return deliveries;
  }

  /** Attempts of several deliveries, oldest first, in one query. */
  async attemptsOf(deliveryIds: string[]): Promise<Map<string, WebhookAttempt[]>> {
    const byDelivery = new Map<string, WebhookAttempt[]>(deliveryIds.map((id) => [id, []]));
    if (deliveryIds.length === 0) return byDelivery;
    const rows = await this.ds
      .getRepository(WebhookAttempt)
      .find({ where: { deliveryId: In(deliveryIds) }, order: { attempt: "ASC" } });
    for (const r of rows) byDelivery.get(r.deliveryId)?.push(r);
    return byDelivery;
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
