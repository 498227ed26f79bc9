import { calculateJwkThumbprint } from "jose";
import { DataSource, EntityManager, In } from "typeorm";
import { MAX_JWT_KEYS_PER_APP } from "../../../shared/src/redis/records";
import { RequestContext } from "../auth/context";
import { batchLoader, groupBy } from "../common/batch-loader";
import { badInput, isUniqueViolation, isUuid, notFound } from "../common/errors";
import { PublicationService } from "../publication/publication.service";
import { Permission } from "../workspaces/roles";
import { WorkspaceService } from "../workspaces/workspace.service";
import {
  COMPUTE_UNITS_PER_SECOND_MAX,
  type JwtAlgorithmName,
  normaliseMethods,
  normaliseUserAgents,
  parsePublicKey,
  REQUESTS_PER_DAY_MAX,
  REQUESTS_PER_SECOND_MAX,
  validCap,
  validClaim,
  validKid,
} from "./access.validation";
import { AppAccessRules, MethodRuleMode } from "./access-rules.entity";
import { AppJwtKey, JwtAlgorithm } from "./jwt-key.entity";

/**
 * A change to an app's rules: an omitted field (undefined) keeps its value; null clears a cap, a claim or
 * a list (`methodMode` and `jwtRequired` ignore null).
 */
export interface AccessRulesChange {
  methodMode?: MethodRuleMode | null;
  methods?: string[] | null;
  requestsPerSecond?: number | null;
  computeUnitsPerSecond?: number | null;
  requestsPerDay?: number | null;
  userAgents?: string[] | null;
  jwtRequired?: boolean | null;
  jwtAudience?: string | null;
  jwtSubject?: string | null;
}

/**
 * Access rules and JWT keys of apps (docs/access-rules.md, docs/jwt.md). Reads need the app's READ
 * permission, writes MANAGE_ACCESS_RULES (OWNER, ADMIN; control-plane/src/workspaces/roles.ts). Every
 * write re-publishes the app's key records (`KeyRecord.access`), so the data planes apply it within a
 * second.
 */
export class AccessService {
  constructor(
    private readonly ds: DataSource,
    private readonly workspaces: WorkspaceService,
    private readonly publication: PublicationService,
  ) {}

  /** The app's rules (`AppAccessRules.none` when it never set any); `app` was reached through an authorised path. */
  /** An app's rules, batched with the other apps of the request (`app` reached through an authorised path). */
  rulesFor(ctx: RequestContext, appId: string): Promise<AppAccessRules> {
    return batchLoader(
      ctx,
      "app.accessRules",
      async (appIds: string[]) =>
        new Map(
          (await this.ds.getRepository(AppAccessRules).find({ where: { appId: In(appIds) } })).map((r) => [
            r.appId,
            r,
          ]),
        ),
      (appId: string) => AppAccessRules.none(appId),
    ).load(appId);
  }

  /** An app's JWT keys, batched with the other apps of the request. */
  jwtKeysFor(ctx: RequestContext, appId: string): Promise<AppJwtKey[]> {
    return batchLoader(
      ctx,
      "app.jwtKeys",
      async (appIds: string[]) =>
        groupBy(
          await this.ds
            .getRepository(AppJwtKey)
            .find({ where: { appId: In(appIds) }, order: { createdAt: "ASC", id: "ASC" } }),
          (k) => k.appId,
        ),
      (): AppJwtKey[] => [],
    ).load(appId);
  }

  async rules(appId: string, m: EntityManager = this.ds.manager): Promise<AppAccessRules> {
    return (await m.getRepository(AppAccessRules).findOneBy({ appId })) ?? AppAccessRules.none(appId);
  }

  jwtKeys(appId: string, m: EntityManager = this.ds.manager): Promise<AppJwtKey[]> {
    return m.getRepository(AppJwtKey).find({ where: { appId }, order: { createdAt: "ASC", id: "ASC" } });
  }

