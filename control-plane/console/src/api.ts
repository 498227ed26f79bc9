// GraphQL over plain fetch, same origin as the console (/graphql).

const TOKEN_KEY = "rpc-gateway.token";

// The session token lives in this tab's sessionStorage: it survives reloads, is gone when the tab closes,
// and is not shared with other tabs. localStorage would keep it on disk for as long as the token lives, for
// any script of this origin to read in any later session. The CSP (control-plane/src/console/static.ts)
// allows no inline or foreign script to read it meanwhile. A token an earlier build left in localStorage
// is dropped.
localStorage.removeItem(TOKEN_KEY);

export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

const WORKSPACE_KEY = "rpc-gateway.workspace";

/** The workspace picked in the switcher (kept across reloads); null: the account's default. */
export function getWorkspaceId(): string | null {
  return localStorage.getItem(WORKSPACE_KEY);
}

export function setWorkspaceId(id: string | null): void {
  if (id) localStorage.setItem(WORKSPACE_KEY, id);
  else localStorage.removeItem(WORKSPACE_KEY);
}

export interface GqlErrorItem {
  message: string;
  path?: (string | number)[];
  extensions?: { code?: string; field?: string; [k: string]: unknown };
}

/** A failed GraphQL call; `fields` maps an input field (extensions.field) to its message. */
export class GqlError extends Error {
  readonly errors: GqlErrorItem[];
  readonly fields: Record<string, string>;
  readonly code?: string;
  /** `extensions.reason` of the first error (e.g. INVITATION_EXPIRED). */
  readonly reason?: string;
  readonly status: number;
  constructor(errors: GqlErrorItem[], status: number) {
    super(errors.map((e) => e.message).join("; ") || `HTTP ${status}`);
    this.errors = errors;
    this.status = status;
    this.code = errors[0]?.extensions?.code;
    const reason = errors[0]?.extensions?.reason;
    this.reason = typeof reason === "string" ? reason : undefined;
    this.fields = {};
    for (const e of errors) {
      const f = e.extensions?.field;
      if (typeof f === "string" && !(f in this.fields)) this.fields[f] = e.message;
    }
  }
  /** Message of errors not tied to a field (shown at the top of a form). */
  get general(): string | null {
    const rest = this.errors.filter((e) => typeof e.extensions?.field !== "string");
    return rest.length ? rest.map((e) => e.message).join("; ") : null;
  }
}

const listeners = new Set<() => void>();
/** Called when the server says the token is no longer valid. */
export function onUnauthenticated(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export async function gql<T>(query: string, variables?: Record<string, unknown>): Promise<T> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  const token = getToken();
  if (token) headers.authorization = `Bearer ${token}`;
  let res: Response;
  try {
    res = await fetch("/graphql", { method: "POST", headers, body: JSON.stringify({ query, variables }) });
  } catch {
    throw new GqlError([{ message: "Cannot reach the server" }], 0);
  }
  let body: { data?: T; errors?: GqlErrorItem[] };
  try {
    body = await res.json();
  } catch {
    throw new GqlError([{ message: `Unexpected response (HTTP ${res.status})` }], res.status);
  }
  if (body.errors?.length) {
    const err = new GqlError(body.errors, res.status);
    if (err.code === "UNAUTHENTICATED" && token) for (const fn of listeners) fn();
    throw err;
  }
  return body.data as T;
}

export function errorMessage(err: unknown): string {
  if (err instanceof GqlError) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}

// ---- shapes of what the pages read ----

export type AppEnvironment = "DEVELOPMENT" | "PRODUCTION";
export type AllowlistKind = "ORIGIN" | "IP";

export interface Network {
  id: string;
  slug: string;
  name: string;
  protocol: "EVM" | "SUBSTRATE";
  chainId: number | null;
}

export interface AllowlistEntry {
  id: string;
  kind: AllowlistKind;
  value: string;
  createdAt: string;
}

export type MethodRuleMode = "ALLOW" | "DENY";

export interface AccessRules {
  methodMode: MethodRuleMode;
  methods: string[];
  requestsPerSecond: number | null;
  requestsPerDay: number | null;
  /** The app's own compute units per second (docs/compute-units.md); null = the plan's. */
  computeUnitsPerSecond: number | null;
  userAgents: string[];
  jwtRequired: boolean;
  jwtAudience: string | null;
  jwtSubject: string | null;
}

