import type { BatchLoader } from "../common/batch-loader";
import type { WorkspaceRole } from "../workspaces/roles";

/** Who is calling: the platform operator (ADMIN_TOKEN) or an account (session / personal token). */
export type Principal =
  | { kind: "operator" }
  | {
      kind: "account";
      accountId: string;
      tokenId: string;
      /** The account is a platform operator (accounts.is_operator), read when the token was checked. */
      operator?: boolean;
    };

/** Per-request GraphQL context. */
export interface RequestContext {
  principal: Principal | null;
  /** Client IP from the socket (used for login rate limiting). */
  ip: string;
  /**
   * The caller's role per workspace id, memoised for one HTTP request (one query reads the role of an app's
   * workspace once, not per field). Absent for graphql-ws: a subscription lives on, and must see a role
   * change or a removal at its next event.
   */
  roles?: Map<string, Promise<WorkspaceRole | null>>;
  /** Per-request batch loaders by name (graphql/batch-loader.ts): one query for a field of many parents. */
  loaders?: Map<string, BatchLoader<unknown, unknown>>;
}

export function isOperator(ctx: RequestContext): boolean {
  return ctx.principal?.kind === "operator";
}

/**
 * The ADMIN_TOKEN or an operator account: may manage platform resources (networks, upstreams, plans,
 * any workspace's plan, the operator queries). Never a workspace's member rights: inside a workspace an
 * operator account is what its membership says (isOperator above stays ADMIN_TOKEN only).
 */
export function isPlatformOperator(ctx: RequestContext): boolean {
  const p = ctx.principal;
  return p?.kind === "operator" || (p?.kind === "account" && p.operator === true);
}
