import { MethodMatcher, UserAgentMatcher } from "../../../shared/src/access/patterns";
import { type ErrorRow, GatewayError } from "../../../shared/src/jsonrpc/errors";
import type { AccessRecord } from "../../../shared/src/redis/records";
import { CompiledJwt } from "../auth/jwt";

/**
 * An app's access rules (docs/contracts.md#access-rules), compiled once per cached key record (compact.ts
 * shares one compiled object between records with equal rules). The hot path reads plain fields: an
 * undefined field is a rule the app does not have.
 */
export class CompiledAccess {
  /** Method allow- or deny-list, per request object (with the shared-node policy, forward.ts). */
  readonly methods: MethodRules | undefined;
  /** The app's own per-second cap (admission.ts applies the lower of it and the plan's). */
  readonly requestsPerSecond: number | undefined;
  /** The app's own per-second cap in compute units (admission.ts applies the lower of it and the plan's). */
  readonly computeUnitsPerSecond: number | undefined;
  /** The app's own daily cap in response units (admission.ts, Limits.appQuota). */
  readonly requestsPerDay: number | undefined;
  readonly userAgents: UserAgentMatcher | undefined;
  readonly jwt: CompiledJwt | undefined;
  /** A request's `User-Agent` / `Authorization` headers are needed: the transports read them only then. */
  readonly readsHeaders: boolean;

  constructor(r: AccessRecord) {
    const listed = r.methods.length > 0;
    this.methods = r.methodMode === "ALLOW" || listed ? new MethodRules(r.methodMode, r.methods) : undefined;
    this.requestsPerSecond = r.requestsPerSecond ?? undefined;
    this.computeUnitsPerSecond = r.computeUnitsPerSecond ?? undefined;
    this.requestsPerDay = r.requestsPerDay ?? undefined;
    this.userAgents = r.userAgents.length > 0 ? new UserAgentMatcher(r.userAgents) : undefined;
    this.jwt = r.jwt !== null ? new CompiledJwt(r.jwt) : undefined;
    this.readsHeaders = this.userAgents !== undefined || this.jwt !== undefined;
  }

  /** The refusal for a request's `User-Agent` ("" when it sent none), or undefined when it may pass. */
  userAgentRefusal(userAgent: string): ErrorRow | undefined {
    const ua = this.userAgents;
    if (ua === undefined || ua.matches(userAgent)) return undefined;
    return GatewayError.UserAgentNotAllowed;
  }
}

/**
 * The app's method list. ALLOW: only the listed methods (exact names or `namespace_*`) pass; DENY: the
 * listed ones are refused. Refused per request object with `method_not_allowed_by_app`, whose message
 * names the method and the list.
 */
export class MethodRules {
  private readonly matcher: MethodMatcher;
  private readonly allow: boolean;

  constructor(mode: "ALLOW" | "DENY", entries: readonly string[]) {
    this.matcher = new MethodMatcher(entries);
    this.allow = mode === "ALLOW";
  }

  /** The message for a refused method, or undefined when the rules let it through. */
  refusal(method: string): string | undefined {
    if (this.matcher.matches(method) === this.allow) return undefined;
    return this.allow
      ? `${method} is not on this app's method allow-list (access rules)`
      : `${method} is on this app's method deny-list (access rules)`;
  }
}
