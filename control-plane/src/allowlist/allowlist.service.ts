import { DataSource, In } from "typeorm";
import { RequestContext } from "../auth/context";
import { batchLoader, groupBy } from "../common/batch-loader";
import { badInput, isUniqueViolation, isUuid, notFound } from "../common/errors";
import { PublicationService } from "../publication/publication.service";
import { Permission } from "../workspaces/roles";
import { WorkspaceService } from "../workspaces/workspace.service";
import { normaliseAllowlistValue } from "./allowlist.validation";
import { AllowlistEntry, AllowlistKind } from "./allowlist-entry.entity";

/** At most this many entries per app (keeps key records small). */
export const ALLOWLIST_MAX_ENTRIES = 100;

export class AllowlistService {
  constructor(
    private readonly ds: DataSource,
    private readonly workspaces: WorkspaceService,
    private readonly publication: PublicationService,
  ) {}

  /** An app's entries, batched with the other apps of the request (`app` reached through an authorised path). */
  listFor(ctx: RequestContext, appId: string): Promise<AllowlistEntry[]> {
    return batchLoader(
      ctx,
      "app.allowlist",
      async (appIds: string[]) =>
        groupBy(
          await this.ds
            .getRepository(AllowlistEntry)
            .find({ where: { appId: In(appIds) }, order: { createdAt: "ASC", id: "ASC" } }),
          (e) => e.appId,
        ),
      (): AllowlistEntry[] => [],
    ).load(appId);
  }

  async list(appId: string): Promise<AllowlistEntry[]> {
    return this.ds
      .getRepository(AllowlistEntry)
      .find({ where: { appId }, order: { createdAt: "ASC", id: "ASC" } });
  }

  async add(
    ctx: RequestContext,
    appId: string,
    input: { kind: AllowlistKind; value: string },
  ): Promise<AllowlistEntry> {
    const app = await this.workspaces.appForCaller(ctx, appId, Permission.ManageAccessRules);
    const value = normaliseAllowlistValue(input.kind, input.value);
    const repo = this.ds.getRepository(AllowlistEntry);
    if ((await repo.countBy({ appId: app.id })) >= ALLOWLIST_MAX_ENTRIES) {
      throw badInput("value", `An app may have at most ${ALLOWLIST_MAX_ENTRIES} allowlist entries`);
    }
    if (await repo.existsBy({ appId: app.id, kind: input.kind, value })) {
      throw badInput("value", `${value} is already on the allowlist`);
    }
    let entry: AllowlistEntry;
    try {
      entry = await repo.save(repo.create({ appId: app.id, kind: input.kind, value }));
    } catch (err) {
      if (isUniqueViolation(err)) throw badInput("value", `${value} is already on the allowlist`);
      throw err;
    }
    await this.publication.safely("allowlist", () => this.publication.publishKeys([app.id]));
    return entry;
  }

  async remove(ctx: RequestContext, appId: string, entryId: string): Promise<AllowlistEntry> {
    const app = await this.workspaces.appForCaller(ctx, appId, Permission.ManageAccessRules);
    if (!isUuid(entryId)) throw notFound("Allowlist entry");
    const repo = this.ds.getRepository(AllowlistEntry);
    const entry = await repo.findOneBy({ id: entryId, appId: app.id });
    if (!entry) throw notFound("Allowlist entry");
    await repo.delete({ id: entry.id });
    await this.publication.safely("allowlist", () => this.publication.publishKeys([app.id]));
    return entry;
  }
}