export interface JwtKey {
  id: string;
  kid: string;
  algorithm: "RS256" | "ES256";
  thumbprint: string;
  createdAt: string;
}

export interface Endpoint {
  network: Network;
  httpsUrl: string;
  wssUrl: string;
  exampleCommand: string;
}

export interface App {
  id: string;
  workspaceId: string;
  name: string;
  environment: AppEnvironment;
  apiKey: string;
  /** The caller is a VIEWER: apiKey and the endpoint URLs carry a masked key. */
  apiKeyMasked: boolean;
  apiKeyCreatedAt: string;
  previousApiKeyExpiresAt: string | null;
  createdAt: string;
  allowlist: AllowlistEntry[];
  endpoints: Endpoint[];
  accessRules: AccessRules;
  jwtKeys: JwtKey[];
}

export interface Plan {
  id: string;
  name: string;
  dailyRequestLimit: number;
  requestsPerSecond: number;
  monthlyRequestLimit: number | null;
  maxDedicatedNodes: number;
  maxApps: number | null;
  /** Calls / heavy calls in flight per key; null = the data plane's default. */
  maxInFlightPerKey: number | null;
  maxHeavyInFlightPerKey: number | null;
  /** Limits in compute units (docs/compute-units.md); null = none in that unit. */
  computeUnitsPerSecond: number | null;
  dailyComputeUnitLimit: number | null;
  monthlyComputeUnitLimit: number | null;
  /** The owner may switch to it in the console; other plans are assigned by the operator. */
  selfService: boolean;
}

export interface Today {
  count: number;
  limit: number;
  /** Compute units used today. */
  computeUnits: number;
  /** The plan's daily compute-unit limit; null = requests only. */
  computeUnitLimit: number | null;
  resetsAt: string;
}

/** The `today` selection every page that shows a Today asks for. */
export const TODAY_FIELDS = "today { count limit computeUnits computeUnitLimit resetsAt }";

export const APP_FIELDS = `id workspaceId name environment apiKey apiKeyMasked apiKeyCreatedAt previousApiKeyExpiresAt createdAt
  allowlist { id kind value createdAt }
  accessRules { methodMode methods requestsPerSecond computeUnitsPerSecond requestsPerDay userAgents jwtRequired jwtAudience jwtSubject }
  jwtKeys { id kid algorithm thumbprint createdAt }
  endpoints { network { id slug name protocol chainId } httpsUrl wssUrl exampleCommand }`;

export type WorkspaceRole = "OWNER" | "ADMIN" | "MEMBER" | "VIEWER";

export interface WorkspaceSummary {
  id: string;
  name: string;
  myRole: WorkspaceRole | null;
}

/**
 * What the console offers to a role (it hides what the server would refuse). The server's table
 * (control-plane/src/workspaces/roles.ts) is the rule; this only decides which buttons to show.
 */
export const ROLE_CAN = {
  createApps: ["OWNER", "ADMIN", "MEMBER"],
  manageApps: ["OWNER", "ADMIN"],
  manageKeys: ["OWNER", "ADMIN"],
  manageAccessRules: ["OWNER", "ADMIN"],
  manageNodes: ["OWNER", "ADMIN"],
  manageWebhooks: ["OWNER", "ADMIN"],
  manageMembers: ["OWNER", "ADMIN"],
  managePlan: ["OWNER"],
  readBilling: ["OWNER", "ADMIN"],
  transferOwnership: ["OWNER"],
} as const satisfies Record<string, readonly WorkspaceRole[]>;

export function roleCan(role: WorkspaceRole | null | undefined, what: keyof typeof ROLE_CAN): boolean {
  return role != null && (ROLE_CAN[what] as readonly WorkspaceRole[]).includes(role);
}

const RANK: Record<WorkspaceRole, number> = { OWNER: 3, ADMIN: 2, MEMBER: 1, VIEWER: 0 };

/** Roles strictly below `role` (those it may give and manage). */
export function rolesBelow(role: WorkspaceRole | null | undefined): WorkspaceRole[] {
  if (!role) return [];
  return (["ADMIN", "MEMBER", "VIEWER"] as const).filter((r) => RANK[r] < RANK[role]);
}

export function outranks(a: WorkspaceRole | null | undefined, b: WorkspaceRole): boolean {
  return a != null && RANK[a] > RANK[b];
}
