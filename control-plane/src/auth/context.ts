import type { WorkspaceRole } from "../workspaces/roles";

/** Who is calling: the platform operator (ADMIN_TOKEN) or an account (session / personal token). */
export type Principal = { kind: "operator" } | { kind: "account"; accountId: string; tokenId: string };

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
}

export function isOperator(ctx: RequestContext): boolean {
  return ctx.principal?.kind === "operator";
}
