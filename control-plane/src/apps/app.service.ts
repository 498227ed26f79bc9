import { randomUUID } from "node:crypto";
import { DataSource, EntityManager, In, IsNull } from "typeorm";
import { generateApiKey, hashApiKey } from "../../../shared/src/crypto/api-key";
import { RequestContext } from "../auth/context";
import { batchLoader, groupBy } from "../common/batch-loader";
import { badInput, isUuid, notFound } from "../common/errors";
import { openKey, sealKey, storeRebound } from "../common/key-ciphertext";
import { PublicationService } from "../publication/publication.service";
import type { WebhookEmitter } from "../webhooks/webhook.emitter";
import { WebhookEventType } from "../webhooks/webhook.types";
import { maskKey, Permission } from "../workspaces/roles";
import { WorkspaceService } from "../workspaces/workspace.service";
import { ApiKey } from "./api-key.entity";
import { APP_NAME_MAX, App, AppEnvironment } from "./app.entity";

/** Longest grace period a replaced key may stay valid: 7 days. */
export const MAX_GRACE_PERIOD_SECONDS = 604_800;
/** Apps per workspace (a guard against runaway automation). */
export const MAX_APPS_PER_WORKSPACE = 1000;

/** A page of `apps`: see `listForWorkspace`. */
export interface AppPage {
  first?: number | null;
  after?: string | null;
}

export interface AppKeyView {
  /** In clear, or masked (`maskKey`) for a caller whose role may not read keys. */
  apiKey: string;
  apiKeyMasked: boolean;
  apiKeyCreatedAt: Date;
  previousApiKeyExpiresAt: Date | null;
}

function validName(raw: string): string {
  const name = raw.trim();
  if (name.length < 1 || name.length > APP_NAME_MAX) {
    throw badInput("name", `App name must be 1-${APP_NAME_MAX} characters`);
  }
  return name;
}

export class AppService {
  constructor(
    private readonly ds: DataSource,
    private readonly workspaces: WorkspaceService,
    private readonly publication: PublicationService,
    private readonly encryptionKey: Buffer,
    private readonly webhooks: WebhookEmitter,
  ) {}

  private async insertKey(m: EntityManager, appId: string): Promise<string> {
    const key = generateApiKey();
    // The row id is chosen here so the ciphertext can be sealed to it before the insert.
    const id = randomUUID();
    const repo = m.getRepository(ApiKey);
    await repo.insert(
      repo.create({
        id,
        appId,
        keyHash: hashApiKey(key),
        keyCiphertext: sealKey(key, this.encryptionKey, "api_keys", id),
      }),
    );
    return key;
  }

  async list(ctx: RequestContext, workspaceId?: string | null, page: AppPage = {}): Promise<App[]> {
    const { workspaceId: wsId } = await this.workspaces.authorize(ctx, workspaceId, Permission.Read);
    return this.listForWorkspace(wsId, page);
  }

  /**
   * A workspace's apps, oldest first: `first` of them (1..MAX_APPS_PER_WORKSPACE, default all) after the
   * app `after` (the last id of the previous page; an id not of this workspace starts nowhere: empty).
   */
  async listForWorkspace(workspaceId: string, page: AppPage = {}): Promise<App[]> {
    const first = page.first ?? MAX_APPS_PER_WORKSPACE;
    if (!Number.isInteger(first) || first < 1 || first > MAX_APPS_PER_WORKSPACE) {
      throw badInput("first", `first must be 1..${MAX_APPS_PER_WORKSPACE}`);
    }
    const q = this.ds
      .getRepository(App)
      .createQueryBuilder("a")
      .where("a.workspace_id = :workspaceId", { workspaceId })
      .orderBy("a.created_at", "ASC")
      .addOrderBy("a.id", "ASC")
      .take(first);
    if (page.after != null) {
      if (!isUuid(page.after)) throw badInput("after", "after must be an app id from the previous page");
      q.andWhere(
        "(a.created_at, a.id) > (SELECT p.created_at, p.id FROM apps p WHERE p.id = :after AND p.workspace_id = :workspaceId)",
        { after: page.after },
      );
    }
    return q.getMany();
  }

