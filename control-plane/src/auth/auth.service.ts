import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { hash as argon2Hash, verify as argon2Verify } from "@node-rs/argon2";
import { DataSource, In, IsNull, MoreThan, Repository } from "typeorm";
import { Account } from "../accounts/account.entity";
import { badInput, forbidden, isUniqueViolation, isUuid, notFound, unauthenticated } from "../common/errors";
import { PublicationService } from "../publication/publication.service";
import type { MemberService } from "../workspaces/member.service";
import { insertOwnedWorkspace, validWorkspaceName } from "../workspaces/workspace.service";
import { AccessToken, AccessTokenKind } from "./access-token.entity";
import { Principal, RequestContext } from "./context";
import { LoginRateLimiter } from "./login-rate-limit";
import { SignUpRateLimiter } from "./signup-rate-limit";

export const EMAIL_MAX = 254;
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 256;
export const TOKEN_NAME_MAX = 64;

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function sha256(v: string): string {
  return createHash("sha256").update(v, "utf8").digest("hex");
}

/** Tokens: a kind prefix + 32 random bytes (base64url). Only the SHA-256 is stored. */
function newToken(kind: AccessTokenKind): string {
  return `${kind === AccessTokenKind.SESSION ? "rgs_" : "rgp_"}${randomBytes(32).toString("base64url")}`;
}

export interface IssuedToken {
  token: string;
  account: Account;
}

export interface AuthServiceOptions {
  adminToken: string;
  sessionTtlSeconds: number;
  /** createAccessToken without `expiresInSeconds`. */
  accessTokenTtlSeconds: number;
  /** The longest `expiresInSeconds` createAccessToken accepts. */
  accessTokenMaxTtlSeconds: number;
}

/** Most tokens `accessTokens` lists (newest first): each log-in adds a session token. */
export const ACCESS_TOKENS_LIST_MAX = 100;
/** Shortest personal-token lifetime that may be asked for. */
const PERSONAL_TOKEN_MIN_TTL_SECONDS = 60;

export class AuthService {
  private readonly adminTokenHash: Buffer;
  /** Told the id of every token revoked through this process (graphql-ws closes its sockets at once). */
  private readonly revokedListeners = new Set<(tokenId: string) => void>();

  constructor(
    private readonly ds: DataSource,
    private readonly limiter: LoginRateLimiter,
    private readonly publication: PublicationService,
    private readonly opts: AuthServiceOptions,
    private readonly signUpLimiter?: SignUpRateLimiter,
    /** Accepts an invitation inside sign-up's transaction (`signUp(invitationToken)`). */
    private readonly members?: MemberService,
  ) {
    this.adminTokenHash = createHash("sha256").update(opts.adminToken, "utf8").digest();
  }

