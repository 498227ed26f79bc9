/** Who is calling: the platform operator (ADMIN_TOKEN) or an account (session / personal token). */
export type Principal = { kind: "operator" } | { kind: "account"; accountId: string; tokenId: string };

/** Per-request GraphQL context. */
export interface RequestContext {
  principal: Principal | null;
  /** Client IP from the socket (used for login rate limiting). */
  ip: string;
}

export function isOperator(ctx: RequestContext): boolean {
  return ctx.principal?.kind === "operator";
}