  get(ctx: RequestContext, id: string): Promise<App> {
    return this.workspaces.appForCaller(ctx, id, Permission.Read);
  }

  /** Creates the app and its first key in one transaction. */
  async create(
    ctx: RequestContext,
    input: { name: string; environment: AppEnvironment },
    workspaceId?: string | null,
  ): Promise<App> {
    const name = validName(input.name);
    const { workspaceId: wsId } = await this.workspaces.authorize(ctx, workspaceId, Permission.CreateApps);
    const app = await this.ds.transaction(async (m) => {
      if ((await m.getRepository(App).countBy({ workspaceId: wsId })) >= MAX_APPS_PER_WORKSPACE) {
        throw badInput("name", `A workspace may have at most ${MAX_APPS_PER_WORKSPACE} apps`);
      }
      const repo = m.getRepository(App);
      const created = await repo.save(
        repo.create({ workspaceId: wsId, name, environment: input.environment }),
      );
      await this.insertKey(m, created.id);
      return created;
    });
    await this.publication.safely("app keys", () => this.publication.publishKeys([app.id]));
    return app;
  }

  async update(
    ctx: RequestContext,
    id: string,
    input: { name?: string | null; environment?: AppEnvironment | null },
  ): Promise<App> {
    const app = await this.workspaces.appForCaller(ctx, id, Permission.ManageApps);
    if (input.name != null) app.name = validName(input.name);
    if (input.environment != null) app.environment = input.environment;
    return this.ds.getRepository(App).save(app);
  }

  /** Deletes the app (keys and allowlist cascade); its keys stop working at once. */
  async delete(ctx: RequestContext, id: string): Promise<App> {
    const app = await this.workspaces.appForCaller(ctx, id, Permission.ManageApps);
    const hashes = await this.ds.transaction(async (m) => {
      const keys = await m
        .getRepository(ApiKey)
        .find({ where: { appId: app.id }, lock: { mode: "pessimistic_write" } });
      await m.getRepository(App).delete({ id: app.id });
      return keys.map((k) => k.keyHash);
    });
    await this.publication.safely("app delete", () => this.publication.publishKeys([], hashes));
    return app;
  }