  /** Bearer token -> principal. Missing header = anonymous; an unknown/expired/revoked token = UNAUTHENTICATED. */
  async authenticate(authorization: string | undefined): Promise<Principal | null> {
    if (!authorization) return null;
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!m) throw unauthenticated("Authorization header must be `Bearer TOKEN`");
    const token = m[1]!;
    const h = createHash("sha256").update(token, "utf8").digest();
    if (timingSafeEqual(h, this.adminTokenHash)) return { kind: "operator" };
    // The account's operator flag comes with the token, read per request (not cached), so revoking the
    // flag takes effect at the next call.
    const row = await this.ds.getRepository(AccessToken).findOne({
      where: { tokenHash: h.toString("hex") },
      relations: { account: true },
    });
    if (!row || row.revokedAt || (row.expiresAt && row.expiresAt.getTime() <= Date.now())) {
      throw unauthenticated("Invalid, expired or revoked token");
    }
    return { kind: "account", accountId: row.accountId, tokenId: row.id, operator: row.account.isOperator };
  }

  private validateEmail(raw: string): string {
    const email = raw.trim().toLowerCase();
    if (email.length > EMAIL_MAX || !EMAIL_RE.test(email))
      throw badInput("email", "Not a valid email address");
    return email;
  }

  /**
   * Registers a listener for tokens revoked by this process (logOut, revokeAccessToken); returns the
   * unregister function. Other processes' revocations are found by `liveTokenIds` polling.
   */
  onTokenRevoked(fn: (tokenId: string) => void): () => void {
    this.revokedListeners.add(fn);
    return () => this.revokedListeners.delete(fn);
  }

  private revoked(tokenId: string): void {
    for (const fn of this.revokedListeners) fn(tokenId);
  }

  /** Of these token ids, the ones still usable now (not revoked, not expired, not deleted). */
  async liveTokenIds(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.ds.getRepository(AccessToken).find({
      select: { id: true, expiresAt: true },
      where: { id: In(ids), revokedAt: IsNull() },
    });
    const now = Date.now();
    return new Set(rows.filter((r) => !r.expiresAt || r.expiresAt.getTime() > now).map((r) => r.id));
  }

  /**
   * Creates the account with its own workspace (free plan, OWNER). With `invitationToken` the account
   * also joins the invited workspace, and its own workspace is created only when `workspaceName` is given;
   * a refused invitation (expired, revoked, used, another email) creates nothing. `ip` is the client IP
   * (sign-ups are throttled per IP before any work is done).
   */
  async signUp(
    input: {
      email: string;
      password: string;
      workspaceName?: string | null;
      invitationToken?: string | null;
    },
    ip?: string,
  ): Promise<IssuedToken> {
    if (ip !== undefined) await this.signUpLimiter?.hit(ip);
    const email = this.validateEmail(input.email);
    if (input.password.length < PASSWORD_MIN || input.password.length > PASSWORD_MAX) {
      throw badInput("password", `Password must be ${PASSWORD_MIN}-${PASSWORD_MAX} characters`);
    }
    const invitation = input.invitationToken || null;
    const members = this.members;
    if (invitation && !members) throw new Error("signUp with an invitation needs the member service");
    const workspaceName =
      invitation && !input.workspaceName?.trim() ? null : validWorkspaceName(input.workspaceName ?? "");
    const passwordHash = await argon2Hash(input.password);
    const workspaceIds: string[] = [];
    let issued: IssuedToken;
    try {
      issued = await this.ds.transaction(async (m) => {
        const account = await m
          .getRepository(Account)
          .save(m.getRepository(Account).create({ email, passwordHash }));
        if (workspaceName !== null)
          workspaceIds.push((await insertOwnedWorkspace(m, account.id, workspaceName)).id);
        if (invitation && members) await members.acceptIn(m, account, invitation);
        const token = await this.issue(
          m.getRepository(AccessToken),
          account.id,
          AccessTokenKind.SESSION,
          "session",
        );
        return { token, account };
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw badInput("email", "An account with this email already exists");
      throw err;
    }
    if (workspaceIds.length > 0) {
      await this.publication.safely("workspace", () => this.publication.publishWorkspaces(workspaceIds));
    }
    return issued;
  }

  async logIn(rawEmail: string, password: string, ip: string): Promise<IssuedToken> {
    const email = rawEmail.trim().toLowerCase().slice(0, EMAIL_MAX);
    await this.limiter.hit(email, ip);
    const account = await this.ds.getRepository(Account).findOneBy({ email });
    // Hash anyway when the account is unknown, so response timing doesn't reveal which emails exist.
    let ok = false;
    if (account) {
      ok = await argon2Verify(account.passwordHash, password.slice(0, PASSWORD_MAX)).catch(() => false);
    } else {
      await argon2Hash(password.slice(0, PASSWORD_MAX));
    }
    if (!account || !ok) throw unauthenticated("Wrong email or password");
    await this.limiter.succeeded(email, ip);
    const token = await this.issue(
      this.ds.getRepository(AccessToken),
      account.id,
      AccessTokenKind.SESSION,
      "session",
    );
    return { token, account };
  }

  /** A new session token for an account (used by the demo bootstrap; no password involved). */
  issueSessionToken(accountId: string): Promise<string> {
    return this.issue(this.ds.getRepository(AccessToken), accountId, AccessTokenKind.SESSION, "session");
  }

  private async issue(
    repo: Repository<AccessToken>,
    accountId: string,
    kind: AccessTokenKind,
    name: string,
    expiresInSeconds?: number | null,
  ): Promise<string> {
    const token = newToken(kind);
    // Every token expires: sessions after SESSION_TTL_SECONDS, personal tokens when asked (at most
    // ACCESS_TOKEN_MAX_TTL_SECONDS) or after ACCESS_TOKEN_TTL_SECONDS.
    const ttl =
      kind === AccessTokenKind.SESSION
        ? this.opts.sessionTtlSeconds
        : (expiresInSeconds ?? this.opts.accessTokenTtlSeconds);
    await repo.save(
      repo.create({
        accountId,
        tokenHash: sha256(token),
        kind,
        name,
        expiresAt: new Date(Date.now() + ttl * 1000),
      }),
    );
    return token;
  }

  async createAccessToken(
    ctx: RequestContext,
    name: string,
    expiresInSeconds?: number | null,
  ): Promise<{ token: string; accessToken: AccessToken }> {
    const accountId = requireAccount(ctx);
    const trimmed = name.trim();
    if (trimmed.length < 1 || trimmed.length > TOKEN_NAME_MAX) {
      throw badInput("name", `Token name must be 1-${TOKEN_NAME_MAX} characters`);
    }
    const max = this.opts.accessTokenMaxTtlSeconds;
    if (
      expiresInSeconds != null &&
      (!Number.isInteger(expiresInSeconds) ||
        expiresInSeconds < PERSONAL_TOKEN_MIN_TTL_SECONDS ||
        expiresInSeconds > max)
    ) {
      throw badInput(
        "expiresInSeconds",
        `expiresInSeconds must be between ${PERSONAL_TOKEN_MIN_TTL_SECONDS} and ${max} (ACCESS_TOKEN_MAX_TTL_SECONDS)`,
      );
    }
    const repo = this.ds.getRepository(AccessToken);
    const token = await this.issue(repo, accountId, AccessTokenKind.PERSONAL, trimmed, expiresInSeconds);
    const accessToken = await repo.findOneByOrFail({ tokenHash: sha256(token) });
    return { token, accessToken };
  }

  /**
   * Ends the caller's session: revokes the token this request was made with, so it stops working at once
   * (the console calls this before forgetting the token). Other tokens of the account are untouched.
   */
  async logOut(ctx: RequestContext): Promise<boolean> {
    requireAccount(ctx);
    const principal = ctx.principal as Extract<Principal, { kind: "account" }>;
    const repo = this.ds.getRepository(AccessToken);
    const row = await repo.findOneBy({ id: principal.tokenId, accountId: principal.accountId });
    if (!row) throw unauthenticated("Invalid, expired or revoked token");
    if (!row.revokedAt) {
      row.revokedAt = new Date();
      await repo.save(row);
    }
    this.revoked(row.id);
    return true;
  }

  /** Revokes one of the caller's tokens (another account's token id answers NOT_FOUND). */
  async revokeAccessToken(ctx: RequestContext, id: string): Promise<AccessToken> {
    const accountId = requireAccount(ctx);
    if (!isUuid(id)) throw notFound("Access token");
    const repo = this.ds.getRepository(AccessToken);
    const row = await repo.findOneBy({ id, accountId });
    if (!row) throw notFound("Access token");
    if (!row.revokedAt) {
      row.revokedAt = new Date();
      await repo.save(row);
    }
    this.revoked(row.id);
    return row;
  }

  /**
   * Ends every session of the account: revokes all its tokens (personal ones and the one this request
   * is made with included), so each answers 401 from the next request, and closes the graphql-ws sockets
   * opened with any of them (at once in this process, within GRAPHQL_WS_AUTH_RECHECK_MS in others).
   */
  async logOutEverywhere(ctx: RequestContext): Promise<boolean> {
    const accountId = requireAccount(ctx);
    await this.revokeAllOf(accountId, null);
    return true;
  }

  /**
   * Changes the caller's password after checking the current one (a wrong one is BAD_USER_INPUT on
   * `currentPassword`; guesses count against the log-in throttle, so a stolen session cannot try
   * passwords faster than a log-in could). Every other token of the account is revoked (a password is
   * usually changed because it, or a device, leaked); the token of this request keeps working.
   */
  async changePassword(ctx: RequestContext, currentPassword: string, newPassword: string): Promise<boolean> {
    const accountId = requireAccount(ctx);
    const principal = ctx.principal as Extract<Principal, { kind: "account" }>;
    const repo = this.ds.getRepository(Account);
    const account = await repo.findOneByOrFail({ id: accountId });
    await this.limiter.hit(account.email, ctx.ip);
    const ok = await argon2Verify(account.passwordHash, currentPassword.slice(0, PASSWORD_MAX)).catch(
      () => false,
    );
    if (!ok) throw badInput("currentPassword", "The current password is wrong");
    await this.limiter.succeeded(account.email, ctx.ip);
    if (newPassword.length < PASSWORD_MIN || newPassword.length > PASSWORD_MAX) {
      throw badInput("newPassword", `Password must be ${PASSWORD_MIN}-${PASSWORD_MAX} characters`);
    }
    await repo.update({ id: accountId }, { passwordHash: await argon2Hash(newPassword) });
    await this.revokeAllOf(accountId, principal.tokenId);
    return true;
  }

  /** Revokes every live token of the account but `keep`, and tells the listeners of every token of it. */
  private async revokeAllOf(accountId: string, keep: string | null): Promise<void> {
    const repo = this.ds.getRepository(AccessToken);
    const rows = await repo.find({ select: { id: true, revokedAt: true }, where: { accountId } });
    const now = new Date();
    await repo
      .createQueryBuilder()
      .update()
      .set({ revokedAt: now })
      .where("account_id = :accountId AND revoked_at IS NULL", { accountId })
      .andWhere(keep ? "id <> :keep" : "TRUE", { keep })
      .execute();
    // Sockets opened with an already revoked token are closed too (they would be at the next re-check).
    for (const r of rows) if (r.id !== keep) this.revoked(r.id);
  }

  /** The caller's live tokens (not revoked, not expired), newest first, at most ACCESS_TOKENS_LIST_MAX. */
  async listAccessTokens(ctx: RequestContext): Promise<AccessToken[]> {
    const accountId = requireAccount(ctx);
    return this.ds.getRepository(AccessToken).find({
      where: { accountId, revokedAt: IsNull(), expiresAt: MoreThan(new Date(Date.now())) },
      order: { createdAt: "DESC", id: "DESC" },
      take: ACCESS_TOKENS_LIST_MAX,
    });
  }

  async account(ctx: RequestContext): Promise<Account> {
    const accountId = requireAccount(ctx);
    return this.ds.getRepository(Account).findOneByOrFail({ id: accountId });
  }
}

/** The caller's account id; the operator (no account) and anonymous callers are refused. */
export function requireAccount(ctx: RequestContext): string {
  if (!ctx.principal) throw unauthenticated();
  if (ctx.principal.kind !== "account")
    throw forbidden("This operation needs an account token, not the operator token");
  return ctx.principal.accountId;
}

export function requireAuthenticated(ctx: RequestContext): void {
  if (!ctx.principal) throw unauthenticated();
}