  async setRules(ctx: RequestContext, appId: string, change: AccessRulesChange): Promise<AppAccessRules> {
    const app = await this.workspaces.appForCaller(ctx, appId, Permission.ManageAccessRules);
    const saved = await this.ds.transaction(async (m) => {
      await lockApp(m, app.id);
      const r = await this.rules(app.id, m);
      if (change.methodMode != null) r.methodMode = change.methodMode;
      if (change.methods !== undefined) r.methods = normaliseMethods(change.methods ?? []);
      if (change.requestsPerSecond !== undefined)
        r.requestsPerSecond = validCap(
          "requestsPerSecond",
          change.requestsPerSecond,
          REQUESTS_PER_SECOND_MAX,
        );
      if (change.computeUnitsPerSecond !== undefined)
        r.computeUnitsPerSecond = validCap(
          "computeUnitsPerSecond",
          change.computeUnitsPerSecond,
          COMPUTE_UNITS_PER_SECOND_MAX,
        );
      if (change.requestsPerDay !== undefined)
        r.requestsPerDay = validCap("requestsPerDay", change.requestsPerDay, REQUESTS_PER_DAY_MAX);
      if (change.userAgents !== undefined) r.userAgents = normaliseUserAgents(change.userAgents ?? []);
      if (change.jwtRequired != null) r.jwtRequired = change.jwtRequired;
      if (change.jwtAudience !== undefined) r.jwtAudience = validClaim("jwtAudience", change.jwtAudience);
      if (change.jwtSubject !== undefined) r.jwtSubject = validClaim("jwtSubject", change.jwtSubject);
      if (r.methodMode === MethodRuleMode.ALLOW && r.methods.length === 0) {
        throw badInput(
          "methods",
          "An allow-list needs at least one method (an empty one would refuse every call); use DENY for no rule",
        );
      }
      if (r.jwtRequired && (await m.getRepository(AppJwtKey).countBy({ appId: app.id })) === 0) {
        throw badInput("jwtRequired", "Register a JWT public key before requiring JWTs");
      }
      return m.getRepository(AppAccessRules).save(r);
    });
    await this.publication.safely("access rules", () => this.publication.publishKeys([app.id]));
    return saved;
  }

  async addJwtKey(
    ctx: RequestContext,
    appId: string,
    input: { kid: string; key: string; algorithm?: JwtAlgorithm | null },
  ): Promise<AppJwtKey> {
    const app = await this.workspaces.appForCaller(ctx, appId, Permission.ManageAccessRules);
    const kid = validKid(input.kid);
    const parsed = parsePublicKey(input.key, (input.algorithm ?? null) as JwtAlgorithmName | null);
    const thumbprint = await calculateJwkThumbprint(
      parsed.jwk as Parameters<typeof calculateJwkThumbprint>[0],
    );
    let saved: AppJwtKey;
    try {
      saved = await this.ds.transaction(async (m) => {
        await lockApp(m, app.id);
        const repo = m.getRepository(AppJwtKey);
        const keys = await repo.findBy({ appId: app.id });
        if (keys.length >= MAX_JWT_KEYS_PER_APP) {
          throw badInput(
            "key",
            `An app may register at most ${MAX_JWT_KEYS_PER_APP} JWT keys; remove one first`,
          );
        }
        if (keys.some((k) => k.kid === kid))
          throw badInput("kid", `The app already has a key with kid ${kid}`);
        if (keys.some((k) => k.thumbprint === thumbprint)) {
          throw badInput("key", "This public key is already registered for the app");
        }
        return repo.save(
          repo.create({
            appId: app.id,
            kid,
            algorithm: parsed.algorithm as JwtAlgorithm,
            jwk: parsed.jwk,
            thumbprint,
          }),
        );
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw badInput("kid", `The app already has a key with kid ${kid}`);
      throw err;
    }
    await this.publication.safely("jwt keys", () => this.publication.publishKeys([app.id]));
    return saved;
  }

  /** Removes a key; the last one cannot go while the app requires JWTs (every request would be refused). */
  async removeJwtKey(ctx: RequestContext, appId: string, keyId: string): Promise<AppJwtKey> {
    const app = await this.workspaces.appForCaller(ctx, appId, Permission.ManageAccessRules);
    if (!isUuid(keyId)) throw notFound("JWT key");
    const removed = await this.ds.transaction(async (m) => {
      await lockApp(m, app.id);
      const repo = m.getRepository(AppJwtKey);
      const key = await repo.findOneBy({ id: keyId, appId: app.id });
      if (!key) throw notFound("JWT key");
      const rules = await this.rules(app.id, m);
      if (rules.jwtRequired && (await repo.countBy({ appId: app.id })) === 1) {
        throw badInput("keyId", "The app requires JWTs: turn that off before removing its last key");
      }
      await repo.delete({ id: key.id });
      return key;
    });
    await this.publication.safely("jwt keys", () => this.publication.publishKeys([app.id]));
    return removed;
  }
}

/** Serialises the rule and key changes of one app (the key count and "required needs a key" hold). */
async function lockApp(m: EntityManager, appId: string): Promise<void> {
  const locked: unknown[] = await m.query("SELECT id FROM apps WHERE id = $1 FOR UPDATE", [appId]);
  if (locked.length === 0) throw notFound("App"); // deleted meanwhile
}