  /**
   * Replaces the app's current key. `gracePeriodSeconds` = 0: the old key is revoked at once. Otherwise
   * the old key stays valid until now + grace (at most 7 days); a key already in a grace period from an
   * earlier regeneration is revoked, so at most one previous key is live.
   */
  async regenerateKey(
    ctx: RequestContext,
    appId: string,
    gracePeriodSeconds = 0,
  ): Promise<{ app: App; view: AppKeyView }> {
    if (
      !Number.isInteger(gracePeriodSeconds) ||
      gracePeriodSeconds < 0 ||
      gracePeriodSeconds > MAX_GRACE_PERIOD_SECONDS
    ) {
      throw badInput(
        "gracePeriodSeconds",
        `gracePeriodSeconds must be 0..${MAX_GRACE_PERIOD_SECONDS} (7 days)`,
      );
    }
    const app = await this.workspaces.appForCaller(ctx, appId, Permission.ManageKeys);
    const { revoked, view } = await this.ds.transaction(async (m) => {
      // Serialise concurrent regenerations of one app.
      const locked: unknown[] = await m.query("SELECT id FROM apps WHERE id = $1 FOR UPDATE", [app.id]);
      if (locked.length === 0) throw notFound("App"); // deleted meanwhile
      const repo = m.getRepository(ApiKey);
      const live = await repo.find({ where: { appId: app.id, revokedAt: IsNull() } });
      const now = new Date();
      const revokedHashes: string[] = [];
      for (const k of live) {
        const isCurrent = k.expiresAt === null;
        if (isCurrent && gracePeriodSeconds > 0) {
          await repo.update({ id: k.id }, { expiresAt: new Date(now.getTime() + gracePeriodSeconds * 1000) });
        } else {
          await repo.update({ id: k.id }, { revokedAt: now });
          if (k.expiresAt === null || k.expiresAt > now) revokedHashes.push(k.keyHash);
        }
      }
      const newKey = await this.insertKey(m, app.id);
      const created = await repo.findOneByOrFail({ keyHash: hashApiKey(newKey) });
      const view: AppKeyView = {
        apiKey: newKey,
        apiKeyMasked: false,
        apiKeyCreatedAt: created.createdAt,
        previousApiKeyExpiresAt:
          gracePeriodSeconds > 0 ? new Date(now.getTime() + gracePeriodSeconds * 1000) : null,
      };
      return { revoked: revokedHashes, view };
    });
    await this.publication.safely("key regeneration", () => this.publication.publishKeys([app.id], revoked));
    // Not awaited: with Redis down, queueing waits for the reconnect, and the answer must not.
    void this.webhooks.emit(app.workspaceId, WebhookEventType.KEY_REGENERATED, {
      kind: "app",
      appId: app.id,
      appName: app.name,
      previousKeyExpiresAt: view.previousApiKeyExpiresAt?.toISOString() ?? null,
    });
    return { app, view };
  }

  /**
   * The key as the caller may see it: in clear for roles that may read keys, masked for a VIEWER (the
   * endpoints built from it carry the masked key too). `app` was reached through an authorised path.
   */
  async keyViewFor(ctx: RequestContext, app: App): Promise<AppKeyView> {
    // The live key rows of every app of this request come in one query (a list of apps asks for all).
    const rows = batchLoader(
      ctx,
      "app.liveKeys",
      async (appIds: string[]) =>
        groupBy(
          await this.ds.getRepository(ApiKey).find({ where: { appId: In(appIds), revokedAt: IsNull() } }),
          (k) => k.appId,
        ),
      (): ApiKey[] => [],
    );
    const [view, clear] = await Promise.all([
      rows.load(app.id).then((keys) => this.viewOf(app.id, keys)),
      this.workspaces.seesKeys(ctx, app.workspaceId),
    ]);
    return clear ? view : { ...view, apiKey: maskKey(view.apiKey), apiKeyMasked: true };
  }

  /**
   * The current key (decrypted) and the previous key's expiry, unmasked (internal: `keyViewFor` is what
   * callers get). A ciphertext that is not this row's answers KEY_UNREADABLE; a legacy unbound one is
   * rewritten bound on the way.
   */
  async keyView(appId: string): Promise<AppKeyView> {
    return this.viewOf(
      appId,
      await this.ds.getRepository(ApiKey).find({ where: { appId, revokedAt: IsNull() } }),
    );
  }

  /** The view from an app's live (unrevoked) key rows. */
  private async viewOf(appId: string, keys: ApiKey[]): Promise<AppKeyView> {
    const current = keys.find((k) => k.expiresAt === null);
    if (!current) throw new Error(`app ${appId} has no current key`);
    const now = Date.now();
    const previous = keys
      .filter((k) => k.expiresAt !== null && k.expiresAt.getTime() > now)
      .sort((a, b) => b.expiresAt!.getTime() - a.expiresAt!.getTime())[0];
    const opened = openKey(current, this.encryptionKey, "api_keys");
    if (opened.rebound)
      await storeRebound(this.ds, "api_keys", current.id, current.keyCiphertext, opened.rebound);
    return {
      apiKey: opened.key,
      apiKeyMasked: false,
      apiKeyCreatedAt: current.createdAt,
      previousApiKeyExpiresAt: previous?.expiresAt ?? null,
    };
  }
}
